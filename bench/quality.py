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

Usage::

    .venv/bin/python bench/quality.py ../shared/corpus/estate-dev [--workers 4] [--json] [--check]

``--check`` exits 1 unless the targets hold (matter ≥ 0.95, duplicate precision 1.0, version-pair
F1 ≥ 0.9, thread F1 ≥ 0.95, relation F1 ≥ 0.8). Other seeds: generate with
``python3 ../shared/tools/make_estate.py --seed 2 --matters 12 --out /tmp/estate-s2``.
"""

from __future__ import annotations

import argparse
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
from bench.quality_metadata import score_metadata  # noqa: E402

TARGETS = {"matter_accuracy": 0.95, "duplicate_precision": 1.0, "version_pair_f1": 0.9, "thread_f1": 0.95,
           "relation_f1": 0.8}


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
    out["targets_met"] = {k: out[k] >= v for k, v in TARGETS.items()}
    return out


def run_estate(estate: Path, *, workers: int = 4, keep: bool = False, ki: str | None = None,
               extra_env: dict[str, str] | None = None) -> list[dict]:
    """``ki insert`` the estate into a fresh data directory and return ``ki export --json`` rows.

    The estate's own ontology (``truth.json``) is the active one (``pipeline.ontology_file``); ``extra_env``
    adds ``KI_…`` settings."""
    ki = ki or str(Path(sys.executable).with_name("ki"))
    truth = json.loads((estate / "truth.json").read_text(encoding="utf-8"))
    data = Path(tempfile.mkdtemp(prefix="ki-quality-"))
    os.chmod(data, 0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KI_") or k == "KI_SHARED_DIR"}
    env.update({"KI_DATA_DIR": str(data), "KI_WORKERS": str(workers), "KI_INSERT_WAIT_RETRY_SECONDS": "60",
                "KI_FIRM__NAME": truth["firm"]["name"], "KI_FIRM__ALIASES": json.dumps(truth["firm"]["aliases"]),
                "KI_PIPELINE__ONTOLOGY_FILE": str((estate / "truth.json").resolve()), **(extra_env or {})})
    try:
        started = time.monotonic()
        ins = subprocess.run([ki, "insert", str(estate / "estate")], env=env, capture_output=True, text=True)
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


def main(argv: list[str] | None = None) -> int:
    """Command line: run, score, print; exit 1 with --check when a target is missed."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("estate", type=Path, help="folder holding estate/ and truth.json")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--json", action="store_true", help="print the scores as JSON")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every target is met")
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    ap.add_argument("--misses", action="store_true", help="list the files whose matter is wrong")
    args = ap.parse_args(argv)
    truth = json.loads((args.estate / "truth.json").read_text(encoding="utf-8"))
    rows = run_estate(args.estate, workers=args.workers, keep=args.keep)
    scores = score(truth, rows)
    metadata = score_metadata(truth, rows)  # Extract metadata / Extract decisions (bench/quality_metadata.py)
    if args.json:
        print(json.dumps(scores | {"metadata": metadata}, indent=2, default=str))
    else:
        print(f"estate {args.estate} ({scores['files']} files)")
        for key in ("matter_accuracy", "duplicate_precision", "duplicate_recall", "version_pair_f1",
                    "version_order_accuracy", "redline_accuracy", "thread_f1", "relation_f1"):
            target = TARGETS.get(key)
            mark = "" if target is None else (" ok" if scores[key] >= target else f" BELOW {target}")
            print(f"  {key:<24} {scores[key]:.3f}{mark}")
        print(f"  relation strict F1       {scores['relation_strict']['f1']:.3f}   by type (lenient): "
              + ", ".join(f"{k} {v:.2f}" for k, v in scores["relation_f1_by_type"].items()))
        if args.misses:
            for line in scores["matter_misses"]:
                print(f"    matter miss: {line}")
        print_metadata_scores(metadata, misses=args.misses)
    met = all(scores["targets_met"].values()) and all(metadata["targets_met"].values())
    return 0 if not args.check or met else 1


if __name__ == "__main__":
    sys.exit(main())
