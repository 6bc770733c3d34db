"""Work-items latency at 50,000 documents with 5,000 failures in 40 signatures (issue 18 "Benchmark").

What runs
---------
* A throw-away data directory; ki's embedded PostgreSQL starts under it.
* Seeding by SQL: one local source, ``--docs`` source objects, 7 ``processing_state`` rows each (350,000
  at the default). ``--failures`` Convert rows fail in 40 signatures (40 error templates whose messages
  differ per file only by path and numbers): 20 deterministic ones quarantined, 20 outages awaiting a
  retry (``last_error.infrastructure`` set); their later stages wait; every other row is done. The attempt
  history holds one row per done row and per failure (~350,000 rows). Then ``VACUUM ANALYZE``.
* The app (``create_app``) on uvicorn in a thread on a loopback port, a ``write:work_item`` token;
  sequential requests with httpx after warm-ups, latency measured on the client (authentication, the
  queries, JSON and the network stack included):
  - ``GET /v1/work-items?limit=50`` (first page, no filter), ``?status=failed``, ``?kind=convert&
    infrastructure=true``, ``?signature=<one>``, and a page deep in a cursor walk;
  - ``GET /v1/work-items/groups`` (all 40 groups).
* Bulk retry, 1,000 items per call: ``ki.orchestration.work_items.preview_bulk`` then ``run_bulk``
  in-process (the HTTP call adds only one request, and would also launch a run on the seeded rows) of
  every quarantined Convert row (2,500 at the default: calls of 1,000, 1,000, 500, each with the previous
  call's next token), each call timed whole: count, select, release with downstream parked, one history
  row per item, the audit entry, the remaining count.

Targets (issue 18): list and groups <= 100 ms p95; a bulk retry of 1,000 <= 2 s.

Run: ``.venv/bin/python bench/work_items.py [--docs 50000] [--failures 5000] [--requests 100]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import percentile, temp_workdir  # noqa: E402

N_SIGNATURES = 40
TEMPLATES = [
    ("UnsupportedDocument", "corrupt", "File '{path}' is not a zip file (central directory at {n} missing)"),
    ("UnsupportedDocument", "password_required", "{path}: the PDF is encrypted (revision {n})"),
    ("DoclingUnavailable", None, "Docling Serve at http://10.0.0.{n}:5001 answered HTTP 503 after {n}.2 s"),
    ("GatewayUnavailable", None, "gateway: status code 429 for request req_{n}abcdef12 (retry after {n} s)"),
]


def templates() -> list[tuple[str, str | None, str, bool]]:
    """40 (class, reason, message template, infrastructure) — the first 20 deterministic, the rest outages."""
    out = []
    for i in range(N_SIGNATURES):
        cls, reason, message = TEMPLATES[(i % 2) + (2 if i >= N_SIGNATURES // 2 else 0)]
        out.append((cls, reason, f"[variant {chr(65 + i % 26)}{i // 26}] " + message.replace("{n}", "{n}"),
                    i >= N_SIGNATURES // 2))
    return out


SEED_SQL = """
INSERT INTO source (project_id, kind, root) VALUES (1, 'local', '/bench/estate');
INSERT INTO source_object (source_id, external_id, path, size, content_hash)
SELECT s.id, 'f' || g, '/bench/estate/Mandate/Akte ' || (g % 700) || '/Dokument ' || g || '.pdf', 1000 + g,
       md5(g::text) || md5((g + 1)::text)
FROM generate_series(1, :docs) g, (SELECT id FROM source WHERE root = '/bench/estate') s;
WITH st(stage, i) AS (VALUES ('fetch', 1), ('convert', 2), ('classify_matter', 3), ('relate', 4),
                             ('extract_metadata', 5), ('extract_decisions', 6), ('index', 7)),
     o AS (SELECT so.id, so.path, (so.id % (:docs / :failures)) = 0 AS failing,
                  (so.id / (:docs / :failures)) % 40 AS sig FROM source_object so),
     t AS (SELECT * FROM unnest(CAST(:classes AS text[]), CAST(:reasons AS text[]), CAST(:messages AS text[]),
                                CAST(:infra AS boolean[]), CAST(:sigs AS text[]))
                  WITH ORDINALITY AS t(cls, reason, message, infra, signature, n))
