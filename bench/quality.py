"""Quality of Classify and Relate against a synthetic estate's ``truth.json``.

Runs ``ki insert`` on ``<estate>/estate`` in a throw-away data directory (its own embedded
PostgreSQL, stopped at the end), then ``ki export --json``, and scores the export against
``<estate>/truth.json`` (see ``shared/corpus/estate-dev/README.md`` "Scoring"):

* matter accuracy — predicted reference ∈ ``matter_acceptable`` (``UNASSIGNED-*`` counts as null);
* duplicate precision — predicted (file, duplicate_of) pairs whose two files have the same sha256;
  duplicate recall — truth duplicates predicted as duplicates;
* version-pair F1 — pairwise P/R/F1 over unordered file pairs sharing a document;
* thread F1 — pairwise P/R/F1 of "same thread" over ``.eml`` files;
* relation F1 — micro P/R/F1 over (source, type, target) from non-duplicate truth files; lenient
  (both ends replaced by ``document_id``, the headline number) and strict (exact paths);
* informative: version-order accuracy, redline accuracy (lenient: same ``version_id``);
* Extract metadata / Extract decisions: type accuracy, party F1 (with roles), entity duplicates,
  doc_date accuracy, decision recall — see ``bench/quality_metadata.py`` (its targets join ``--check``).

* dates: ``doc_date`` accuracy split by where the date came from — content (``label``, ``place_date``, …)
  or the file's mtime — and the share of non-mail files dated from content (target ≥ 0.9).

The firm's settings come from truth.json: ``firm.name`` / ``aliases``, and when the estate states them
``firm.matter_reference_patterns`` and ``firm.date_order``. With ``--matter-list`` the estate's
practice-management list (``practice_management.csv`` beside truth.json, else one written from
``truth["matters"]``) is imported (``ki matters import``) before ``ki insert``.

Usage::

    .venv/bin/python bench/quality.py ../shared/corpus/estate-dev [--matter-list] [--workers 4] [--json] [--check]
    KI_SHARED_DIR=../shared .venv/bin/python bench/quality.py --suite [--workers 4]

``--suite`` scores every estate of the issue-16 measurement — the dev estate, ``make_estate.py`` seeds 2–4
(generated from ``$KI_SHARED_DIR/tools``), the English DMS firm and the Dutch firm (``bench/estates``, seeds 1
and 2) — each without and with the matter list, and prints one table (``--estates`` picks some by name).
``--check`` exits 1 unless the targets hold (:data:`TARGETS`, :data:`SUITE_TARGETS`).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.quality_metadata import print_scores as print_metadata_scores  # noqa: E402

TARGETS = {"matter_accuracy": 0.95, "duplicate_precision": 1.0, "version_pair_f1": 0.9, "thread_f1": 0.95,
           "relation_f1": 0.8}
#: Issue 16 "Measure": with the matter list imported, and (matter only) without it.
SUITE_TARGETS = {"matter_accuracy": 0.95, "version_pair_f1": 0.9, "thread_f1": 0.95, "relation_f1": 0.8,
                 "doc_type_accuracy": 0.9, "party_f1": 0.9, "doc_date_accuracy": 0.95, "content_date_share": 0.9}
SUITE_TARGETS_NO_LIST = {"matter_accuracy": 0.9}
MATTER_LIST = "practice_management.csv"


def _prf(pred: set, true: set) -> dict[str, float]:
    tp = len(pred & true)
    p = tp / len(pred) if pred else 1.0
    r = tp / len(true) if true else 1.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def _pairs(groups: dict[Any, list[str]]) -> set[tuple[str, str]]:
    return {pair for members in groups.values() for pair in itertools.combinations(sorted(members), 2)}


def score(truth: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Score export ``rows`` (dicts as ``ki export --json`` writes them) against ``truth`` (truth.json)."""
    files = truth["files"]
    pred = {r["path"]: r for r in rows if r["path"] in files}
    out: dict[str, Any] = {"files": len(files), "exported": len(pred)}

    def matter(p: str) -> str | None:
        r = pred.get(p)
        if r is None or r.get("matter_placeholder") or not r.get("matter_reference"):
            return None
        return r["matter_reference"]

    ok = [p for p, t in files.items() if matter(p) in t["matter_acceptable"]]
    out["matter_accuracy"] = len(ok) / len(files)
    out["matter_misses"] = sorted(f"{p} → {matter(p)} (truth {files[p]['matter_acceptable']})"
                                  for p in files if p not in set(ok))

    dup_pred = {(p, r["duplicate_of"]) for p, r in pred.items() if r.get("duplicate_of")}
    dup_ok = {(a, b) for a, b in dup_pred if b in files and files[a]["sha256"] == files[b]["sha256"]}
    out["duplicate_precision"] = len(dup_ok) / len(dup_pred) if dup_pred else 1.0
    true_dups = {p for p, t in files.items() if isinstance(t["identity"], dict) and "duplicate_of" in t["identity"]}
    out["duplicate_recall"] = len({a for a, _ in dup_pred} & true_dups) / len(true_dups) if true_dups else 1.0

    doc_pred: dict[Any, list[str]] = defaultdict(list)
    doc_true: dict[Any, list[str]] = defaultdict(list)
    for p, t in files.items():
        doc_true[t["document_id"]].append(p)
        doc_pred[(pred.get(p) or {}).get("document_id") or ("none", p)].append(p)
    vp = _prf(_pairs(doc_pred), _pairs(doc_true))
    out["version_pair_f1"], out["version_pair"] = vp["f1"], vp

    ordered = total = 0
    for members in doc_true.values():
        for a, b in itertools.combinations(members, 2):
            ta, tb = files[a]["version_order"], files[b]["version_order"]
            if ta == tb:
                continue
            total += 1
            pa, pb = (pred.get(a) or {}).get("version_order"), (pred.get(b) or {}).get("version_order")
            if pa is not None and pb is not None and (pa - pb) * (ta - tb) > 0:
                ordered += 1
    out["version_order_accuracy"] = ordered / total if total else 1.0

    redlines = {p: t["redline_against"] for p, t in files.items() if t.get("redline_against")}
    hits = sum(1 for p, target in redlines.items()
               if (pred.get(p) or {}).get("redline_against") in files
               and files[pred[p]["redline_against"]]["version_id"] == files[target]["version_id"])
    out["redline_accuracy"] = hits / len(redlines) if redlines else 1.0

    emails = [p for p, t in files.items() if t["format"] == "eml"]
    th_pred: dict[Any, list[str]] = defaultdict(list)
    th_true: dict[Any, list[str]] = defaultdict(list)
    for p in emails:
        th_true[files[p]["thread_id"]].append(p)
        th_pred[(pred.get(p) or {}).get("thread_id") or ("none", p)].append(p)
    th = _prf(_pairs(th_pred), _pairs(th_true))
    out["thread_f1"], out["thread"] = th["f1"], th

    doc = {p: t["document_id"] for p, t in files.items()}
    nondup = {p for p in files if p not in true_dups}
    t_strict = {(p, r["type"], r["target"]) for p in nondup for r in files[p]["relations"]}
    p_strict = {(p, r["type"], r["target"]) for p, row in pred.items() if p in nondup for r in row["relations"]}
    t_len = {(doc[a], k, doc[b]) for a, k, b in t_strict}
    p_len = {(doc[p], r["type"], doc.get(r["target"], r["target"])) for p, row in pred.items()
             for r in row["relations"]}
    lenient = _prf(p_len, t_len)
    out["relation_f1"], out["relation"] = lenient["f1"], lenient
    out["relation_strict"] = _prf(p_strict, t_strict)
    by_type = {}
    for kind in truth.get("relation_types", []):
        by_type[kind] = _prf({x for x in p_len if x[1] == kind}, {x for x in t_len if x[1] == kind})["f1"]
    out["relation_f1_by_type"] = by_type
    out.update(score_dates(files, pred))
    out["targets_met"] = {k: out[k] >= v for k, v in TARGETS.items()}
    return out


