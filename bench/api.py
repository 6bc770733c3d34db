"""Console API latency with 50,000 documents' rows: ``GET /api/status``, ``/api/runs``, ``/api/quarantine``.

What runs
---------
* A throw-away data directory; ki's embedded PostgreSQL starts under it (as for any ``ki`` command).
* Seeding by SQL (seconds, not a real insertion of 50,000 files): one local source, ``--docs``
  source objects, 7 ``processing_state`` rows each (350,000 at the default) spread over every
  bucket the way a large estate mid-run looks — 94 % done everywhere (Extract decisions mostly
  skipped ``no_revision_evidence``), 2 % queued at Classify, 1 % running at Relate, 1 % awaiting
  retry at Extract metadata, 1 % quarantined at Parse with a full error object (6,000-character
  traceback tail), 1 % disabled at Index; later stages of unfinished objects wait. ``--runs`` finished
  insertion runs plus one active run. Then ``VACUUM ANALYZE`` (the steady state autovacuum keeps).
* A real ``ki serve`` (its own process, uvicorn) on that data directory; a token from
  ``ki.app.tokens.create_token``; sequential requests over loopback HTTP with httpx (after a warm-up),
  latency measured on the client: authentication, the query, JSON and the network stack included.
* The bucket query alone (in-process, no cache), for what one shared count costs.
* Page load: Debian's chromium (Playwright, ``executable_path``) opens ``/`` signed in; reported are
  the document's response end, first contentful paint and the moment the seven stage cards exist
  (the page renders from the answers embedded in its HTML, no extra round trip).

Targets (issue 17): status p95 <= 50 ms; runs and quarantine p95 <= 100 ms.

Run: ``.venv/bin/python bench/api.py [--docs 50000] [--runs 20] [--requests 200] [--no-browser]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import free_port, percentile, temp_workdir  # noqa: E402

SEED_SQL = """
INSERT INTO source (project_id, kind, root) VALUES (1, 'local', '/bench/estate');
INSERT INTO source_object (source_id, external_id, path, size, content_hash)
SELECT s.id, 'f' || g, '/bench/estate/Mandate/Akte ' || (g % 700) || '/Dokument ' || g || '.pdf', 1000 + g,
       md5(g::text) || md5((g + 1)::text)
FROM generate_series(1, {docs}) g, (SELECT id FROM source WHERE root = '/bench/estate') s;
WITH st(stage, i) AS (VALUES ('fetch', 1), ('convert', 2), ('classify_matter', 3), ('relate', 4),
                             ('extract_metadata', 5), ('extract_decisions', 6), ('index', 7)),
     o AS (SELECT id, id % 100 AS k FROM source_object),
     plan AS (
       SELECT o.id, st.stage, st.i, o.k,
              CASE WHEN o.k = 0 THEN 2 WHEN o.k IN (1, 2) THEN 3 WHEN o.k = 3 THEN 4 WHEN o.k = 4 THEN 5 ELSE 99 END
                AS at_stage,
              CASE WHEN o.k = 0 THEN 'quarantined' WHEN o.k IN (1, 2) THEN 'pending' WHEN o.k = 3 THEN 'running'
                   WHEN o.k = 4 THEN 'failed' ELSE NULL END AS at_status
       FROM o CROSS JOIN st)
INSERT INTO processing_state (source_object_id, stage, status, attempts, producer_version, last_error, next_retry_at,
                              claim_token, claimed_at, heartbeat_at, updated_at)
