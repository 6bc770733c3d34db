"""The dev estate through ``hatchet`` vs ``local`` in one run: documents/s, orchestration overhead,
engine CPU and database load.

Spec: insertion-pipeline.md "Orchestration"; issue 7 "Benchmark" (target: hatchet throughput
≥ 0.3 × local with 2 worker processes on this 2-core machine, the engine and PostgreSQL sharing it).

What runs (all real, on this machine):

* two embedded PostgreSQL servers in a temp dir: one for ki (two databases, ``local`` and
  ``hatchet``), one for the Hatchet engine, so their load is measured apart;
* ``local``: ``ki insert``'s steps in this process (register, scan, ``launch_insertion`` with
  ``KI_WORKERS`` threads, default 4);
* ``hatchet``: hatchet-lite v0.105.0 (``tests/hatchet_engine.py``, with ki's recommended
  concurrency-polling tuning), ``--workers`` ``ki worker`` processes (``tests/helpers/hatchet_worker.py``)
  with ``--slots`` each, ``KI_HATCHET_DOCUMENT_CONCURRENCY`` = ``--document-concurrency``; then the same
  steps with provider ``hatchet`` and a wait for the run to complete.

Both runs use the same stage set (``--stages``, default fetch,convert,index: the model stages
need a gateway) and must end in the same buckets (checked).

Reported: wall time and documents/s of each (the run only; the scan is timed apart), the ratio;
per-document orchestration overhead = (DAG latency from its first task's start to its last
task's end) − (sum of its task durations), from Hatchet's own task timestamps for a sample of
documents, plus the trigger → first-task delay; CPU seconds of each component during the hatchet
run (workers, engine, engine's PostgreSQL, ki's PostgreSQL) and of this process + ki's
PostgreSQL during the local run; database load as commits and rows written (pg_stat_database).

Run: ``.venv/bin/python bench/hatchet.py [--estate DIR] [--workers 2] [--slots 16]
[--document-concurrency 16] [--stages fetch,convert,index] [--sample 40]``
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from _common import DEFAULT_BENCH_STAGES, embedded_server, libpq_kwargs, pin_stages, resolve_stages, temp_workdir  # noqa: E402

ESTATE = Path("/work/shared/corpus/estate-dev/estate")
HELPER = ROOT / "tests" / "helpers" / "hatchet_worker.py"
TARGET_RATIO = 0.3
ENGINE_TUNING = {"SCHEDULER_CONCURRENCY_POLLING_MIN_INTERVAL": "100ms",
                 "SCHEDULER_CONCURRENCY_POLLING_MAX_INTERVAL": "500ms"}


# --------------------------------------------------------------------------- measurement


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process, its reaped children and its live descendants (0 if gone)."""
    import psutil

    try:
        p = psutil.Process(pid)
        t = p.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        for child in p.children(recursive=True):
            try:
                c = child.cpu_times()
                total += c.user + c.system
            except psutil.Error:
                pass
        return total
    except psutil.Error:
        return 0.0


def postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().splitlines()[0])


def db_stats(uri: str, dbname: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(**libpq_kwargs(uri, dbname), autocommit=True) as conn:
        row = conn.execute("SELECT xact_commit, tup_inserted + tup_updated + tup_deleted FROM pg_stat_database "
                           "WHERE datname = current_database()").fetchone()
    return {"commits": int(row[0]), "rows_written": int(row[1])}


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after}


# --------------------------------------------------------------------------- ki side


def open_ctx(uri: str, dbname: str, data_dir: Path, provider: str, stages: list[str]):
    from ki.config.loader import ProcessSettings, set_config_value
    from ki.orchestration.context import PipelineContext
    from ki.store.db import ensure_database, open_database, sqlalchemy_url

    ensure_database(uri, dbname)
    url = sqlalchemy_url(uri, dbname)
    pin_stages(data_dir, stages)
    set_config_value(data_dir, "components.orchestrator_provider", provider)
    settings = ProcessSettings(data_dir=data_dir, database_url=url)
    return PipelineContext.open(settings, db=open_database(url, pool_size=settings.workers + 4)), url


def scan(ctx, estate: Path) -> float:
    from ki.sources.scan import register_local_source, scan_source

    t0 = time.perf_counter()
    scan_source(ctx, register_local_source(ctx, estate))
    return time.perf_counter() - t0


def buckets(ctx) -> dict:
    from ki.store.claims import bucket_counts

    with ctx.db.engine.connect() as conn:
        return bucket_counts(conn)


