"""Insertion at scale: a make_estate.py estate of ``--files`` files through ``ki insert``, as a firm runs it.

What runs
---------
``make_estate.py --seed 41 --matters M`` (M = files / 19.2: the generator writes ~19 files per matter) writes
the estate (or ``--estate DIR`` reuses one). ``ki insert ESTATE`` then runs as its own process on a fresh data
directory and its embedded PostgreSQL, every stage on the default rules policies and the default embedder,
``KI_WORKERS`` as set (default ki's). While it runs, a sampler polls every ``--sample-seconds``: peak RSS of the
ki process and PSS of the PostgreSQL processes (postmaster and its children, summed; PSS shares the shared
buffers fairly instead of counting them once per backend). Afterwards, from the attempt history:

* documents/s overall (index rows done / run wall) and, per stage, the curve: for each successive chunk of
  ``--chunk`` documents (in the order the stage finished them) the stage's documents/s over that chunk and its
  mean execution seconds per document (the flat-cost check: the mean must not grow with the chunk number);
* relate attempts per document (depth-first claims re-open a relate when a later file of its matter
  classifies: the price of being searchable early);
* time to the first searchable document (index done) and to 1,000, from the start of the insertion run (the
  scan's end) and from the start of ``ki insert``;
* a rescan of the unchanged estate (``ki insert`` again: wall and CPU), ``ki status`` wall;
* search: ``--queries`` queries as ``ki search`` processes (cold: wall and CPU each, p50/p95) and through
  ``ki serve``'s ``/v1/search`` after one warm-up pass (warm: wall p50/p95); then the ``ki search`` processes
  again while ``ki serve`` runs (they ask it over its Unix socket: cold CLI, warm server).

Targets (issue "50,000 files in an afternoon"): first document searchable <= 60 s after the scan; all stages
>= 25 documents/s overall; peak RSS <= 1 GB; unchanged rescan of 50,000 files <= 60 s; CLI search <= 0.5 s CPU
cold. Every figure is printed with the load average: the machine is shared.

Run: ``.venv/bin/python bench/scale.py --files 1000 [--estate DIR] [--workers N] [--keep]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import percentile, shared_dir, temp_workdir  # noqa: E402

VENV_BIN = Path(sys.executable).parent
KI = [str(VENV_BIN / "ki")] if (VENV_BIN / "ki").exists() else [sys.executable, "-m", "ki.cli"]
FILES_PER_MATTER = 19.2
QUERIES = ("Mietvertrag Kündigung", "share purchase agreement", "Vollmacht", "Rechnung Honorar", "Geschäftsführer",
           "Anlage K1", "Übergabeprotokoll", "termination notice", "Gesellschafterversammlung", "Schriftsatz Frist",
           "indemnity", "Arbeitsvertrag", "Datenschutz", "purchase price", "Zahlungserinnerung")


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def make_estate(out: Path, files: int, seed: int) -> Path:
    matters = max(1, round(files / FILES_PER_MATTER))
    started = time.perf_counter()
    subprocess.run([sys.executable, str(shared_dir() / "tools" / "make_estate.py"), "--seed", str(seed),
                    "--matters", str(matters), "--out", str(out), "--quiet"], check=True)
    root = out / "estate"
    n = sum(1 for p in root.rglob("*") if p.is_file())
    print(f"estate: {n} files (make_estate --seed {seed} --matters {matters}, {time.perf_counter() - started:.0f} s)")
    return root


class Sampler(threading.Thread):
    """Peak RSS of the ki process (and its children) and peak summed PSS of the PostgreSQL processes."""

    def __init__(self, pid: int, pgdata: Path, every: float):
        super().__init__(daemon=True)
        self.pid, self.pgdata, self.every = pid, pgdata, every
        self.ki_rss = 0.0
        self.pg_pss = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        import psutil

        while not self.stop.wait(self.every):
            try:
                proc = psutil.Process(self.pid)
                rss = sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
                self.ki_rss = max(self.ki_rss, rss / 2**20)
            except psutil.Error:
                pass
            try:
                pg = psutil.Process(int((self.pgdata / "postmaster.pid").read_text().split()[0]))
                pss = sum(p.memory_full_info().pss for p in [pg, *pg.children()])
                self.pg_pss = max(self.pg_pss, pss / 2**20)
            except (OSError, ValueError, psutil.Error):
                pass


def engine_of(data_dir: Path):  # noqa: ANN201 - a SQLAlchemy engine
    from sqlalchemy import create_engine

    from ki.store.db import DATABASE_NAME, embedded_server_uri, sqlalchemy_url

    return create_engine(sqlalchemy_url(embedded_server_uri(data_dir / "pg"), DATABASE_NAME))


def timed(env: dict[str, str], *args: str, timeout: float = 36000) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall s, CPU s of the child, result) of ``ki ARGS``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([*KI, *args], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"ki {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc


def insert(env: dict[str, str], estate: Path, data_dir: Path, every: float) -> dict:
    started = time.time()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen([*KI, "insert", str(estate)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    sampler = Sampler(proc.pid, data_dir / "pg", every)
    sampler.start()
    out, err = proc.communicate()
    sampler.stop.set()
    wall = time.time() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"ki insert exited {proc.returncode}: {err[-3000:]}")
    return {"started": started, "wall": wall, "cpu": (after.ru_utime - before.ru_utime)
            + (after.ru_stime - before.ru_stime), "ki_rss_mb": sampler.ki_rss, "pg_pss_mb": sampler.pg_pss,
            "summary": out.strip().splitlines()[:3]}


def history(data_dir: Path) -> tuple[dict[str, list[tuple[float, float]]], float, int]:
    """stage → [(finished epoch, seconds)] of its done attempts in finishing order; the insertion run's start
    (epoch); the documents listed."""
    from sqlalchemy import text

    engine = engine_of(data_dir)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("""
                SELECT stage, extract(epoch FROM finished_at) AS f, extract(epoch FROM finished_at - started_at) AS s
                FROM work_item_attempt WHERE outcome = 'done' ORDER BY finished_at""")).fetchall()
            run_start = conn.execute(text("SELECT extract(epoch FROM min(started_at)) FROM pipeline_runs "
                                          "WHERE kind <> 'sync'")).scalar()
            docs = conn.execute(text("SELECT count(*) FROM source_object WHERE deleted_at IS NULL")).scalar_one()
    finally:
        engine.dispose()
    by_stage: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        by_stage.setdefault(r.stage, []).append((float(r.f), float(r.s)))
    return by_stage, float(run_start or 0.0), int(docs)


def report_insert(run: dict, by_stage: dict, run_start: float, docs: int, chunk: int) -> None:
    from ki.core.taxonomies import PIPELINE_STAGE_ORDER

    index = by_stage.get("index", [])
    print(f"\nki insert: {docs} documents, wall {run['wall']:.0f} s, CPU {run['cpu']:.0f} s ({load()})")
    for line in run["summary"]:
        print(f"  | {line}")
    if index:
        print(f"  documents/s overall (searchable / wall): {len(index) / run['wall']:.2f}")
        for n in (1, 1000):
            if len(index) >= n:
                t = index[n - 1][0]
                print(f"  time to {n:>5} searchable: {t - run_start:7.1f} s after the scan, "
                      f"{t - run['started']:7.1f} s after ki insert started")
    print(f"  peak RSS: ki {run['ki_rss_mb']:.0f} MB; PostgreSQL (PSS, all processes) {run['pg_pss_mb']:.0f} MB")
    relates = len(by_stage.get("relate", []))
    if relates:
        print(f"  relate: {relates} done attempts for {docs} documents ({relates / max(1, docs):.2f} per document)")
    print(f"\n  per stage, by chunks of {chunk} documents in finishing order: documents/s | mean s per document")
    for stage in PIPELINE_STAGE_ORDER:
        done = by_stage.get(stage, [])
        if not done:
            continue
        cells = []
        for i in range(0, len(done), chunk):
            part = done[i:i + chunk]
            span = part[-1][0] - (done[i - 1][0] if i else run_start)
            cells.append(f"{len(part) / max(span, 1e-3):6.1f} | {statistics.fmean(s for _, s in part):.3f}")
        overall = len(done) / max(done[-1][0] - run_start, 1e-3)
        print(f"  {stage:18s} overall {overall:6.1f}/s  " + "  ".join(cells))


def search_cli(env: dict[str, str], queries: tuple[str, ...], how: str = "no ki serve: searching itself") -> None:
    walls, cpus = [], []
    for q in queries:
        wall, cpu, _ = timed(env, "search", q, "--limit", "10")
        walls.append(wall)
        cpus.append(cpu)
    print(f"\nki search (CLI, cold process each, {how}, {len(queries)} queries; {load()}): "
          f"wall p50 {percentile(walls, 50):.2f} p95 {percentile(walls, 95):.2f} s; "
          f"CPU p50 {percentile(cpus, 50):.2f} p95 {percentile(cpus, 95):.2f} s")


def search_api(env: dict[str, str], data_dir: Path, queries: tuple[str, ...]) -> None:
    import httpx

    _, _, made = timed(env, "token", "create", "--name", "bench-scale", "--scope", "search", "--principal",
                       "bench@kanzlei.example", "--json")
    token = json.loads(made.stdout)["token"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.perf_counter()
    proc = subprocess.Popen([*KI, "serve", "--port", str(port), "--log-level", "warning"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base, headers = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                httpx.get(base + "/healthz", timeout=2)
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("ki serve did not start") from None
                time.sleep(0.2)
        up = time.perf_counter() - started
        first_started = time.perf_counter()
        first = httpx.get(base + "/v1/search", params={"q": queries[0]}, headers=headers, timeout=120)
        first_wall = time.perf_counter() - first_started
        walls, hits = [], 0
        for rnd in range(2):
            for q in queries:
                t = time.perf_counter()
                r = httpx.get(base + "/v1/search", params={"q": q, "limit": 10}, headers=headers, timeout=120)
                if rnd:
                    walls.append(time.perf_counter() - t)
                    hits += len(r.json().get("hits", [])) if r.status_code == 200 else 0
        print(f"/v1/search (ki serve up in {up:.1f} s; first request {first_wall:.2f} s, HTTP {first.status_code}; "
              f"warm, {len(walls)} queries, {hits} hits; {load()}): p50 {percentile(walls, 50) * 1000:.0f} ms "
              f"p95 {percentile(walls, 95) * 1000:.0f} ms")
        search_cli(env, queries, "asking the running ki serve over its socket")
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1000, help="estate size in files (default 1000)")
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--estate", type=Path, default=None, help="an existing estate folder (no make_estate)")
    ap.add_argument("--workers", type=int, default=None, help="KI_WORKERS for ki insert (default ki's)")
    ap.add_argument("--chunk", type=int, default=None, help="documents per curve point (default min(1000, files/5))")
    ap.add_argument("--sample-seconds", type=float, default=2.0)
    ap.add_argument("--queries", type=int, default=len(QUERIES), help=f"search queries (max {len(QUERIES)})")
    ap.add_argument("--keep", action="store_true", help="keep the data directory and estate")
    ap.add_argument("--reuse", type=Path, default=None,
                    help="the folder a --keep run kept: report its insertion again, then rescan and search")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, {load()}")
    from ki.store.db import stop_embedded_server

    with (nullcontext(args.reuse) if args.reuse else temp_workdir(args.keep, prefix="ki-scale-")) as work:
        data_dir = work / "data"
        env = {k: v for k, v in os.environ.items() if not k.startswith("KI_")} | {"KI_DATA_DIR": str(data_dir)}
        if args.workers:
            env["KI_WORKERS"] = str(args.workers)
        try:
            if args.reuse:
                run = json.loads((work / "run.json").read_text())
                estate = Path(run["estate"])
            else:
                estate = args.estate or make_estate(work / "gen", args.files, args.seed)
                run = insert(env, estate, data_dir, args.sample_seconds) | {"estate": str(estate)}
                (work / "run.json").write_text(json.dumps(run))
            by_stage, run_start, docs = history(data_dir)
            report_insert(run, by_stage, run_start, docs, args.chunk or max(50, min(1000, docs // 5)))
            wall, cpu, _ = timed(env, "insert", str(estate))
            print(f"\nrescan of the unchanged estate (ki insert again): wall {wall:.1f} s, CPU {cpu:.1f} s ({load()})")
            wall, cpu, _ = timed(env, "status")
            print(f"ki status: wall {wall:.2f} s, CPU {cpu:.2f} s ({load()})")
            queries = QUERIES[:max(1, args.queries)]
            search_cli(env, queries)
            search_api(env, data_dir, queries)
        finally:
            stop_embedded_server(data_dir / "pg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
