"""What the per-file conversion budget costs (issue 14 item 7d): in-process vs a reused worker vs a worker per file.

What runs
---------
The small files (< ``--max-kb``) of ``$KI_SHARED_DIR/corpus/real`` (text, mail, DOCX, HTML, RTF,
text-layer PDFs), converted by ki's router with OCR off:

* ``in-process``: ``pipeline.convert.isolate = false`` (no budget);
* ``reused worker``: ki's default, one ``ki.convert.isolation`` worker process reused across files
  (its start is paid once, before timing);
* ``worker per file``: a fresh worker process for every file (start included), the alternative
  to reuse.

Prints the median and the total milliseconds per file for each, and the load average.
Run: ``.venv/bin/python bench/convert_isolation.py [--rounds 3]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KI_SHARED_DIR") or REPO.parent / "shared")
EXTENSIONS = {".txt", ".eml", ".docx", ".html", ".htm", ".rtf", ".pdf", ".msg"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--real", type=Path, default=SHARED / "corpus" / "real")
    parser.add_argument("--max-kb", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from ki.config.settings import KiConfig
    from ki.convert import isolation
    from ki.convert.router import convert_bytes
    from ki.errors import UnsupportedDocument

    files = [(p.name, p.read_bytes()) for p in sorted(args.real.rglob("*"))
             if p.suffix.lower() in EXTENSIONS and p.is_file() and 0 < p.stat().st_size <= args.max_kb * 1024]
    no_ocr = {"ocr": {"enabled": False}}
    inproc = KiConfig.model_validate({"pipeline": {**no_ocr, "convert": {"isolate": False}}})
    isolated = KiConfig.model_validate({"pipeline": no_ocr})

    def convert(config: KiConfig, name: str, data: bytes) -> None:
        try:
            convert_bytes(data, name, config)
        except UnsupportedDocument:
            pass

    convert(isolated, *files[0])  # start the reused worker before timing
    results: dict[str, list[float]] = {"in-process": [], "reused worker": [], "worker per file": []}
    for _ in range(args.rounds):
        for label, config in (("in-process", inproc), ("reused worker", isolated)):
            for name, data in files:
                started = time.perf_counter()
                convert(config, name, data)
                results[label].append(time.perf_counter() - started)
        budget = isolation.Budget(isolated.pipeline.convert.memory_mb, isolated.pipeline.convert.timeout_seconds)
        for name, data in files[:10]:  # a fresh worker per file: ten are enough to see its cost
            started = time.perf_counter()
            pool = isolation.WorkerPool(budget)
            try:
                pool.run("ki.convert.router:convert_bytes", data, name, config=inproc)
            except UnsupportedDocument:
                pass
            pool.close()
            results["worker per file"].append(time.perf_counter() - started)
    isolation.reset_pools()
    print(f"{len(files)} files <= {args.max_kb} KB, {args.rounds} rounds; load average {os.getloadavg()}")
    print(f"{'mode':16} {'median ms/file':>14} {'mean ms/file':>12}")
    for label, times in results.items():
        print(f"{label:16} {statistics.median(times) * 1000:14.1f} {statistics.mean(times) * 1000:12.1f}")


if __name__ == "__main__":
    main()