def dag_timings(ctx, run_id: int, sample: int) -> dict[str, float]:
    """Median per-document DAG latency, task time and scheduling overhead (s) from Hatchet."""
    from sqlalchemy import text

    from ki.orchestration.providers.hatchet import hatchet_client

    with ctx.db.engine.connect() as conn:
        ids = [r[0] for r in conn.execute(text(
            "SELECT workflow_run_id FROM pipeline_run_object WHERE run_id = :r AND workflow_run_id IS NOT NULL "
            "ORDER BY source_object_id"), {"r": run_id})]
    step = max(1, len(ids) // max(1, sample))
    client = hatchet_client()
    latency, busy, overhead, first = [], [], [], []
    for wid in ids[::step][:sample]:
        d = client.runs.get(wid)
        tasks = [t for t in d.tasks if t.started_at and t.finished_at]
        if not tasks:
            continue
        start = min(t.started_at for t in tasks)
        end = max(t.finished_at for t in tasks)
        work = sum((t.finished_at - t.started_at).total_seconds() for t in tasks)
        latency.append((end - start).total_seconds())
        busy.append(work)
        overhead.append((end - start).total_seconds() - work)
        first.append((start - d.run.created_at).total_seconds())
    med = statistics.median
    return {"documents_sampled": len(latency), "dag_latency_s": med(latency), "task_time_s": med(busy),
            "scheduling_overhead_s": med(overhead), "trigger_to_first_task_s": med(first),
            "tasks_per_document": len(tasks) if latency else 0}


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--estate", type=Path, default=ESTATE)
    ap.add_argument("--workers", type=int, default=2, help="ki worker processes")
    ap.add_argument("--slots", type=int, default=16, help="task slots per worker")
    ap.add_argument("--document-concurrency", type=int, default=16, help="KI_HATCHET_DOCUMENT_CONCURRENCY")
    ap.add_argument("--local-workers", type=int, default=None, help="local provider threads (KI_WORKERS)")
    ap.add_argument("--stages", default=DEFAULT_BENCH_STAGES)
    ap.add_argument("--sample", type=int, default=40, help="documents whose DAG timings are read from Hatchet")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    stages = resolve_stages(args.stages)
    n_files = sum(1 for p in args.estate.rglob("*") if p.is_file())
    print(f"estate {args.estate}: {n_files} files; stages {','.join(stages)}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

    from tests.hatchet_engine import hatchet_database_url, start_hatchet_engine

    with temp_workdir(keep=args.keep, prefix="ki-bench-hatchet-") as work:
        ki_pg, eng_pg = work / "ki-pg", work / "hatchet-pg"
        with embedded_server(ki_pg) as ki_uri, embedded_server(eng_pg) as eng_uri:
            # ---------------- local
            if args.local_workers:
                os.environ["KI_WORKERS"] = str(args.local_workers)
            local, _ = open_ctx(ki_uri, "ki_local", work / "local-data", "local", stages)
            scan_local = scan(local, args.estate)
            from ki.orchestration.insertion import launch_insertion

            cpu0 = (time.process_time(), tree_cpu(postmaster_pid(ki_pg)))
            st0 = db_stats(ki_uri, "ki_local")
            t0 = time.perf_counter()
            ls = launch_insertion(local, trigger="bench", wait_for_retries_seconds=0)
            local_wall = time.perf_counter() - t0
            local_cpu = {"ki process": time.process_time() - cpu0[0],
                         "ki PostgreSQL": tree_cpu(postmaster_pid(ki_pg)) - cpu0[1]}
            local_db = delta(db_stats(ki_uri, "ki_local"), st0)
            local_buckets = buckets(local)
            docs = local_buckets[stages[0]]["done"] + local_buckets[stages[0]]["quarantined"] + \
                local_buckets[stages[0]]["skipped"]
            print(f"local: run {ls.status} in {local_wall:.1f} s ({docs / local_wall:.2f} documents/s; scan "
                  f"{scan_local:.1f} s), load average {os.getloadavg()[0]:.1f}")

            # ---------------- hatchet
            engine = start_hatchet_engine(work / "engine", hatchet_database_url(eng_uri, "hatchet"),
                                          extra_env=ENGINE_TUNING)
            workers: list[subprocess.Popen] = []
            try:
                os.environ.update(engine.env())
                os.environ["HATCHET_CLIENT_NAMESPACE"] = "bench_" + uuid.uuid4().hex[:6]
                hctx, hurl = open_ctx(ki_uri, "ki_hatchet", work / "hatchet-data", "hatchet", stages)
                env = dict(os.environ, KI_DATABASE_URL=hurl, KI_DATA_DIR=str(work / "hatchet-data"),
                           KI_HATCHET_DOCUMENT_CONCURRENCY=str(args.document_concurrency),
                           KI_RUN_SWEEP_SECONDS="0", PYTHONPATH=str(ROOT))
                for i in range(args.workers):
                    log = open(work / f"worker-{i}.log", "wb")  # noqa: SIM115 - owned by the child
                    workers.append(subprocess.Popen([sys.executable, str(HELPER), "--slots", str(args.slots),
                                                     "--name", f"bench{i}"], env=env, stdout=log,
                                                    stderr=subprocess.STDOUT, start_new_session=True))
                scan(hctx, args.estate)
                _wait_workers(args.workers)
                from ki.orchestration.providers.hatchet import wait_for_run

                cpu_before = {"workers": sum(tree_cpu(w.pid) for w in workers), "engine": tree_cpu(engine.pid),
                              "engine PostgreSQL": tree_cpu(postmaster_pid(eng_pg)),
                              "ki PostgreSQL": tree_cpu(postmaster_pid(ki_pg)), "this process": time.process_time()}
                st_ki, st_eng = db_stats(ki_uri, "ki_hatchet"), db_stats(eng_uri, "hatchet")
                t0 = time.perf_counter()
                hs = launch_insertion(hctx, trigger="bench")
                trigger_s = time.perf_counter() - t0
                status, counters, error = wait_for_run(hctx, hs.run_id, poll_seconds=0.5, timeout_seconds=3600)
                hatchet_wall = time.perf_counter() - t0
                cpu_after = {"workers": sum(tree_cpu(w.pid) for w in workers), "engine": tree_cpu(engine.pid),
                             "engine PostgreSQL": tree_cpu(postmaster_pid(eng_pg)),
                             "ki PostgreSQL": tree_cpu(postmaster_pid(ki_pg)), "this process": time.process_time()}
                hatchet_cpu = {k: cpu_after[k] - cpu_before[k] for k in cpu_after}
                ki_db = delta(db_stats(ki_uri, "ki_hatchet"), st_ki)
                eng_db = delta(db_stats(eng_uri, "hatchet"), st_eng)
                rss = engine.rss_bytes()
                timings = dag_timings(hctx, hs.run_id, args.sample)
                same = buckets(hctx) == local_buckets
            finally:
                for w in workers:
                    try:
                        os.killpg(w.pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
                for w in workers:
                    try:
                        w.wait(timeout=20)
                    except subprocess.TimeoutExpired:
                        os.killpg(w.pid, signal.SIGKILL)
                engine.stop()

    ratio = local_wall / hatchet_wall if hatchet_wall else 0.0
    report = {
        "documents": docs,
        "local": {"status": ls.status, "wall_s": round(local_wall, 1), "documents_per_s": round(docs / local_wall, 2),
                  "cpu_s": {k: round(v, 1) for k, v in local_cpu.items()}, "ki_db": local_db},
        "hatchet": {"status": status, "error": error, "wall_s": round(hatchet_wall, 1),
                    "documents_per_s": round(docs / hatchet_wall, 2), "trigger_s": round(trigger_s, 2),
                    "workers": args.workers, "slots": args.slots, "document_concurrency": args.document_concurrency,
                    "cpu_s": {k: round(v, 1) for k, v in hatchet_cpu.items()},
                    "engine_cpu_percent_of_one_core": round(100 * hatchet_cpu["engine"] / hatchet_wall, 1),
                    "engine_rss_mib": round(rss / 2**20, 1), "ki_db": ki_db, "engine_db": eng_db,
                    "per_document": {k: round(v, 2) if isinstance(v, float) else v for k, v in timings.items()},
                    "counters": {"processed": counters.processed, "done": counters.done,
                                 "skipped": counters.skipped, "retried": counters.retried,
                                 "quarantined": counters.quarantined},
                    "same_buckets_as_local": same},
        "throughput_ratio_hatchet_over_local": round(ratio, 2),
        "target": f">= {TARGET_RATIO}",
        "meets_target": ratio >= TARGET_RATIO,
        "load_average_end": round(os.getloadavg()[0], 1),
    }
    print(json.dumps(report, indent=2, default=str))
    total = sum(hatchet_cpu.values())
    print(f"\nhatchet/local throughput: {ratio:.2f} ({'meets' if ratio >= TARGET_RATIO else 'MISSES'} target "
          f"{TARGET_RATIO}); where the CPU went during the hatchet run ({total:.0f} s on {os.cpu_count()} cores, "
          f"{hatchet_wall:.0f} s wall): " + ", ".join(f"{k} {v:.0f} s" for k, v in hatchet_cpu.items()))
    print(f"per document: DAG latency {timings['dag_latency_s']:.2f} s of which tasks {timings['task_time_s']:.2f} s "
          f"and scheduling between stages {timings['scheduling_overhead_s']:.2f} s; trigger to first task "
          f"{timings['trigger_to_first_task_s']:.2f} s (median of {timings['documents_sampled']})")


def _wait_workers(n: int, timeout: float = 120) -> None:
    from ki.orchestration.providers.hatchet import hatchet_client

    client = hatchet_client()
    prefix = client.config.namespace or ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = client.workers.list().rows or []
        if sum(1 for w in rows if w.name.startswith(prefix) and str(w.status).endswith("ACTIVE")) >= n:
            return
        time.sleep(0.5)
    raise SystemExit(f"{n} worker(s) not active after {timeout} s")


if __name__ == "__main__":
    main()