SELECT id, stage,
       CASE WHEN i < at_stage THEN (CASE WHEN i = 6 AND k % 10 <> 5 THEN 'skipped' ELSE 'done' END)
            WHEN i = at_stage THEN at_status
            WHEN at_stage < 99 THEN 'skipped'
            WHEN i = 7 AND k = 5 THEN 'skipped'
            WHEN i = 6 AND k % 10 <> 5 THEN 'skipped'
            ELSE 'done' END,
       CASE WHEN i = at_stage THEN 1 WHEN i < at_stage OR at_stage = 99 THEN 1 ELSE 0 END,
       CASE WHEN i < at_stage OR (at_stage = 99 AND NOT (i = 7 AND k = 5)) THEN 'mvp-1' ELSE NULL END,
       CASE WHEN i = at_stage AND at_status = 'quarantined' THEN jsonb_build_object(
                'class', 'UnsupportedDocument', 'reason', 'corrupt', 'deterministic', true, 'infrastructure', NULL,
                'message', 'Dokument ' || id || '.pdf: PDFium cannot open it: Failed to load document '
                           || '(PDFium: Data format error).',
                'traceback', repeat('  File "/srv/ki/convert/pdf.py", line 120, in convert_pdf' || chr(10), 100))
            WHEN i = at_stage AND at_status = 'failed' THEN jsonb_build_object(
                'class', 'ModelOutputInvalid', 'reason', NULL, 'deterministic', false,
                'message', 'schema-invalid answer')
            WHEN i > at_stage THEN '{"reason": "waiting_for_previous_stage"}'::jsonb
            WHEN i = 7 AND k = 5 THEN '{"reason": "disabled_by_configuration"}'::jsonb
            WHEN i = 6 AND k % 10 <> 5 THEN '{"reason": "no_revision_evidence"}'::jsonb
            ELSE NULL END,
       CASE WHEN i = at_stage AND at_status = 'failed' THEN now() + interval '5 minutes' END,
       CASE WHEN i = at_stage AND at_status = 'running' THEN gen_random_uuid() END,
       CASE WHEN i = at_stage AND at_status = 'running' THEN now() END,
       CASE WHEN i = at_stage AND at_status = 'running' THEN now() END,
       now() - (id % 5000) * interval '1 second'
FROM plan;
INSERT INTO pipeline_runs (kind, label, provider, status, trigger, processed, done, skipped, retried, quarantined,
                           started_at, finished_at, updated_at)
SELECT 'insertion', 'Insertion', 'local', 'completed', 'cli', 17500, 16000, 1400, 50, 50,
       now() - (g + 1) * interval '1 hour', now() - (g + 1) * interval '1 hour' + interval '20 minutes',
       now() - (g + 1) * interval '1 hour' + interval '20 minutes'
FROM generate_series(1, {runs}) g;
INSERT INTO pipeline_runs (kind, label, provider, status, trigger, processed, done, started_at)
VALUES ('insertion', 'Insertion', 'local', 'running', 'api', 1200, 1100, now() - interval '2 minutes');
"""


def seed(docs: int, runs: int) -> dict[str, int]:
    """Seed the data directory's database (see module doc); returns row counts."""
    from sqlalchemy import text

    from ki.domain.context import PipelineContext

    ctx = PipelineContext.open()
    started = time.perf_counter()
    raw = ctx.db.engine.raw_connection()
    try:
        with raw.cursor() as cur:
            cur.execute(SEED_SQL.replace("{docs}", str(int(docs))).replace("{runs}", str(int(runs))))
        raw.commit()
    finally:
        raw.close()
    with ctx.db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE"))
        counts = {t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one())
                  for t in ("source_object", "processing_state", "pipeline_runs")}
        counts["quarantined"] = int(conn.execute(text(
            "SELECT count(*) FROM processing_state WHERE status = 'quarantined'")).scalar_one())
    print(f"seeded in {time.perf_counter() - started:.1f} s: {json.dumps(counts)}")
    from ki.app.tokens import create_token

    counts["_token"] = create_token(ctx.db.engine, name="bench", scopes=["read:pipeline", "write:pipeline"])[1]
    ctx.db.dispose()
    return counts


def timed(client, path: str, n: int, headers: dict[str, str]) -> list[float]:
    """``n`` sequential GETs of ``path`` (after 20 warm-ups); latencies in ms."""
    for _ in range(20):
        client.get(path, headers=headers).raise_for_status()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = client.get(path, headers=headers)
        out.append((time.perf_counter() - t0) * 1000)
        r.raise_for_status()
    return out


def bucket_query_ms(n: int = 20) -> tuple[float, float, float]:
    """p50, p95 and max ms of the one bucket query run directly (what the shared count costs each interval)."""
    from ki.domain.context import PipelineContext
    from ki.store.status import bucket_counts

    ctx = PipelineContext.open()
    ms = []
    with ctx.db.engine.connect() as conn:
        for _ in range(n):
            t0 = time.perf_counter()
            bucket_counts(conn)
            ms.append((time.perf_counter() - t0) * 1000)
    ctx.db.dispose()
    return percentile(ms, 50), percentile(ms, 95), max(ms)