def score_dates(files: dict[str, Any], pred: dict[str, Any]) -> dict[str, Any]:
    """``doc_date`` accuracy by source: content (anything but ``mtime``) vs mtime, and the share of non-mail
    files dated from content (issue 16 item 6)."""
    groups: dict[str, list[bool]] = defaultdict(list)
    non_mail = content = 0
    misses = []
    for p, t in files.items():
        row = pred.get(p) or {}
        source = row.get("doc_date_source") or "none"
        group = "mail" if source == "mail" else "mtime" if source == "mtime" else "none" if source == "none" \
            else "content"
        ok = row.get("doc_date") == t["doc_date"]
        groups[group].append(ok)
        if t["format"] != "eml":
            non_mail += 1
            content += group == "content"
        if not ok:
            misses.append(f"{p}: {row.get('doc_date')} ({source}) truth {t['doc_date']}")
    return {"date_sources": {g: {"files": len(v), "accuracy": sum(v) / len(v)} for g, v in sorted(groups.items())},
            "content_date_share": content / non_mail if non_mail else 1.0, "date_misses": sorted(misses)}


def firm_env(truth: dict[str, Any]) -> dict[str, str]:
    """``KI_FIRM__…`` settings from truth.json's ``firm`` (name, aliases, and the reference patterns and date
    order when the estate states them)."""
    firm = truth["firm"]
    env = {"KI_FIRM__NAME": firm["name"], "KI_FIRM__ALIASES": json.dumps(firm["aliases"])}
    if firm.get("matter_reference_patterns"):
        env["KI_FIRM__MATTER_REFERENCE_PATTERNS"] = json.dumps(firm["matter_reference_patterns"])
    if firm.get("date_order"):
        env["KI_FIRM__DATE_ORDER"] = firm["date_order"]
    return env


