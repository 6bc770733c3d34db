"""The 120 MB check (issue 15 "Measure"): one huge text inserted into an estate changes no other query's top 10.

Run: ``.venv/bin/python bench/search_bigfile.py [--estate DIR] [--mb 120] [--text estate|prose] [--judged]
[--large-document-passages N] [--json out.json]`` (default: the dev estate, ``$KI_SHARED_DIR/corpus/estate-dev``,
120 MB of the estate's own sentences).

1. ``ki insert`` of the estate as a subprocess (a fresh data directory, lexical only), as
   ``bench/search_judged.py`` does;
2. the top 10 of :data:`QUERIES` (the common legal words of the issue — Kündigung, Vergleich, Mieter, Kaution —
   and more, some compounds, two-word queries and a phrase; with ``--judged`` also the judged set of
   ``bench/search_judged.py``) as the local operator, lexical mode;
3. a text file of ``--mb`` MB is added to the estate folder and ``ki insert`` runs again (only that file is new).
   ``--text estate`` (default) writes sentences of the estate's own inserted text (every common word occurs in it
   thousands of times: the case of the issue, where ``Kündigung`` … went to that one file); ``--text prose``
   uses ``bench/bigfile.py``'s legal prose generator;
4. every query again. Per query: ``identical`` (the same top 10), ``unchanged`` (the other files in the same
   order, the big file having taken one place), ``same set`` (the same other files, another order: BM25's
   corpus statistics moved — the big file's tens of thousands of passages change the document frequencies and
   the average passage length), or ``changed`` (files in / out, listed); and where the big file ranks.

``--large-document-passages N`` sets ``retrieval.large_document_passages`` for both inserts and the searches
(default: the setting's default, 2,000, so the big file is kept in the "large documents" index and the other
files' statistics do not move; a value above the big file's passages pools it with the others — the behaviour
before, for comparison).

Prints the load average with every timing (the machine is shared). The judged set's recall is not re-measured
here (``bench/search_judged.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import temp_workdir  # noqa: E402
from search_judged import COMMON_WORDS, SHARED, _ki_insert, _top10, inserted_text, judged_queries  # noqa: E402

BIG_FILE_NAME = "Gesamtexport Altakten.txt"
QUERIES = [*COMMON_WORDS, "Mietvertrag", "Schreiben", "Gesellschafterbeschluss", "Kündigung Mieter",
           "Frist Zahlung", '"fristlose Kündigung"', "Vergleich -Entwurf"]


def estate_text(path: Path, mb: int, texts: list[str], seed: int = 7) -> None:
    """Write about ``mb`` MB of paragraphs of 12 sentences drawn (seeded) from ``texts``."""
    rng = random.Random(seed)
    sentences = [s.strip() for t in texts for s in re.split(r"(?<=[.!?])\s+|\n+", t) if len(s.strip()) > 20]
    target = mb * (1 << 20)
    with path.open("w", encoding="utf-8") as f:
        n = 0
        while n < target:
            para = " ".join(rng.choice(sentences) for _ in range(12)) + "\n\n"
            f.write(para)
            n += len(para.encode("utf-8"))


def compare(before: list[str], after: list[str], big: str = BIG_FILE_NAME) -> dict[str, Any]:
    """How ``after`` (a top 10 of paths) differs from ``before`` once the big file is set aside."""
    others = [p for p in after if p != big]
    head = before[:len(others)]
    if after == before:
        verdict = "identical"
    elif others == head:
        verdict = "unchanged"
    elif set(others) == set(head):
        verdict = "same set"
    else:
        verdict = "changed"
    return {"verdict": verdict, "big_file_rank": after.index(big) + 1 if big in after else None,
            "entered": [p for p in others if p not in before], "left": [p for p in head if p not in others]}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Insert, query, add the big file, insert, query again (see the module docstring)."""
    from sqlalchemy import text

    from ki.config.loader import ProcessSettings
    from ki.domain.context import PipelineContext
    from ki.store.db import stop_embedded_server

    truth = json.loads((args.estate / "truth.json").read_text())
    out: dict[str, Any] = {"estate": args.estate.name, "files": len(truth["files"]), "mb": args.mb,
                           "text": args.text, "large_document_passages": args.large_document_passages}
    with temp_workdir(prefix="ki-bench-bigsearch-") as work:
        estate = work / "estate"
        shutil.copytree(args.estate / "estate", estate)
        root = str(estate.resolve())
        data_dir = work / "data"
        out["insert_s"] = round(_ki_insert(data_dir, estate), 1)
        print(f"ki insert of {out['files']} files: {out['insert_s']} s, load {os.getloadavg()}", flush=True)
        ctx = PipelineContext.open(ProcessSettings(data_dir=data_dir, database_url=None))
        try:
            body = inserted_text(ctx, root)
            with ctx.db.engine.connect() as conn:
                sizes = conn.execute(text(
                    "SELECT max(n), percentile_disc(0.99) WITHIN GROUP (ORDER BY n) FROM (SELECT count(*) AS n "
                    "FROM chunk WHERE ordinal >= 0 AND NOT is_deleted GROUP BY source_object_id) s")).one()
            out["estate_passages_max"], out["estate_passages_p99"] = sizes
            print(f"the estate's largest document: {sizes[0]} passages (p99 {sizes[1]}); "
                  f"retrieval.large_document_passages = {ctx.config.retrieval.large_document_passages}", flush=True)
            queries = [("fixed", q) for q in QUERIES]
            if args.judged:
                queries += [(j.cls, j.query) for j in judged_queries(truth, body)]
            before = {q: _top10(ctx, q, root)[0] for _c, q in queries}
            big = estate / BIG_FILE_NAME
            if args.text == "prose":
                from bigfile import legal_prose  # noqa: PLC0415 - bench/bigfile.py, same folder

                big.write_bytes(legal_prose(args.mb * (1 << 20)))
            else:
                estate_text(big, args.mb, list(body.values()))
            t = time.perf_counter()
            _ki_insert(data_dir, estate)
            out["big_file_insert_s"] = round(time.perf_counter() - t, 1)
            with ctx.db.engine.connect() as conn:
                n = conn.execute(text("SELECT count(*) FROM chunk c JOIN source_object so ON so.id = "
                                      "c.source_object_id WHERE so.path LIKE :p"), {"p": f"%{BIG_FILE_NAME}"}).scalar()
            out["big_file_chunks"] = n
            print(f"{args.mb} MB file ({n} chunks) inserted in {out['big_file_insert_s']} s, load "
                  f"{os.getloadavg()}", flush=True)
            per_query = []
            counts: dict[str, dict[str, int]] = {}
            for cls, q in queries:
                c = compare(before[q], _top10(ctx, q, root)[0])
                per_query.append({"class": cls, "query": q, **c})
                counts.setdefault(cls, {}).setdefault(c["verdict"], 0)
                counts[cls][c["verdict"]] += 1
                if cls == "fixed" or c["verdict"] == "changed":
                    rank = c["big_file_rank"] or "-"
                    print(f"  {cls:11} {q[:40]:40} {c['verdict']:9}  big file at {rank!s:>2}"
                          + (f"  in {c['entered']} out {c['left']}" if c["verdict"] == "changed" else ""))
            out["per_query"] = per_query
            out["verdicts"] = counts
            out["load_average"] = os.getloadavg()
            for cls, v in counts.items():
                print(f"{cls:11} {sum(v.values()):4} queries: " + ", ".join(f"{k} {n}" for k, n in sorted(v.items())))
        finally:
            ctx.db.dispose()
            stop_embedded_server(data_dir / "pg")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--estate", type=Path, default=SHARED / "corpus" / "estate-dev")
    parser.add_argument("--mb", type=int, default=120)
    parser.add_argument("--text", choices=("estate", "prose"), default="estate")
    parser.add_argument("--judged", action="store_true", help="also every query of bench/search_judged.py")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--large-document-passages", type=int, default=None,
                        help="retrieval.large_document_passages for the run (default: the setting's default)")
    args = parser.parse_args()
    if args.large_document_passages is not None:  # ki insert's subprocesses and this process's searches
        os.environ["KI_RETRIEVAL__LARGE_DOCUMENT_PASSAGES"] = str(args.large_document_passages)
    result = run(args)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
