"""How long one Prometheus scrape takes at estate scale.

What runs
---------
``--docs`` documents (default 50,000) are seeded as a scan seeds them (seven ``processing_state`` rows each:
350,000 rows), then put in the states of a run in progress: a tenth fetched, converted and indexed, some
quarantined, some failed with a retry due later, the rest owed. Each scrape renders the whole exposition
(:func:`ki.adapters.observability.exposition.render`) with the gauges read from PostgreSQL afresh (the collector's
one-second cache is bypassed: every scrape reads, as a scrape once a second or slower does). Printed: the
scrape's p50 / p95 / max in milliseconds and the exposition's size; target p95 <= 100 ms at 50,000 documents.

Run: ``.venv/bin/python bench/metrics_scrape.py [--docs 50000] [--scrapes 100]``
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import embedded_server, percentile, temp_workdir  # noqa: E402


def seed(uri: str, docs: int):
    """A migrated database with ``docs`` documents' rows in a run's mix of states; returns its engine."""
    from sqlalchemy import text

    from ki.store.db import ensure_database, open_database, sqlalchemy_url
    from ki.store.requeue import seed_rows

    ensure_database(uri, "ki_scrape")
    db = open_database(sqlalchemy_url(uri, "ki_scrape"), pool_size=4)
    with db.engine.begin() as conn:
        sid = conn.execute(text("INSERT INTO source (project_id, kind, root) VALUES (1, 'local', '/estate') "
                                "RETURNING id")).scalar_one()
        ids = list(conn.execute(text(
            "INSERT INTO source_object (source_id, external_id, path) SELECT :s, 'f' || g, '/estate/f' || g "
            "FROM generate_series(1, :n) g RETURNING id"), {"s": sid, "n": docs}).scalars())
        seed_rows(conn, ids)
        tenth = ids[: docs // 10]
        conn.execute(text("UPDATE processing_state SET status = 'done', last_error = NULL "
                          "WHERE source_object_id = ANY(:o) AND stage IN ('fetch', 'convert', 'index')"), {"o": tenth})
        conn.execute(text("UPDATE processing_state SET status = 'quarantined', last_error = "
                          "'{\"reason\": \"corrupt\"}' WHERE source_object_id = ANY(:o) AND stage = 'convert'"),
                     {"o": ids[docs // 10: docs // 10 + docs // 100]})
        conn.execute(text("UPDATE processing_state SET status = 'failed', next_retry_at = now() + interval '1 hour' "
                          "WHERE source_object_id = ANY(:o) AND stage = 'fetch'"),
                     {"o": ids[docs // 5: docs // 5 + docs // 100]})
        conn.execute(text("ANALYZE processing_state"))
    return db.engine


def time_parts(engine, n: int) -> dict[str, list[float]]:
    """Each read of a scrape on its own, ``n`` times: milliseconds per read."""
    from ki.store.queue_age import oldest_runnable, waiting_rows
    from ki.store.status import bucket_counts

    out: dict[str, list[float]] = {"bucket counts": [], "oldest runnable": [], "waiting rows": []}
    with engine.connect() as conn:
        for _ in range(n):
            t0 = time.perf_counter()
            buckets = bucket_counts(conn)
            t1 = time.perf_counter()
            oldest_runnable(conn)
            t2 = time.perf_counter()
            waiting_rows(conn, buckets)
            t3 = time.perf_counter()
            for name, took in zip(out, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                out[name].append(took * 1000)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=50_000, help="documents seeded (default 50,000)")
    ap.add_argument("--scrapes", type=int, default=100, help="scrapes timed (default 100)")
    args = ap.parse_args()

    from ki.adapters.observability.exposition import ServingRegistry, render

    with temp_workdir() as workdir, embedded_server(workdir / "pg") as uri:
        started = time.monotonic()
        engine = seed(uri, args.docs)
        print(f"seeded {args.docs:,} documents ({7 * args.docs:,} rows) in {time.monotonic() - started:.1f} s")
        registry = ServingRegistry(engine)
        ticks = itertools.count(step=10.0)  # every scrape reads afresh (the one-second cache never hits)
        registry.state._clock = lambda: float(next(ticks))
        render(registry)  # warm: imports, the connection pool, the plans
        times, size = [], 0
        for _ in range(args.scrapes):
            t0 = time.perf_counter()
            size = len(render(registry))
            times.append((time.perf_counter() - t0) * 1000)
        parts = time_parts(engine, args.scrapes)
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
        print("reads, p50 / p95 ms: " + ", ".join(f"{name} {percentile(t, 50):.1f} / {percentile(t, 95):.1f}"
                                                  for name, t in parts.items()))
        print(f"scrape at {args.docs:,} documents: p50 {percentile(times, 50):.1f} ms, "
              f"p95 {percentile(times, 95):.1f} ms, max {max(times):.1f} ms over {args.scrapes} scrapes; "
              f"exposition {size:,} bytes")
        engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