def matter_list_of(estate: Path, truth: dict[str, Any], into: Path) -> Path:
    """The estate's practice-management list, or one written from ``truth["matters"]`` into ``into``."""
    own = estate / MATTER_LIST
    if own.exists():
        return own
    path = into / MATTER_LIST
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["reference", "title", "client", "opened", "practice_area", "responsible"])
        for m in truth["matters"]:
            w.writerow([m["reference"], m["title"], m["client"]["name"], m.get("opened") or "",
                        m.get("practice_area") or "", (m.get("lawyers") or [""])[0]])
    return path


def run_estate(estate: Path, *, workers: int = 4, keep: bool = False, ki: str | None = None,
               extra_env: dict[str, str] | None = None, matter_list: bool = False,
               reset_mtimes: float | None = None) -> list[dict]:
    """``ki insert`` the estate into a fresh data directory and return ``ki export --json`` rows.

    The estate's own ontology (``truth.json``) is the active one (``pipeline.ontology_file``); the firm's
    settings come from truth.json (:func:`firm_env`); ``extra_env`` adds ``KI_…`` settings; ``matter_list``
    imports the practice-management list first (:func:`matter_list_of`); ``reset_mtimes`` (a POSIX timestamp,
    seconds) inserts a copy of the estate whose every file and folder has that mtime — as a copy, a restore or a
    ``git clone`` leaves it."""
    ki = ki or str(Path(sys.executable).with_name("ki"))
    truth = json.loads((estate / "truth.json").read_text(encoding="utf-8"))
    data = Path(tempfile.mkdtemp(prefix="ki-quality-"))
    os.chmod(data, 0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KI_") or k == "KI_SHARED_DIR"}
    env.update({"KI_DATA_DIR": str(data), "KI_WORKERS": str(workers), "KI_INSERT_WAIT_RETRY_SECONDS": "60",
                **firm_env(truth), "KI_PIPELINE__ONTOLOGY_FILE": str((estate / "truth.json").resolve()),
                **(extra_env or {})})
    try:
        started = time.monotonic()
        if matter_list:
            imp = subprocess.run([ki, "matters", "import", str(matter_list_of(estate, truth, data))], env=env,
                                 capture_output=True, text=True)
            if imp.returncode != 0:
                raise RuntimeError(f"ki matters import failed ({imp.returncode}):\n{imp.stdout}\n{imp.stderr}")
        source = estate / "estate" if reset_mtimes is None else copy_with_mtime(estate / "estate", data / "copy",
                                                                                  reset_mtimes)
        ins = subprocess.run([ki, "insert", str(source)], env=env, capture_output=True, text=True)
        if ins.returncode != 0:
            raise RuntimeError(f"ki insert failed ({ins.returncode}):\n{ins.stdout}\n{ins.stderr}")
        exp = subprocess.run([ki, "export", "--json"], env=env, capture_output=True, text=True)
        if exp.returncode != 0:
            raise RuntimeError(f"ki export failed ({exp.returncode}):\n{exp.stderr}")
        rows = [json.loads(line) for line in exp.stdout.splitlines() if line.strip()]
        print(f"inserted and exported {len(rows)} objects in {time.monotonic() - started:.1f} s", file=sys.stderr)
        return rows
    finally:
        subprocess.run([ki, "db", "stop"], env=env, capture_output=True)
        if not keep:
            shutil.rmtree(data, ignore_errors=True)


def copy_with_mtime(folder: Path, into: Path, timestamp: float) -> Path:
    """A copy of ``folder`` at ``into`` whose every file and folder has mtime ``timestamp`` (seconds)."""
    shutil.copytree(folder, into)
    for path in sorted(into.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        os.utime(path, (timestamp, timestamp))
    os.utime(into, (timestamp, timestamp))
    return into


def print_single(name: str, scores: dict[str, Any], metadata: dict[str, Any], *, misses: bool) -> None:
    """The long report of one estate run."""
    print(f"estate {name} ({scores['files']} files)")
    for key in ("matter_accuracy", "duplicate_precision", "duplicate_recall", "version_pair_f1",
                "version_order_accuracy", "redline_accuracy", "thread_f1", "relation_f1", "content_date_share"):
        target = TARGETS.get(key, SUITE_TARGETS.get(key))
        mark = "" if target is None else (" ok" if scores[key] >= target else f" BELOW {target}")
        print(f"  {key:<24} {scores[key]:.3f}{mark}")
    print(f"  relation strict F1       {scores['relation_strict']['f1']:.3f}   by type (lenient): "
          + ", ".join(f"{k} {v:.2f}" for k, v in scores["relation_f1_by_type"].items()))
    print("  doc_date by source       " + ", ".join(f"{g} {v['files']} files {v['accuracy']:.3f}"
                                                    for g, v in scores["date_sources"].items()))
    if misses:
        for line in scores["matter_misses"]:
            print(f"    matter miss: {line}")
        for line in scores["date_misses"]:
            print(f"    date miss: {line}")
    print_metadata_scores(metadata, misses=misses)


def main(argv: list[str] | None = None) -> int:
    """Command line: run, score, print; exit 1 with --check when a target is missed."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("estate", type=Path, nargs="*", help="folders holding estate/ and truth.json")
    ap.add_argument("--suite", action="store_true", help="the issue-16 estates (see the module doc)")
    ap.add_argument("--estates", default="", help="with --suite: comma-separated names to run (default all)")
    ap.add_argument("--matter-list", choices=["no", "yes", "both"], default=None,
                    help="import the practice-management list first (default: no; with --suite: both)")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--reset-mtimes", action="store_true",
                    help="insert a copy of each estate with every mtime set to now (a copied or cloned estate)")
    ap.add_argument("--json", action="store_true", help="print the scores as JSON")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every target is met")
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    ap.add_argument("--misses", action="store_true", help="list the files whose matter or date is wrong")
    args = ap.parse_args(argv)
    from bench.quality_suite import run_suite, suite_estates

    with tempfile.TemporaryDirectory(prefix="ki-quality-estates-") as tmp:
        estates = list(suite_estates(Path(tmp), only=args.estates)) if args.suite else \
            [(str(e), e) for e in args.estate]
        if not estates:
            ap.error("name an estate folder or use --suite")
        lists = {"no": [False], "yes": [True], "both": [False, True]}[args.matter_list or
                                                                      ("both" if args.suite else "no")]
        return run_suite(estates, lists=lists, workers=args.workers, keep=args.keep, as_json=args.json,
                         check=args.check, misses=args.misses, long=not args.suite,
                         reset_mtimes=time.time() if args.reset_mtimes else None)


if __name__ == "__main__":
    sys.exit(main())
