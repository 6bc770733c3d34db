"""The issue-16 measurement of ``bench/quality.py --suite``: which estates, and the one table of scores.

Estates (names for ``--estates``): ``dev`` (``$KI_SHARED_DIR/corpus/estate-dev``), ``make-s2`` … ``make-s4``
(``$KI_SHARED_DIR/tools/make_estate.py --seed N --matters 12``), ``english-s1``, ``english-s2``, ``dutch-s1``,
``dutch-s2`` (``bench/estates``, 12 matters). Each is scored without and with its matter list; the
table marks a number below its target (:data:`bench.quality.SUITE_TARGETS`; without the list only the
matter target of :data:`bench.quality.SUITE_TARGETS_NO_LIST` applies).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.quality import SUITE_TARGETS, SUITE_TARGETS_NO_LIST, print_single, run_estate, score
from bench.quality_metadata import score_metadata

SUITE = ["dev", "make-s2", "make-s3", "make-s4", "english-s1", "english-s2", "dutch-s1", "dutch-s2"]
COLUMNS = [("matter", "matter_accuracy"), ("same-doc", "version_pair_f1"), ("thread", "thread_f1"),
           ("relation", "relation_f1"), ("type", "doc_type_accuracy"), ("party", "party_f1"),
           ("date", "doc_date_accuracy"), ("content", "content_date_share"), ("dups", "entity_duplicates")]


def _shared() -> Path:
    shared = os.environ.get("KI_SHARED_DIR")
    if not shared:
        raise SystemExit("--suite needs KI_SHARED_DIR (the dev estate and make_estate.py live there)")
    return Path(shared)


def suite_estates(tmp: Path, *, only: str = "") -> Iterator[tuple[str, Path]]:
    """(name, folder) of every suite estate, generated into ``tmp`` where needed."""
    wanted = [n.strip() for n in only.split(",") if n.strip()] or SUITE
    unknown = set(wanted) - set(SUITE)
    if unknown:
        raise SystemExit(f"unknown estates {sorted(unknown)}; the suite has {', '.join(SUITE)}")
    for name in wanted:
        if name == "dev":
            yield name, _shared() / "corpus" / "estate-dev"
            continue
        kind, seed = name.rsplit("-s", 1)
        out = tmp / name
        if kind == "make":
            cmd = [sys.executable, str(_shared() / "tools" / "make_estate.py"), "--seed", seed, "--matters", "12",
                   "--out", str(out), "--quiet"]
        else:
            cmd = [sys.executable, "-m", "bench.estates", kind, "--seed", seed, "--matters", "12", "--out", str(out)]
        subprocess.run(cmd, check=True, capture_output=True, cwd=Path(__file__).resolve().parents[1])
        yield name, out


def _mark(key: str, value: float, with_list: bool) -> str:
    if key == "entity_duplicates":
        return "" if value == 0 else "!"
    target = (SUITE_TARGETS if with_list else SUITE_TARGETS_NO_LIST).get(key)
    return "" if target is None or value >= target else "!"


def run_suite(estates: list[tuple[str, Path]], *, lists: list[bool], workers: int, keep: bool, as_json: bool,
              check: bool, misses: bool, long: bool, reset_mtimes: float | None = None) -> int:
    """Run and score every (estate, with/without list); print the long report (``long``) or the table.
    ``reset_mtimes``: insert copies whose every mtime is this timestamp (see :func:`bench.quality.run_estate`)."""
    results: list[dict[str, Any]] = []
    for name, folder in estates:
        truth = json.loads((folder / "truth.json").read_text(encoding="utf-8"))
        for with_list in lists:
            started = time.monotonic()
            rows = run_estate(folder, workers=workers, keep=keep, matter_list=with_list,
                              reset_mtimes=reset_mtimes)
            scores, metadata = score(truth, rows), score_metadata(truth, rows)
            flat = {**scores, **{k: metadata[k] for k in ("doc_type_accuracy", "party_f1", "doc_date_accuracy",
                                                          "entity_duplicates")}}
            results.append({"estate": name, "matter_list": with_list, "seconds": round(time.monotonic() - started),
                            **{k: flat[k] for _, k in COLUMNS}, "date_sources": scores["date_sources"]})
            if long:
                print_single(f"{name}{' (matter list imported)' if with_list else ''}", scores, metadata,
                             misses=misses)
            if as_json:
                print(json.dumps(results[-1]), flush=True)
    if not long:
        print(f"{'estate':<12} {'list':<5} " + " ".join(f"{c:>9}" for c, _ in COLUMNS) + "   (! below target)")
        for r in results:
            print(f"{r['estate']:<12} {'yes' if r['matter_list'] else 'no':<5} " + " ".join(
                f"{(str(r[k]) if k == 'entity_duplicates' else f'{r[k]:.3f}') + _mark(k, r[k], r['matter_list']):>9}"
                for _, k in COLUMNS))
        load = os.getloadavg()
        print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    failed = [r for r in results for _, k in COLUMNS if _mark(k, r[k], r["matter_list"])]
    return 1 if check and failed else 0