def page_load(base: str, token: str, repeat: int = 8) -> dict[str, float]:
    """Median ms of response end, first contentful paint and seven stage cards, over ``repeat`` loads."""
    from playwright.sync_api import sync_playwright

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    samples: dict[str, list[float]] = {"response_end": [], "first_contentful_paint": [], "stage_cards": []}
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=os.environ.get("KI_CHROMIUM",
                                                   "/usr/bin/chromium"), args=args, headless=True,
                                                   viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        page.goto(base + "/login")
        page.fill("#token", token)
        page.click("button[type=submit]")
        page.wait_for_selector("li.stage")
        for _ in range(repeat):
            t0 = time.perf_counter()
            page.goto(base + "/", wait_until="commit")
            page.wait_for_selector("li.stage >> nth=6")
            cards = (time.perf_counter() - t0) * 1000
            page.wait_for_load_state("load")
            nav = page.evaluate("() => performance.getEntriesByType('navigation')[0].toJSON()")
            paint = page.evaluate("() => performance.getEntriesByName('first-contentful-paint').map(e => e.startTime)")
            samples["response_end"].append(nav["responseEnd"])
            samples["first_contentful_paint"].append(paint[0] if paint else float("nan"))
            samples["stage_cards"].append(cards)
        ctx.close()
    return {k: statistics.median(v) for k, v in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=50_000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--no-browser", action="store_true", help="skip the page-load measurement")
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    args = ap.parse_args()
    import httpx

    with temp_workdir(keep=args.keep, prefix="ki-bench-api-") as work:
        data = work / "data"
        os.environ["KI_DATA_DIR"] = str(data)
        os.environ.pop("KI_DATABASE_URL", None)
        counts = seed(args.docs, args.runs)
        token = counts.pop("_token")
        port = free_port()
        env = os.environ | {"KI_DATA_DIR": str(data)}
        server = subprocess.Popen([sys.executable, "-m", "ki.cli", "serve", "--port", str(port), "--log-level",
                                   "warning"], env=env)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("ki serve did not start")
                time.sleep(0.2)
            headers = {"Authorization": f"Bearer {token}"}
            rows = []
            with httpx.Client(base_url=base, timeout=30) as client:
                for path, target in (("/api/status", 50), ("/api/runs", 100), ("/api/quarantine", 100),
                                     ("/api/quarantine?stage=convert&reason=corrupt&offset=200", 100),
                                     ("/api/config", None)):
                    ms = timed(client, path, args.requests, headers)
                    rows.append((path, percentile(ms, 50), percentile(ms, 95), max(ms), target))
            load = os.getloadavg()
            print(f"\n{counts['source_object']:,} documents, {counts['processing_state']:,} processing_state rows, "
                  f"{counts['pipeline_runs']} runs, {counts['quarantined']:,} quarantined; {args.requests} sequential "
                  f"requests each; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n")
            print(f"{'endpoint':<58} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}  target p95")
            for path, p50, p95, mx, target in rows:
                verdict = "" if target is None else f"<= {target} ms {'ok' if p95 <= target else 'MISSED'}"
                print(f"{path:<58} {p50:>8.1f} {p95:>8.1f} {mx:>8.1f}  {verdict}")
            print(f"{'(the bucket query itself, uncached, in-process)':<58} " + "{:>8.1f} {:>8.1f} {:>8.1f}".format(
                *bucket_query_ms()))
            if not args.no_browser:
                pl = page_load(base, token)
                print(f"\npage load (median of 8, chromium): response end {pl['response_end']:.0f} ms, first "
                      f"contentful paint {pl['first_contentful_paint']:.0f} ms, seven stage cards "
                      f"{pl['stage_cards']:.0f} ms")
        finally:
            server.terminate()
            server.wait(20)
            from ki.store.db import stop_embedded_server

            stop_embedded_server(data / "pg")


if __name__ == "__main__":
    main()
