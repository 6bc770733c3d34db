"""What the per-file conversion budget costs (issue 14 item 7d): in-process vs a reused worker vs a worker per file.

What runs
---------
The small files (< ``--max-kb``) of ``$KI_SHARED_DIR/corpus/real`` (text, mail, DOCX, HTML, RTF,
text-layer PDFs), converted by ki's router with OCR off:

* ``in-process``: ``pipeline.convert.isolate = false`` (no budget);
* ``reused worker``: ki's default, one ``ki.adapters.convert.isolation`` worker process reused across files
  (its start is paid once, before timing);
* ``worker per file``: a fresh worker process for every file (start included), the alternative
  to reuse.

Prints the median and the total milliseconds per file for each, and the load average.

``--huge``: instead, generated huge files (a 64 MB cp1252 text, a DOCX whose document.xml is
150 MB — under the 200 MB zip-member cap —, a mail with a 40 MB attachment), each converted by a
fresh worker under the default budget and under ``--small-mb``; prints the outcome (``ok`` or the
quarantine reason), the seconds and the worker's peak resident size against the limit.

Run: ``.venv/bin/python bench/convert_isolation.py [--rounds 3] [--huge [--small-mb 512]]``
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
    parser.add_argument("--huge", action="store_true", help="peak memory on generated huge files instead")
    parser.add_argument("--small-mb", type=int, default=512, help="the second, tight memory budget (--huge)")
    args = parser.parse_args()
    if args.huge:
        huge(args.small_mb)
        return

    from ki.adapters.convert import isolation
    from ki.adapters.convert.router import convert_bytes
    from ki.config.settings import KiConfig
    from ki.core.errors import UnsupportedDocument

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
                pool.run("ki.adapters.convert.router:convert_bytes", data, name, config=inproc)
            except UnsupportedDocument:
                pass
            pool.close()
            results["worker per file"].append(time.perf_counter() - started)
    isolation.reset_pools()
    print(f"{len(files)} files <= {args.max_kb} KB, {args.rounds} rounds; load average {os.getloadavg()}")
    print(f"{'mode':16} {'median ms/file':>14} {'mean ms/file':>12}")
    for label, times in results.items():
        print(f"{label:16} {statistics.median(times) * 1000:14.1f} {statistics.mean(times) * 1000:12.1f}")


def _huge_files() -> list[tuple[str, bytes]]:
    import io
    import zipfile
    from email.message import EmailMessage

    text = ("Zeile mit Text und Umlauten äöü, Vertrag § 12 Abs. 3\n" * 1_200_000).encode("cp1252")[: 64 << 20]
    paragraph = "<w:p><w:r><w:t>Der Mieter zahlt die Miete bis zum dritten Werktag.</w:t></w:r></w:p>"
    body = paragraph * ((150 << 20) // len(paragraph))
    ns = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    docx = io.BytesIO()
    with zipfile.ZipFile(docx, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml",
                   '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                   '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
                   '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-'
                   'officedocument.wordprocessingml.document.main+xml"/></Types>')
        z.writestr("_rels/.rels",
                   '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
                   'relationships"><Relationship Id="r1" Type="http://schemas.openxmlformats.org/officeDocument/'
                   '2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>')
        z.writestr("word/document.xml", f'<?xml version="1.0"?><w:document {ns}><w:body>{body}</w:body></w:document>')
    mail = EmailMessage()
    mail["From"], mail["To"], mail["Subject"] = "a@example.org", "b@example.org", "Anlage"
    mail.set_content("Anbei die Akte.")
    mail.add_attachment(os.urandom(40 << 20), maintype="application", subtype="octet-stream", filename="akte.bin")
    return [("huge.txt", text), ("huge.docx", docx.getvalue()), ("huge.eml", mail.as_bytes())]


def huge(small_mb: int) -> None:
    """Convert generated huge files in fresh workers under the default and a tight memory budget."""
    from ki.adapters.convert import isolation
    from ki.config.settings import KiConfig
    from ki.core.errors import UnsupportedDocument

    config = KiConfig.model_validate({"pipeline": {"ocr": {"enabled": False}, "convert": {"isolate": False}}})
    default = KiConfig.model_validate({}).pipeline.convert
    print(f"load average {os.getloadavg()}")
    print(f"{'file':10} {'MB':>6} {'limit MB':>8} {'outcome':>10} {'seconds':>8} {'peak MB':>8}")
    for name, data in _huge_files():
        for limit in (default.memory_mb, small_mb):
            pool = isolation.WorkerPool(isolation.Budget(limit, default.timeout_seconds))
            started = time.perf_counter()
            try:
                pool.run("ki.adapters.convert.router:convert_bytes", data, name, config=config)
                outcome, peak = "ok", pool.last_peak_mb
            except UnsupportedDocument as exc:
                outcome, peak = exc.reason, exc.details.get("peak_mb")
            elapsed = time.perf_counter() - started
            pool.close()
            print(f"{name:10} {len(data) / 2**20:6.0f} {limit:8} {outcome:>10} {elapsed:8.1f} {peak!s:>8}")


if __name__ == "__main__":
    main()