INSERT INTO processing_state (source_object_id, stage, status, attempts, producer_version, last_error, next_retry_at,
                              claimed_at, updated_at)
SELECT o.id, st.stage,
       CASE WHEN NOT o.failing OR st.i = 1 THEN 'done' WHEN st.i = 2 THEN (CASE WHEN t.infra THEN 'failed'
            ELSE 'quarantined' END) ELSE 'skipped' END,
       CASE WHEN NOT o.failing OR st.i <= 2 THEN 1 ELSE 0 END,
       CASE WHEN NOT o.failing OR st.i = 1 THEN 'v1' END,
       CASE WHEN o.failing AND st.i = 2 THEN jsonb_build_object(
                'class', t.cls, 'reason', t.reason, 'deterministic', NOT t.infra,
                'infrastructure', CASE WHEN t.infra THEN 'outage' END, 'signature', t.signature,
                'message', replace(replace(t.message, '{path}', o.path), '{n}', (o.id % 97)::text),
                'traceback', repeat('  File "/srv/ki/convert/pdf.py", line 120, in convert_pdf' || chr(10), 40))
            WHEN o.failing AND st.i > 2 THEN '{"reason": "waiting_for_previous_stage"}'::jsonb END,
       CASE WHEN o.failing AND st.i = 2 AND t.infra THEN now() + interval '1 hour' END,
       now() - interval '1 hour',
       now() - (o.id % 5000) * interval '1 second'
FROM o JOIN t ON t.n = o.sig + 1 CROSS JOIN st;
INSERT INTO work_item_attempt (processing_state_id, source_object_id, stage, attempt, outcome, started_at, worker,
                               error_class, reason, message, infrastructure, signature, duration_seconds,
                               producer_version, finished_at)
SELECT id, source_object_id, stage, 1, CASE WHEN status = 'done' THEN 'done' ELSE status END, claimed_at, 'bench',
       last_error->>'class', last_error->>'reason', last_error->>'message', last_error->>'infrastructure',
       last_error->>'signature', 0.5, producer_version, updated_at
