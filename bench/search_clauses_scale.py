"""Search p95 with ``--clauses`` and ``--clause-type`` at scale, beside the same queries over every row.

Spec: insertion-pipeline.md "Index" (clause embeddings at ordinals 1000+); the passage targets of the search
benches (p95 ≤ 100 ms embedded, ≤ 50 ms OpenSearch: the ``ki search --mode lexical`` path, lexical half + record
check + hydration, as a random user holding 3 groups).

**Corpus**: :mod:`search_exact`'s (``--chunks`` chunks, 5 per document, random permission projections); then one
row of every document in five becomes a clause row (its ordinal 1000 + its old one, kind ``clause``, a clause type
of :data:`CLAUSE_TYPES` by document): 20 % of the rows, about the share measured on the dev estate (21 %). The
tantivy projection is built from the record, and on OpenSearch (the test node, ``-Xmx2g``) the same rows are
synced. **Queries**: :func:`search_exact.make_queries`. Each query runs three ways: every row, ``--clauses``
(``kinds=("clause",)``), ``--clause-type liability`` (``clause_types=("liability",)``).

The OpenSearch rows are loaded as a rebuild loads them (``OpenSearchBackend.bulk_load``: refreshes off, batches of
2,000 documents through the product's bulk sync, one refresh at the end), then the merges settle.

Run: ``.venv/bin/python bench/search_clauses_scale.py [--chunks 1000000] [--queries-per-class 20]
[--backends embedded,opensearch] [--data DIR] [--prewarm] [--json out.json]`` (at 1,000,000 chunks: the record in
minutes, the projection and the OpenSearch load in tens of minutes on 2 cores). ``--data DIR`` keeps the record and
the projection there and reuses them on the next run with the same ``--chunks`` (a projection of an older schema
is rebuilt by the search itself); ``--prewarm`` reads the record's search relations and the index files into
memory before timing the embedded backend (:func:`_search_timing.prewarm`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import embedded_server, percentile, temp_workdir  # noqa: E402
from _search_timing import (  # noqa: E402
    bench_opensearch,
    by_class,
    kept_index_matches,
    mark_kept_index,
    prewarm,
    segments,
    settle_merges,
    sync_documents,
)
from search_exact import PER_DOC, Corpus, _load_record, access_of, make_queries, searchers  # noqa: E402

#: The clause types the clause rows get, by ``source_object_id % 5``.
CLAUSE_TYPES = ("liability", "term", "confidentiality", "payment_terms", "governing_law")
#: The row of each document that becomes its clause row.
CLAUSE_ORDINAL = 4
WAYS = {"all": {}, "clauses": {"kinds": ("clause",)}, "clause_type": {"kinds": ("clause",),
                                                                      "clause_types": ("liability",)}}


def make_clause_rows(db: Any) -> int:
    """Turn the row at :data:`CLAUSE_ORDINAL` of every document into a typed clause row; their number."""
    from sqlalchemy import text

    with db.engine.begin() as conn:
        n = conn.execute(text("""
            UPDATE chunk SET ordinal = 1000 + ordinal, kind = 'clause',
                   meta = jsonb_build_object('clause_type', (CAST(:types AS text[]))[1 + source_object_id % 5],
                                             'number', '§ 4', 'heading', 'Klausel')
            WHERE ordinal = :o"""), {"types": list(CLAUSE_TYPES), "o": CLAUSE_ORDINAL}).rowcount
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE chunk"))
    return int(n)


def timed_ways(backend: Any, engine: Any, queries: list[tuple[str, str]], held: list[tuple[str, ...]],
               warm: int) -> dict[str, Any]:
    """Each query in each of :data:`WAYS` (interleaved, after ``warm`` warm-up queries): p50/p95 ms per way, p95
    per class, the mean hits per page, and the load."""
    from ki.adapters.search.backend import SearchFilters
    from ki.adapters.search.search import search_with_backend

    warm = min(warm, len(queries))
    lat: dict[str, list[float]] = {w: [] for w in WAYS}
    hits: dict[str, list[int]] = {w: [] for w in WAYS}
    for i, ((_c, q), h) in enumerate(zip(queries[:warm] + queries, held[:warm] + held, strict=True)):
        for way, extra in WAYS.items():
            t = time.perf_counter()
            r = search_with_backend(backend, engine, q, filters=SearchFilters(principals=h, **extra), limit=10,
                                    mode="lexical")
            if i >= warm:
                lat[way].append((time.perf_counter() - t) * 1000)
                hits[way].append(len(r.hits))
                if way != "all":
                    assert all(x.part == "clause" for x in r.hits), q
    classes = [c for c, _ in queries]
    return {way: {"p50_ms": round(percentile(v, 50), 1), "p95_ms": round(percentile(v, 95), 1),
                  "p95_ms_by_class": by_class(classes, v), "mean_hits": round(sum(hits[way]) / len(v), 2)}
            for way, v in lat.items()} | {"load": os.getloadavg()}


def _opensearch(db: Any, corpus: Corpus, n: int, queries: list[tuple[str, str]], held: list[tuple[str, ...]],
                keep: Path | None = None) -> dict[str, Any]:
    """The same rows on the test OpenSearch node (``-Xmx2g``), merges settled, the three ways timed. ``keep``:
    the node's directory, kept; an index synced there before for the same rows is reused."""
    from ki.adapters.search.backend import ChunkRow, IndexDocument
    from ki.domain.access.projection import AccessProjection

    def document(d: int) -> IndexDocument:
        allowed, denied = access_of(d)
        rows = [ChunkRow(o, corpus.chunk(d * PER_DOC + o)) if o != CLAUSE_ORDINAL else
                ChunkRow(1000 + o, corpus.chunk(d * PER_DOC + o), None, "clause",
                         {"clause_type": CLAUSE_TYPES[d % 5], "number": "§ 4", "heading": "Klausel"})
                for o in range(PER_DOC)]
        return IndexDocument(d, f"{d:064d}", f"Dokument {d}", rows, AccessProjection(tuple(allowed), tuple(denied)))

    res: dict[str, Any] = {}
    what = {"chunks": n, "seed": corpus.seed}
    with bench_opensearch(db, "ki-bench-clauses", keep) as (backend, work):
        if keep is not None and kept_index_matches(work, what):
            res["sync_s"] = "reused " + str(work)
        else:
            backend.drop_index()
            backend.ensure_embedder(None)
            res["sync_s"] = round(sync_documents(backend, n // PER_DOC, document), 1)
            if keep is not None:
                mark_kept_index(work, what)
        print(f"OpenSearch: {n} rows, sync {res['sync_s']} s, load {os.getloadavg()}", flush=True)
        res["merges"] = settle_merges(backend)
        res["segments"] = segments(backend)
        timed_ways(backend, db.engine, queries, held, warm=len(queries))  # the JVM's warm-up pass
        res |= timed_ways(backend, db.engine, queries, held, warm=20)
        if keep is None:
            backend.drop_index()
    return res


@contextmanager
def kept_workdir(data: Path | None) -> Iterator[Path]:
    """``data`` (created; kept, so the record and the projection built there are reused by the next run with the
    same ``--chunks``), or a temporary directory removed afterwards."""
    if data is None:
        with temp_workdir() as work:
            yield work
        return
    data.mkdir(parents=True, exist_ok=True)
    os.chmod(data, 0o755)  # the embedded server may run as another user when we are root
    yield data


def run(args: argparse.Namespace) -> dict[str, Any]:
    from ki.adapters.search.analysis import words
    from ki.adapters.search.postgres import PostgresBackend
    from ki.adapters.search.projection import projection_for
    from ki.store.db import ensure_database, open_database, sqlalchemy_url

    out: dict[str, Any] = {"chunks": args.chunks, "load_average_start": os.getloadavg()}
    corpus = Corpus(args.seed)
    df: Counter = Counter()
    for i in range(0, args.chunks, max(1, args.chunks // 4000)):
        df.update(set(words(corpus.chunk(i))))
    queries = make_queries(corpus, args.queries_per_class, df, args.seed)
    held = searchers(len(queries), args.seed)
    with kept_workdir(args.data) as work, embedded_server(work / "pg") as uri:
        ensure_database(uri, "kibench")
        db = open_database(sqlalchemy_url(uri, "kibench"), pool_size=8)
        built = work / "record.json"
        if built.exists() and json.loads(built.read_text()).get("chunks") == args.chunks:
            out["record"] = "reused " + str(work)
        else:
            out |= _load_record(db, corpus, args.chunks, None)
            out["clause_rows"] = make_clause_rows(db)
            print(f"record: {args.chunks} rows ({out['clause_rows']} clause rows) in {out['record_load_s']} s, "
                  f"load {os.getloadavg()}", flush=True)
            if args.data:
                built.write_text(json.dumps({"chunks": args.chunks}))
        if not args.skip_embedded:
            proj = projection_for(db.engine, work / "search")
            t = time.perf_counter()
            proj.catch_up(block=True, timeout=60)
            out["projection_s"] = round(time.perf_counter() - t, 1)
            print(f"tantivy projection in {out['projection_s']} s, load {os.getloadavg()}", flush=True)
            if args.prewarm:
                out["prewarm"] = prewarm(db.engine, [work / "search"])
            out["embedded"] = timed_ways(PostgresBackend(db, index_root=work / "search"), db.engine, queries, held,
                                         warm=20)
            print(f"embedded: {json.dumps(out['embedded'])}", flush=True)
        if not args.skip_opensearch:
            out["opensearch"] = _opensearch(db, corpus, args.chunks, queries, held,
                                            work / "opensearch" if args.data else None)
            print(f"opensearch: {json.dumps(out['opensearch'])}", flush=True)
        db.dispose()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--queries-per-class", type=int, default=20)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--backends", default="embedded,opensearch", help="which to time, comma-separated")
    parser.add_argument("--data", type=Path, help="keep the record and the projection in this directory and reuse "
                        "them on the next run with the same --chunks (default: a temporary directory)")
    parser.add_argument("--prewarm", action="store_true", help="read the record and the index into memory first")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args()
    args.skip_embedded = "embedded" not in args.backends.split(",")
    args.skip_opensearch = "opensearch" not in args.backends.split(",")
    out = run(args)
    text = json.dumps(out, indent=2, default=str)
    if args.json:
        args.json.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
