"""Cold history: archival of a large attempt history, and the reads it must not slow down.

What runs
---------
* A throw-away data directory; ki's embedded PostgreSQL starts under it.
* Seeding as ``bench/work_items.py`` (``--docs`` documents × 7 stage rows, ``--failures`` failing Convert rows in
  40 signatures, one attempt row per done or failing row), then old attempt entries of the same documents up to
  ``--attempts`` rows in all (default 1,000,000), finished 90 days ago. ``VACUUM ANALYZE``.
* Before: the bucket query (:func:`ki.store.status.bucket_counts`, in-process) and ``GET /v1/work-items?status=failed``
  (HTTP on a loopback uvicorn, client-side latency) ``--requests`` times each, p50/p95.
* Archival: :func:`ki.orchestration.archive.archive_history` 31 days ahead (``now`` injected, so every finished
  entry is old), ``--batch-size`` rows per batch; rows/s of the whole pass. The attempts of failing rows stay.
* After: ``VACUUM ANALYZE``, the same two reads again; the bucket counts must be identical.

Run: ``.venv/bin/python bench/archive.py [--attempts 1000000] [--docs 50000] [--batch-size 10000] [--requests 100]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import percentile, temp_workdir  # noqa: E402
from work_items import seed, serve, timed  # noqa: E402

OLD_SQL = """
INSERT INTO work_item_attempt (processing_state_id, source_object_id, stage, attempt, outcome, started_at, finished_at,
                               worker, duration_seconds, producer_version)
SELECT ps.id, ps.source_object_id, ps.stage, 1, 'done', now() - interval '90 days', now() - interval '90 days',
       'bench', 0.5, 'v0'
FROM generate_series(1, :n) g JOIN processing_state ps ON ps.id = 1 + (g % :rows)
"""


def bucket_ms(ctx, n: int) -> tuple[list[float], dict]:
    """``n`` timed bucket queries (after 5 warm-ups); (latencies in ms, the counts)."""
    from ki.store.status import bucket_counts

    with ctx.db.engine.connect() as conn:
        for _ in range(5):
            counts = bucket_counts(conn)
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            counts = bucket_counts(conn)
            out.append((time.perf_counter() - t0) * 1000)
    return out, counts


def line(name: str, ms: list[float]) -> str:
    return f"  {name:<36} p50 {percentile(ms, 50):7.1f} ms  p95 {percentile(ms, 95):7.1f} ms  max {max(ms):7.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--attempts", type=int, default=1_000_000)
    ap.add_argument("--docs", type=int, default=50_000)
    ap.add_argument("--failures", type=int, default=5_000)
    ap.add_argument("--batch-size", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=100)
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    with temp_workdir(prefix="ki-bench-archive-") as work:
        os.environ["KI_DATA_DIR"] = str(work / "data")
        os.environ.pop("KI_DATABASE_URL", None)
        import logging

        import httpx
        from sqlalchemy import text

        logging.getLogger("httpx").setLevel(logging.WARNING)
        from ki.api.app import create_app
        from ki.app.tokens import create_token
        from ki.domain.context import PipelineContext
        from ki.orchestration.archive import archive_history

        ctx = PipelineContext.open()
        seeded = seed(ctx, args.docs, args.failures)["counts"]
        extra = max(0, args.attempts - seeded["work_item_attempt"])
        t0 = time.perf_counter()
        with ctx.db.engine.begin() as conn:
            conn.execute(text(OLD_SQL), {"n": extra, "rows": seeded["processing_state"]})
        with ctx.db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))
            total = int(conn.execute(text("SELECT count(*) FROM work_item_attempt")).scalar_one())
        print(f"attempt history: {total:,} rows ({extra:,} old ones added in {time.perf_counter() - t0:.1f} s)")
        token = create_token(ctx.db.engine, name="bench", scopes=["read:work_item"])[1]
        headers = {"Authorization": f"Bearer {token}"}
        app = create_app(ctx)
        base, server = serve(app)
        try:
            with httpx.Client(base_url=base, timeout=60) as client:
                print(f"before (load average {os.getloadavg()[0]:.2f}):")
                ms, before = bucket_ms(ctx, args.requests)
                print(line("bucket query", ms))
                failed = timed(client, "/v1/work-items", args.requests, headers, {"status": "failed"})
                print(line("GET /v1/work-items?status=failed", failed))
                print(f"archival (batch {args.batch_size:,}; load average {os.getloadavg()[0]:.2f}):")
                report = archive_history(ctx, now=datetime.now(UTC) + timedelta(days=31), batch_size=args.batch_size,
                                         trigger="bench")
                print(f"  moved {report.attempts:,} attempt rows (+{report.runs} runs, {report.audit_entries} audit) "
                      f"in {report.seconds:.1f} s: {report.attempts / report.seconds:,.0f} rows/s, "
                      f"{report.batches} batches")
                with ctx.db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                    conn.execute(text("VACUUM ANALYZE"))
                    left = int(conn.execute(text("SELECT count(*) FROM work_item_attempt")).scalar_one())
                print(f"  live attempt rows left: {left:,} (the failing rows' evidence)")
                print(f"after (load average {os.getloadavg()[0]:.2f}):")
                ms, after = bucket_ms(ctx, args.requests)
                print(line("bucket query", ms))
                print(line("GET /v1/work-items?status=failed",
                           timed(client, "/v1/work-items", args.requests, headers, {"status": "failed"})))
                print(f"  bucket counts identical: {after == before}")
        finally:
            server.should_exit = True
            ctx.db.dispose()
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