FROM processing_state WHERE status IN ('done', 'failed', 'quarantined');
"""


def seed(ctx, docs: int, failures: int) -> dict:
    """Seed (see module doc); returns row counts and the 40 signatures."""
    from sqlalchemy import text

    from ki.store.signatures import error_signature

    rows = templates()
    sigs = [error_signature(c, r, m.replace("{path}", "/x.pdf").replace("{n}", "1")) for c, r, m, _ in rows]
    started = time.perf_counter()
    with ctx.db.engine.begin() as conn:
        for statement in SEED_SQL.split(";\n"):
            if statement.strip():
                conn.execute(text(statement), {
                    "docs": docs, "failures": failures, "classes": [r[0] for r in rows],
                    "reasons": [r[1] for r in rows], "messages": [r[2] for r in rows],
                    "infra": [r[3] for r in rows], "sigs": sigs})
    with ctx.db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE"))
        counts = {t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one())
                  for t in ("source_object", "processing_state", "work_item_attempt")}
        counts["failing"] = int(conn.execute(text(
            "SELECT count(*) FROM processing_state WHERE status IN ('failed', 'quarantined')")).scalar_one())
        counts["signatures"] = int(conn.execute(text(
            "SELECT count(DISTINCT last_error->>'signature') FROM processing_state "
            "WHERE status IN ('failed', 'quarantined')")).scalar_one())
    print(f"seeded in {time.perf_counter() - started:.1f} s: {json.dumps(counts)}")
    return {"counts": counts, "signatures": sigs}


def serve(app):
    """uvicorn in a thread on a free loopback port; returns (base URL, server)."""
    import socket

    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server


def timed(client, path: str, n: int, headers: dict, params: dict | None = None) -> list[float]:
    """``n`` sequential GETs (after 10 warm-ups); latencies in ms."""
    for _ in range(10):
        client.get(path, headers=headers, params=params).raise_for_status()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = client.get(path, headers=headers, params=params)
        out.append((time.perf_counter() - t0) * 1000)
        r.raise_for_status()
    return out


def report(name: str, ms: list[float], target: float) -> None:
    p95 = percentile(ms, 95)
    print(f"  {name:<44} p50 {percentile(ms, 50):7.1f} ms  p95 {p95:7.1f} ms  max {max(ms):7.1f} ms  "
          f"total {sum(ms) / 1000:6.2f} s  {'ok' if p95 <= target else 'OVER'} (target p95 <= {target:.0f} ms)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=50_000)
    ap.add_argument("--failures", type=int, default=5_000)
    ap.add_argument("--requests", type=int, default=100, help="timed requests per endpoint (default 100)")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory")
    args = ap.parse_args()
    if args.docs % args.failures:
        ap.error("--docs must be a multiple of --failures")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    with temp_workdir(keep=args.keep, prefix="ki-bench-work-items-") as work:
        os.environ["KI_DATA_DIR"] = str(work / "data")
        os.environ.pop("KI_DATABASE_URL", None)
        import logging

        import httpx

        logging.getLogger("httpx").setLevel(logging.WARNING)

        from ki.api.app import create_app
        from ki.app.tokens import create_token
        from ki.domain.context import PipelineContext
        from ki.orchestration.work_items import preview_bulk, run_bulk
        from ki.store.work_items import WorkItemFilter

        ctx = PipelineContext.open()
        seeded = seed(ctx, args.docs, args.failures)
        token = create_token(ctx.db.engine, name="bench", scopes=["write:work_item"])[1]
        headers = {"Authorization": f"Bearer {token}"}
        app = create_app(ctx)
        base, server = serve(app)
        n = args.requests
        try:
            with httpx.Client(base_url=base, timeout=60) as client:
                print(f"HTTP, {n} sequential requests each (load average {os.getloadavg()[0]:.2f}):")
                sig = seeded["signatures"][3]
                for name, params in (("list, first page (no filter)", {}),
                                     ("list, status=failed", {"status": "failed"}),
                                     ("list, kind=convert&infrastructure=true", {"kind": "convert",
                                                                                 "infrastructure": "true"}),
                                     ("list, signature=<one of 40>", {"signature": sig}),
                                     ("list, path_prefix=.../Akte 7/ bucket=waiting",
                                      {"path_prefix": "/bench/estate/Mandate/Akte 7/", "bucket": "waiting"})):
                    report(name, timed(client, "/v1/work-items", n, headers, params), 100)
                first = client.get("/v1/work-items", headers=headers, params={"status": "failed", "limit": 50}).json()
                cursor = first["next_cursor"]
                for _ in range(20):
                    cursor = client.get("/v1/work-items", headers=headers,
                                        params={"status": "failed", "cursor": cursor}).json()["next_cursor"]
                report("list, status=failed, page 22 (cursor)",
                       timed(client, "/v1/work-items", n, headers, {"status": "failed", "cursor": cursor}), 100)
                groups = client.get("/v1/work-items/groups", headers=headers).json()["groups"]
                assert len(groups) == N_SIGNATURES, len(groups)
                report("groups (40 of them)", timed(client, "/v1/work-items/groups", n, headers), 100)
            print(f"bulk retry, in-process (load average {os.getloadavg()[0]:.2f}):")
            flt = WorkItemFilter(kind="convert", infrastructure=False)  # the 2,500 quarantined at the default
            t0 = time.perf_counter()
            preview = preview_bulk(ctx, "retry", flt, actor="bench", limit=1000)
            print(f"  dry run of kind=convert infrastructure=false: {preview.count} match, "
                  f"{(time.perf_counter() - t0) * 1000:.0f} ms")
            token, round_no = preview.confirmation_token, 0
            while token:
                round_no += 1
                t1 = time.perf_counter()
                result = run_bulk(ctx, "retry", flt, actor="bench", token=token, limit=1000)
                took = time.perf_counter() - t1
                verdict = "ok" if took <= 2 * max(result.acted, 1) / 1000 else "OVER"
                print(f"  call {round_no}: {result.acted} retried, {result.remaining} remain: {took * 1000:.0f} ms "
                      f"({verdict}, target <= 2 s per 1,000)")
                token = result.next_confirmation_token
        finally:
            server.should_exit = True
            app.state.ki.launcher.wait_idle(60)
            ctx.db.dispose()
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
