"""Claim-execute throughput: ki's executor vs procrastinate, no-op handlers, one embedded PostgreSQL.

What runs
---------
* ki: N documents are seeded exactly as a scan seeds them (``seed_rows``: fetch pending,
  every later stage waiting). Every handler in ``ki.stages.STAGE_HANDLERS`` is replaced by
  a no-op returning ``StageOutcome(status="done")``. ``PipelineRunner.run_until_idle``
  (the local provider: prepare steps, then ``claim_next`` + ``execute_claim`` on a
  thread pool) runs until idle. The stage set is pinned in the saved configuration
  (``--stages``, default fetch,convert,index: the model stages disabled), so each document
  is claimed 3 times (convert's completion records the 4 switched-off stages
  ``skipped/disabled_by_configuration`` in the same statement). Claims and handler executions
  are both printed; the ratio uses the handler executions (the work procrastinate is given).
* procrastinate: the same number of no-op jobs (N x enabled stages) is deferred with
  ``batch_defer_async`` into a separate database of the same server, then processed by
  ``run_worker_async(wait=False, concurrency=C)`` with an async no-op task (the docs'
  recommendation for concurrency), ``PsycopgConnector`` pool of the same size as ki's.

The server is ki's embedded PostgreSQL with its stock settings (fsync on,
synchronous_commit on): the durability both systems promise.

Options add a profiled ki pass (``--profile``: cProfile of the worker threads, the
statements each execution sends, WAL fsyncs). (The what-if passes that sized the claim-path
changes of session 2 are gone: those changes are ki's code now.)

``--observe off|metrics|traces`` measures what counting each execution (Prometheus) and tracing it
(OpenTelemetry, spans into an in-memory exporter behind the batching span processor that ki's OTLP
configuration uses) cost against no observation at all.

Run: ``.venv/bin/python bench/claims.py [--docs 2000] [--concurrency 4] [--profile] [--observe traces]``
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
import os
import pstats
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    DEFAULT_BENCH_STAGES,
    conninfo,
    embedded_server,
    libpq_kwargs,
    percentile,
    pin_stages,
    resolve_stages,
    server_settings,
    temp_workdir,
)

#: the stages enabled for the run (set by main from --stages; the rest are disabled in the saved config)
ENABLED_HANDLER_STAGES: list[str] = ["fetch", "convert", "index"]


# --------------------------------------------------------------------------- server-side counters


def wal_counters(uri: str) -> dict[str, float]:
    """Cluster-wide WAL counters: fsyncs of WAL (pg_stat_io) and WAL records/bytes (pg_stat_wal)."""
    import psycopg

    with psycopg.connect(**libpq_kwargs(uri, "postgres"), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        fsyncs = conn.execute(
            "SELECT coalesce(sum(fsyncs), 0) FROM pg_stat_io WHERE object = 'wal'"
        ).fetchone()[0]
        rec, nbytes = conn.execute("SELECT wal_records, wal_bytes FROM pg_stat_wal").fetchone()
    return {"wal_fsyncs": float(fsyncs), "wal_records": float(rec), "wal_bytes": float(nbytes)}


def db_xacts(uri: str, dbname: str) -> dict[str, float]:
    """Committed / rolled back transactions of one database (pg_stat_database)."""
    import psycopg

    with psycopg.connect(**libpq_kwargs(uri, "postgres"), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        c, r = conn.execute(
            "SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = %s", (dbname,)
        ).fetchone()
    return {"commits": float(c), "rollbacks": float(r)}


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in after}


def checkpoint(uri: str) -> None:
    import psycopg

    with psycopg.connect(**libpq_kwargs(uri, "postgres"), autocommit=True) as conn:
        conn.execute("CHECKPOINT")


# --------------------------------------------------------------------------- ki


def noop_handler(ctx):  # noqa: ANN001 - StageContext
    from ki.domain.context import StageOutcome

    return StageOutcome(status="done")


def install_noop_handlers() -> None:
    from ki.stages import STAGE_HANDLERS

    for name in list(STAGE_HANDLERS):
        STAGE_HANDLERS[name] = noop_handler


def setup_ki(uri: str, dbname: str, workdir: Path, docs: int, concurrency: int, *, pre_ping: bool = True,
             log_statements: bool = False):
    """Create database ``dbname``, migrate, seed ``docs`` documents as a scan does; return a PipelineContext."""
    import psycopg
    from sqlalchemy import create_engine, text

    from ki.adapters.sources.scan import register_local_source
    from ki.config.loader import ProcessSettings, load_config
    from ki.domain.context import PipelineContext
    from ki.store.blobs import BlobStore
    from ki.store.db import Database, ensure_database, open_database, sqlalchemy_url
    from ki.store.requeue import seed_rows

    ensure_database(uri, dbname)
    if log_statements:
        with psycopg.connect(**libpq_kwargs(uri, "postgres"), autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{dbname}" SET log_statement = \'all\'')
    url = sqlalchemy_url(uri, dbname)
    # ki.store.db.connect() opens the pool with pool_size = workers + 2
    db = open_database(url, pool_size=concurrency + 2)
    if not pre_ping:
        db.dispose()
        engine = create_engine(url, pool_size=concurrency + 2, max_overflow=concurrency + 2, pool_pre_ping=False)
        db = Database(engine=engine, url=url)
    data_dir = workdir / f"data-{dbname}"
    pin_stages(data_dir, ENABLED_HANDLER_STAGES)
    settings = ProcessSettings(data_dir=data_dir, workers=concurrency)
    ctx = PipelineContext(db=db, blobs=BlobStore(data_dir / "blobs"), config=load_config(data_dir),
                          settings=settings)
    src_root = workdir / "src"
    src_root.mkdir(exist_ok=True)
    source_id = register_local_source(ctx, src_root)
    with db.engine.begin() as conn:
        ids = conn.execute(
            text("""INSERT INTO source_object (source_id, external_id, path, size, mtime_ns)
                    SELECT :sid, 'doc-' || g, :root || '/doc-' || g, 1000, 0 FROM generate_series(1, :n) g
                    RETURNING id"""),
            {"sid": source_id, "root": str(src_root), "n": docs},
        ).scalars().all()
        seed_rows(conn, list(ids))
    with psycopg.connect(**libpq_kwargs(uri, dbname), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE processing_state")
        conn.execute("VACUUM ANALYZE source_object")
    return ctx


@dataclass
class KiResult:
    wall: float
    first_to_last: float
    per_stage: dict[str, int]
    kinds: dict[str, int]
    buckets: dict[str, dict[str, int]]
    server: dict[str, float] = field(default_factory=dict)
    exec_ms_p50: float = 0.0
    exec_ms_p95: float = 0.0

    @property
    def claims(self) -> int:
        return sum(self.per_stage.values())

    @property
    def handler_execs(self) -> int:
        return sum(self.per_stage.get(s, 0) for s in ENABLED_HANDLER_STAGES)


def run_ki(ctx, concurrency: int, uri: str, dbname: str) -> KiResult:
    """One PipelineRunner.run_until_idle over the seeded rows; wall and counters."""
    from sqlalchemy import text

    from ki.orchestration.runner import PipelineRunner
    from ki.store.status import bucket_counts

    with ctx.db.engine.begin() as conn:
        run_id = conn.execute(text(
            "INSERT INTO pipeline_runs (kind, label, provider, status, trigger) "
            "VALUES ('insertion', 'bench', 'local', 'running', 'bench') RETURNING id")).scalar_one()
    runner = PipelineRunner(ctx, run_id=run_id, workers=concurrency, wait_for_retries_seconds=0.0,
                            tick_seconds=0.05)
    first, last = [None], [0.0]
    orig_add = runner.counters.add

    def add(result, seconds):  # noqa: ANN001 - called under the runner's lock
        now = time.perf_counter()
        if first[0] is None:
            first[0] = now - seconds
        last[0] = now
        orig_add(result, seconds)

    runner.counters.add = add  # instance attribute shadows the method
    checkpoint(uri)
    before = wal_counters(uri) | db_xacts(uri, dbname)
    t0 = time.perf_counter()
    counters = runner.run_until_idle()
    wall = time.perf_counter() - t0
    ctx.db.dispose()  # closing the sessions flushes their statistics
    time.sleep(1.1)  # auxiliary processes (walwriter) report statistics at most once a second
    server = delta(wal_counters(uri) | db_xacts(uri, dbname), before)
    with ctx.db.engine.connect() as conn:
        buckets = bucket_counts(conn)
    all_secs = [s for v in counters.per_stage_seconds.values() for s in v]
    return KiResult(
        wall=wall,
        first_to_last=(last[0] - first[0]) if first[0] is not None else 0.0,
        per_stage={s: len(v) for s, v in counters.per_stage_seconds.items()},
        kinds={"done": counters.done, "skipped": counters.skipped, "retried": counters.retried,
               "quarantined": counters.quarantined, "claim_lost": counters.claim_lost},
        buckets=buckets,
        server=server,
        exec_ms_p50=percentile(all_secs, 50) * 1000,
        exec_ms_p95=percentile(all_secs, 95) * 1000,
    )


def check_ki(res: KiResult, docs: int) -> list[str]:
    """Problems with the final state (every document through every stage)."""
    problems = []
    for s in ENABLED_HANDLER_STAGES:
        if res.buckets[s]["done"] != docs:
            problems.append(f"{s}: {res.buckets[s]['done']} done, expected {docs}")
    for s, b in res.buckets.items():
        if s not in ENABLED_HANDLER_STAGES and b["disabled"] != docs:
            problems.append(f"{s}: {b['disabled']} disabled, expected {docs}")
    return problems


# --------------------------------------------------------------------------- procrastinate


@dataclass
class ProcResult:
    wall: float
    defer_s: float
    statuses: dict[str, int]
    server: dict[str, float]


def run_procrastinate(uri: str, dbname: str, n_jobs: int, concurrency: int, pool_size: int,
                      listen_notify: bool) -> ProcResult:
    import procrastinate
    import psycopg

    from ki.store.db import ensure_database

    ensure_database(uri, dbname)
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(
        conninfo=conninfo(uri, dbname), min_size=pool_size, max_size=pool_size))

    @app.task(name="noop", queue="bench")
    async def noop(doc: int, stage: int) -> None:
        return None

    async def main() -> ProcResult:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
            t = time.perf_counter()
            batch = 1000
            per_doc = max(1, len(ENABLED_HANDLER_STAGES))
            for start in range(0, n_jobs, batch):
                await noop.batch_defer_async(*[{"doc": i // per_doc, "stage": i % per_doc}
                                               for i in range(start, min(n_jobs, start + batch))])
            defer_s = time.perf_counter() - t
            with psycopg.connect(**libpq_kwargs(uri, dbname), autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE procrastinate_jobs")
            checkpoint(uri)
            before = wal_counters(uri) | db_xacts(uri, dbname)
            t0 = time.perf_counter()
            await app.run_worker_async(wait=False, concurrency=concurrency, listen_notify=listen_notify,
                                       install_signal_handlers=False, name="bench")
            wall = time.perf_counter() - t0
        time.sleep(1.1)  # pool closed: sessions flushed their statistics; let the walwriter report too
        server = delta(wal_counters(uri) | db_xacts(uri, dbname), before)
        with psycopg.connect(**libpq_kwargs(uri, dbname)) as conn:
            statuses = dict(conn.execute(
                "SELECT status::text, count(*) FROM procrastinate_jobs GROUP BY status").fetchall())
        return ProcResult(wall, defer_s, statuses, server)

    return asyncio.run(main())


# --------------------------------------------------------------------------- profile


PROFILE_ROWS = [
    # (label, filename suffix, function name)
    ("PipelineRunner._worker (thread total)", "orchestration/runner.py", "_worker"),
    ("  claim: q.claim_next (UPDATE ... SKIP LOCKED)", "store/claims.py", "claim_next"),
    ("  execute_claim", "orchestration/execute.py", "execute_claim"),
    ("    SourceObjectView.for_claim (from the claim's row)", "context.py", "for_claim"),
    ("    StageConfig / producer_version", "config/settings.py", "producer_version"),
    ("    handler (no-op)", "bench/claims.py", "noop_handler"),
    ("    _record_outcome", "orchestration/execute.py", "_record_outcome"),
    ("      q.complete_claim (UPDATE + _unlock_next, one statement)", "store/claims.py", "complete_claim"),
    ("pool checkout (incl. pre-ping)", "pool/base.py", "_checkout"),
    ("  pre-ping ';' (do_ping)", "postgresql/_psycopg_common.py", "do_ping"),
    ("COMMIT (do_commit)", "engine/default.py", "do_commit"),
    ("ROLLBACK on return (do_rollback)", "engine/default.py", "do_rollback"),
    ("psycopg Cursor.execute (all statements)", "psycopg/cursor.py", "execute"),
]


def profile_breakdown(profiles: list[cProfile.Profile], n_exec: int, threads: int) -> list[str]:
    stats = pstats.Stats(profiles[0])
    for p in profiles[1:]:
        stats.add(p)
    raw = stats.stats  # {(file, line, func): (cc, nc, tt, ct, callers)}
    lines = []
    thread_total = None
    for label, suffix, func in PROFILE_ROWS:
        calls, cum = 0, 0.0
        for (fname, _line, fn), (_cc, nc, _tt, ct, _callers) in raw.items():
            if fn == func and fname.replace("\\", "/").endswith(suffix):
                calls += nc
                cum += ct
        if thread_total is None:
            thread_total = cum
        share = 100 * cum / thread_total if thread_total else 0
        lines.append(f"  {label:<50} {calls / n_exec:6.2f} calls/exec {1000 * cum / n_exec:8.3f} ms/exec"
                     f" {share:5.1f}%")
    # time blocked on the server: psycopg's wait functions (C or Python)
    wait = sum(ct for (fname, _l, fn), (_cc, _nc, _tt, ct, _c) in raw.items()
               if "wait" in fn and ("psycopg" in fname or fn == "wait_c" or "psycopg" in str(fn)))
    lines.append(f"  {'blocked in psycopg wait (server + network)':<50} {'':>16} {1000 * wait / n_exec:8.3f} ms/exec"
                 f" {100 * wait / thread_total if thread_total else 0:5.1f}%")
    lines.append(f"  (thread time = {threads} threads x wall; cProfile inflates the Python share)")
    return lines


STATEMENT_KINDS = [
    ("BEGIN", re.compile(r"^BEGIN", re.I)),
    ("COMMIT", re.compile(r"^COMMIT", re.I)),
    ("ROLLBACK", re.compile(r"^ROLLBACK", re.I)),
    ("';' (pool pre-ping)", re.compile(r"^;?\s*$")),
    ("claim UPDATE (claim_next)", re.compile(r"WITH next AS", re.I)),
    ("SELECT source_object (load)", re.compile(r"FROM source_object so JOIN source", re.I)),
    ("complete + _unlock_next (one statement)", re.compile(r"completions = completions", re.I)),
    ("heartbeat UPDATE (ClaimKeeper)", re.compile(r"SET heartbeat_at = now\(\)", re.I)),
    ("eligible/idle checks", re.compile(r"SELECT EXISTS|count\(\*\)|min\(next_retry_at\)", re.I)),
]


def statement_census(log_path: Path, offset: int, dbname: str, n_exec: int) -> list[str]:
    """Count the statements logged (log_statement=all) after ``offset`` for database ``dbname``."""
    text = log_path.read_bytes()[offset:].decode("utf-8", "replace")
    # lines look like "... LOG:  statement: BEGIN" or "LOG:  execute <unnamed>: UPDATE ..."
    stmts = re.findall(r"LOG:\s+(?:statement|execute [^:]*):\s*(.*?)(?=\n\S|\Z)", text, re.S)
    counts = {k: 0 for k, _ in STATEMENT_KINDS}
    other = 0
    for s in stmts:
        s = s.strip()
        for kind, rx in STATEMENT_KINDS:
            if rx.search(s):
                counts[kind] += 1
                break
        else:
            other += 1
    total = len(stmts)
    prepared = len(re.findall(r"LOG:\s+execute _pg3_", text))
    out = [f"  {k:<36} {v:8d}  {v / n_exec:5.2f}/exec" for k, v in counts.items()]
    out.append(f"  {'(of which server-side prepared)':<36} {prepared:8d}  {prepared / n_exec:5.2f}/exec")
    out.append(f"  {'other':<36} {other:8d}  {other / n_exec:5.2f}/exec")
    out.append(f"  {'all statements (= round trips)':<36} {total:8d}  {total / n_exec:5.2f}/exec")
    return out


def profile_pass(uri: str, pgdata: Path, workdir: Path, docs: int, concurrency: int) -> None:
    from ki.orchestration.runner import PipelineRunner

    dbname = "ki_profile"
    ctx = setup_ki(uri, dbname, workdir, docs, concurrency, log_statements=True)
    log_path = pgdata / "log"
    offset = log_path.stat().st_size if log_path.exists() else 0
    profiles: list[cProfile.Profile] = []
    orig_worker = PipelineRunner._worker

    def profiled_worker(self):  # noqa: ANN001
        prof = cProfile.Profile()
        profiles.append(prof)
        prof.enable()
        try:
            orig_worker(self)
        finally:
            prof.disable()

    PipelineRunner._worker = profiled_worker
    try:
        res = run_ki(ctx, concurrency, uri, dbname)
    finally:
        PipelineRunner._worker = orig_worker
        ctx.db.dispose()
    n = res.claims
    print(f"\n== ki profile pass ({docs} docs, {n} executions, cProfile + log_statement=all: slower) ==")
    print(f"wall {res.wall:.2f} s -> {n / res.wall:.0f} executions/s under profiling")
    print("where a worker thread's time goes (cumulative, per execution):")
    for line in profile_breakdown(profiles, n, concurrency):
        print(line)
    print("statements sent per execution (server log):")
    time.sleep(0.5)  # let the logger flush
    for line in statement_census(log_path, offset, dbname, n):
        print(line)


def print_ki(r: KiResult, docs: int) -> None:
    problems = check_ki(r, docs)
    print(f"  claims executed: {r.claims} = " + ", ".join(f"{s} {n}" for s, n in r.per_stage.items()))
    print(f"  outcomes: {json.dumps(r.kinds)}; final state ok: {not problems}" + (f" {problems}" if problems else ""))
    print(f"  wall (run_until_idle incl. prepare steps + idle detection) {r.wall:.2f} s; "
          f"first->last completion {r.first_to_last:.2f} s")
    print(f"  execute_claim latency p50 {r.exec_ms_p50:.2f} ms, p95 {r.exec_ms_p95:.2f} ms")
    print(f"  handler executions/s {r.handler_execs / r.wall:.1f}; claim executions/s (all 7 stages) "
          f"{r.claims / r.wall:.1f}")
    s = r.server
    print(f"  server: {s['commits']:.0f} xact commits, {s['rollbacks']:.0f} rollbacks, "
          f"{s['wal_bytes'] / 1e6:.1f} MB WAL, "
          f"~{s['wal_fsyncs']:.0f} WAL fsyncs -> per handler exec {s['commits'] / r.handler_execs:.2f} commits, "
          f"{s['wal_bytes'] / r.handler_execs / 1024:.1f} kB WAL")


def print_proc(p: ProcResult, n_jobs: int, listen_notify: str) -> None:
    done = p.statuses.get("succeeded", 0)
    print(f"  deferred {n_jobs} jobs in {p.defer_s:.2f} s; statuses after: {json.dumps(p.statuses)}")
    print(f"  wall (run_worker_async, wait=False, listen_notify={listen_notify}) {p.wall:.2f} s")
    print(f"  jobs/s {done / p.wall:.1f}")
    s = p.server
    print(f"  server: {s['commits']:.0f} xact commits, {s['wal_bytes'] / 1e6:.1f} MB WAL, "
          f"~{s['wal_fsyncs']:.0f} WAL fsyncs"
          f" -> per job {s['commits'] / max(1, done):.2f} commits, {s['wal_bytes'] / max(1, done) / 1024:.1f} kB WAL")


def observe(mode: str) -> None:
    """Set how executions are observed: ``metrics`` (as shipped), ``off`` (no metrics recorded) or ``traces``."""
    from ki.adapters.observability import metrics, tracing

    if mode == "off":
        metrics.record_execution = lambda *args, **kwargs: None
    elif mode == "traces":
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        tracing.use_processor(BatchSpanProcessor(InMemorySpanExporter()))  # as configure_from_env does
    print(f"observability: {mode}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=2000, help="documents seeded for ki (default 2000)")
    ap.add_argument("--concurrency", type=int, default=4,
                    help="ki worker threads = procrastinate worker concurrency (default 4)")
    ap.add_argument("--pool-size", type=int, default=None,
                    help="connections for each side (default concurrency + 2, what ki.store.db.connect uses)")
    ap.add_argument("--stages", default=DEFAULT_BENCH_STAGES,
                    help=f"stages enabled (saved config; the rest disabled), or 'ki-default' "
                         f"(default {DEFAULT_BENCH_STAGES}: the model stages disabled)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="ki/procrastinate rounds, order alternating, fresh databases each (default 3; "
                         "the medians are compared)")
    ap.add_argument("--listen-notify", choices=("on", "off"), default="on",
                    help="procrastinate worker listen_notify (default on, procrastinate's default)")
    ap.add_argument("--skip-procrastinate", action="store_true", help="measure ki only (no ratio line)")
    ap.add_argument("--profile", action="store_true",
                    help="add a profiled ki pass: cProfile of worker threads + statements per execution")
    ap.add_argument("--profile-docs", type=int, default=500, help="documents in the profile pass (default 500)")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory (the server is still stopped)")
    ap.add_argument("--observe", choices=("metrics", "off", "traces"), default="metrics",
                    help="metrics (ki's default: Prometheus counters per execution), off (no counting: the "
                         "baseline of their cost), traces (metrics plus a span per execution into an in-memory "
                         "OpenTelemetry exporter)")
    args = ap.parse_args()
    observe(args.observe)

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("procrastinate").setLevel(logging.ERROR)
    install_noop_handlers()
    ENABLED_HANDLER_STAGES[:] = resolve_stages(args.stages)
    n_disabled = 7 - len(ENABLED_HANDLER_STAGES)
    conc = args.concurrency
    pool = args.pool_size or conc + 2
    n_jobs = args.docs * len(ENABLED_HANDLER_STAGES)
    failed = False

    with temp_workdir(args.keep) as workdir, embedded_server(workdir / "pg") as uri:
        cfg = server_settings(uri, ["server_version", "fsync", "synchronous_commit", "wal_sync_method",
                                    "shared_buffers"])
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; "
              f"embedded PostgreSQL {cfg['server_version']} "
              f"(fsync={cfg['fsync']}, synchronous_commit={cfg['synchronous_commit']}, "
              f"wal_sync_method={cfg['wal_sync_method']}, shared_buffers={cfg['shared_buffers']})")
        print(f"workload: {args.docs} docs x {len(ENABLED_HANDLER_STAGES)} enabled stages "
              f"({','.join(ENABLED_HANDLER_STAGES)}) = {n_jobs} handler executions (ki also claims the "
              f"{n_disabled} disabled stages of each doc); concurrency {conc}; {pool} pool connections each side; "
              f"{args.rounds} round(s)")
        sys.stdout.flush()

        ki_rates, ki_claim_rates, proc_rates = [], [], []
        for rnd in range(1, args.rounds + 1):
            def do_ki(rnd=rnd):
                dbname = f"ki_bench_{rnd}"
                ctx = setup_ki(uri, dbname, workdir, args.docs, conc)
                try:
                    r = run_ki(ctx, conc, uri, dbname)
                finally:
                    ctx.db.dispose()
                print(f"\n[round {rnd}] ki (PipelineRunner: claim_next + execute_claim, no-op handlers)")
                print_ki(r, args.docs)
                ki_rates.append(r.handler_execs / r.wall)
                ki_claim_rates.append(r.claims / r.wall)
                return not check_ki(r, args.docs)

            def do_proc(rnd=rnd):
                p = run_procrastinate(uri, f"procrastinate_bench_{rnd}", n_jobs, conc, pool,
                                      listen_notify=args.listen_notify == "on")
                print(f"\n[round {rnd}] procrastinate (PsycopgConnector pool {pool}, async no-op task, "
                      f"concurrency {conc})")
                print_proc(p, n_jobs, args.listen_notify)
                done = p.statuses.get("succeeded", 0)
                proc_rates.append(done / p.wall)
                return done == n_jobs

            steps = [do_ki] if args.skip_procrastinate else ([do_ki, do_proc] if rnd % 2 else [do_proc, do_ki])
            for step in steps:
                failed |= not step()
                sys.stdout.flush()

        if args.profile:
            profile_pass(uri, workdir / "pg", workdir, args.profile_docs, conc)


        med = statistics.median
        print(f"\n== summary (median of rounds; load average now {os.getloadavg()[0]:.2f}) ==")
        print(f"ki handler executions/s: {med(ki_rates):.1f}  (rounds: {', '.join(f'{x:.1f}' for x in ki_rates)})")
        print(f"ki claim executions/s (7 per doc, disabled stages included): {med(ki_claim_rates):.1f}")
        if proc_rates:
            print(f"procrastinate jobs/s: {med(proc_rates):.1f}  (rounds: {', '.join(f'{x:.1f}' for x in proc_rates)})")
            print(f"per claim instead of per handler execution: {med(ki_claim_rates) / med(proc_rates):.2f}x")
            paired = [k / p for k, p in zip(ki_rates, proc_rates, strict=True)]
            print(f"ratio of the medians: {med(ki_rates) / med(proc_rates):.2f}; per-round ratios (each pair "
                  f"run back to back): {', '.join(f'{x:.2f}' for x in paired)}")
            print(f"ratio ki/procrastinate: {med(paired):.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
