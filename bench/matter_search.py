"""Classify's ``search_matters`` at scale: its latency with the vector half on, and whether it finds the matter.

Spec: insertion-pipeline.md "Classify: what the model is given" (``search_matters`` ranks by semantic similarity
over indexed chunks, with an exact total). Seeds ``--rows`` indexed rows (5 per file) over ``--matters`` matters
straight into the record: each matter has a random direction in ``--dim`` dimensions and its rows lie around it
(the direction plus Gaussian noise of ``--noise`` per coordinate), the HNSW index made as the index stage makes
it (:meth:`ki.adapters.search.postgres.PostgresBackend.ensure_embedder`). Each query is a matter's direction plus
fresh noise,
words that occur nowhere: it can only be found by meaning. Reports p50/p95 of ``search_matters`` (the whole call:
SQL ranking of every matter, the nearest rows, the page), the share of queries whose matter ranks first, the
candidate total, the plan of the nearest-rows statement, and the load average.

Run: ``.venv/bin/python bench/matter_search.py [--rows 200000] [--matters 400] [--dim 384] [--queries 100]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import embedded_server, percentile, temp_workdir  # noqa: E402

PER_FILE = 5


def seed(db: Any, rows: int, matters: int, dim: int, noise: float) -> tuple[np.ndarray, dict[str, float]]:
    """The record: matters, files, assignments, rows with vectors, the HNSW index; the matters' directions and
    the seconds each step took."""
    from sqlalchemy import text

    from ki.adapters.search.embedder import EmbedderIdentity
    from ki.adapters.search.postgres import PostgresBackend

    took: dict[str, float] = {}
    rng = np.random.default_rng(37)
    centres = rng.normal(size=(matters, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    files = rows // PER_FILE
    t = time.perf_counter()
    with db.engine.begin() as conn:
        sid = conn.execute(text("INSERT INTO source (project_id, kind, root) VALUES (1, 'local', '/bench') "
                                "RETURNING id")).scalar_one()
        conn.execute(text("INSERT INTO matter (project_id, reference, title) SELECT 1, 'M-' || lpad(g::text, 4, '0'), "
                          "'Matter ' || g FROM generate_series(0, :m - 1) g"), {"m": matters})
        conn.execute(text("INSERT INTO source_object (id, source_id, external_id, path, content_hash) "
                          "SELECT g, :s, 'f' || g, '/bench/f' || g, md5(g::text) || md5(g::text) "
                          "FROM generate_series(1, :n) g"), {"s": sid, "n": files})
        conn.execute(text("INSERT INTO matter_assignment (source_object_id, matter_id, method) "
                          "SELECT so.id, m.id, 'rules' FROM source_object so "
                          "JOIN matter m ON m.reference = 'M-' || lpad((so.id % :m)::text, 4, '0')"), {"m": matters})
    raw = db.engine.raw_connection()
    try:
        cur = raw.cursor()
        for start in range(1, files + 1, 2000):
            ids = np.arange(start, min(files + 1, start + 2000))
            with cur.copy("COPY chunk (source_object_id, content_hash, ordinal, text, embedding) FROM STDIN") as cp:
                for f in ids:
                    vecs = centres[f % matters] + rng.normal(scale=noise, size=(PER_FILE, dim)).astype(np.float32)
                    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                    for o, v in enumerate(vecs):
                        literal = "[" + ",".join(f"{x:.5f}" for x in v) + "]"
                        cp.write_row((int(f), f"{f:064d}", o, "Lorem ipsum", literal))
            raw.commit()
    finally:
        raw.close()
    took["rows_s"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    PostgresBackend(db, lexical=False).ensure_embedder(EmbedderIdentity("bench-directions", dim))
    took["hnsw_s"] = round(time.perf_counter() - t, 1)
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE"))
    return centres, took


def run(args: argparse.Namespace) -> dict[str, Any]:
    from sqlalchemy import text

    from ki.store.db import ensure_database, open_database, sqlalchemy_url
    from ki.store.matter_search import _NEAREST
    from ki.store.matters import search_matters

    out: dict[str, Any] = {"rows": args.rows, "matters": args.matters, "dim": args.dim, "noise": args.noise}
    with temp_workdir() as work, embedded_server(work / "pg") as uri:
        ensure_database(uri, "kibench")
        db = open_database(sqlalchemy_url(uri, "kibench"), pool_size=4)
        centres, took = seed(db, args.rows, args.matters, args.dim, args.noise)
        out |= took
        print(f"seeded: {took}, load {os.getloadavg()}", flush=True)
        rng = np.random.default_rng(7)
        lat, first, totals = [], 0, []
        for i in range(args.queries + 10):
            m = int(rng.integers(args.matters))
            q = centres[m] + rng.normal(scale=args.noise, size=args.dim).astype(np.float32)
            q /= np.linalg.norm(q)
            t = time.perf_counter()
            with db.engine.connect() as conn:
                found = search_matters(conn, project_id=1, query="zzyzx quolp", limit=8, query_vector=q)
            if i >= 10:  # the first ten warm the caches
                lat.append((time.perf_counter() - t) * 1000)
                first += found["results"][0]["reference"] == f"M-{m:04d}"
                totals.append(found["page"]["total"])
        with db.engine.begin() as conn:
            conn.execute(text("SELECT set_config('hnsw.ef_search', '200', true), "
                              "set_config('hnsw.iterative_scan', 'relaxed_order', true)"))
            literal = "[" + ",".join(repr(float(x)) for x in centres[0]) + "]"
            plan = [r[0] for r in conn.execute(text("EXPLAIN " + _NEAREST.format(d=args.dim)),
                                               {"v": literal, "p": 1, "k": 200})]
        db.dispose()
    out |= {"p50_ms": round(percentile(lat, 50), 1), "p95_ms": round(percentile(lat, 95), 1),
            "matter_first": round(first / len(lat), 3), "mean_total": round(sum(totals) / len(totals), 1),
            "uses_hnsw": any("ix_chunk_embedding_hnsw" in line for line in plan),
            "plan": [line if len(line) < 160 else line[:157] + "…" for line in plan],
            "load": os.getloadavg()}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--matters", type=int, default=400)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--noise", type=float, default=0.06, help="standard deviation per coordinate")
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    print(json.dumps(run(args), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
