"""Chaos: ``kill -9`` / restart cycles of ``ki insert``, and a gateway outage during a long run (issue 14).

(a) **Kills.** One estate is inserted twice into fresh databases on an embedded PostgreSQL: a clean run,
then a run whose ``ki insert`` process group is killed with SIGKILL ``--kills`` times at random points
(a random share of the stage rows finished) and restarted each time. Printed: the final ``ki export
--json`` and the derived rows compared with the clean run's, ids aside (``bench/order.py``'s
comparison, the one ``tests/acceptance/test_order_export_identical.py`` uses), quarantined rows of
both runs, the recovery time after each kill (from the restart to the first stage row finished that
was not finished at the kill), each restart's own startup timeline from ``ki.log`` (``ki.core.startup``:
wall and CPU seconds to its first finished row, per phase — interpreter and imports, context (settings,
database, migrations check), source, scan, run row, prepare steps with the dead claimer's rows recovered,
first claim, first row; CPU time is what the restart costs on a quiet machine, wall time grows with the
load) and the peak RSS (VmHWM) of the ``ki insert`` processes.

(b) **Gateway outage** (issue 14 item 9). ``--documents`` (1,000) small files are inserted with the
model stages on a loopback gateway (``tests/helpers/gateway_stub.py``, answering each stage's minimal
valid submission); once ``--outage-after`` requests were answered it goes down for ``--outage-seconds``
(300; shorten it by the flag): ``--outage-kind closed`` (default) closes its listening socket
(connections refused, a dead gateway process) and listens on the same port again afterwards; ``503``
keeps it listening and answering 503 (an overloaded gateway, a proxy before a dead one; ``--retry-after N``:
with ``Retry-After: N``, which the breaker honours). Printed: the
HTTP requests the dead gateway received (its own log), the failed attempts of the model-stage rows
(PostgreSQL), the breaker's own summary from ``ki.log`` (requests that met the outage, calls failed
fast without a request, TCP connects and how many were refused, failed HTTP probes), quarantined
rows, the resume delay (end of the outage to the first request answered after it, the gateway's
clock) and the connections accepted until then, the run's seconds, with the ``KI_BREAKER_*`` settings.

Usage::

    KI_SHARED_DIR=../shared .venv/bin/python bench/chaos.py [--estate DIR] [--kills 3] [--seed 1]
        [--documents 1000] [--outage-seconds 300] [--outage-after 400] [--outage-kind closed|503]
        [--workers 8] [--skip-kills] [--skip-outage]

``--estate`` holds ``estate/`` and ``truth.json`` (default: ``make_estate.py --seed 7 --matters 4``
generated from ``$KI_SHARED_DIR/tools``, 74 files). Every figure is printed with the load average.
Exits 1 when the kill run's export differs or anything was quarantined.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import re
import signal
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

REPO = Path(__file__).resolve().parents[1]


def _order():
    """``bench/order.py`` (its estate, environment, export and comparison)."""
    spec = importlib.util.spec_from_file_location("bench_order", REPO / "bench" / "order.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def load() -> str:
    """``load 3.1`` (the 1-minute load average)."""
    return f"load {os.getloadavg()[0]:.1f}"


def vm_hwm_mb(pid: int) -> float:
    """The peak resident set (VmHWM, MB) of a live process; 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def quarantined(url: str) -> int:
    """Quarantined stage rows of the database at ``url``."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM processing_state WHERE status = 'quarantined'"))
                       .scalar_one())
    finally:
        engine.dispose()


class Databases:
    """Fresh databases on one server (dropped at the end)."""

    def __init__(self, uri: str) -> None:
        from ki.store.db import sqlalchemy_url

        self.uri, self._url = uri, sqlalchemy_url
        self.admin = create_engine(sqlalchemy_url(uri, "postgres"), poolclass=NullPool, isolation_level="AUTOCOMMIT")
        self.names: list[str] = []

    def new(self) -> str:
        name = f"ki_chaos_{uuid.uuid4().hex[:10]}"
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        self.names.append(name)
        return self._url(self.uri, name)

    def close(self) -> None:
        with self.admin.connect() as conn:
            for name in self.names:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        self.admin.dispose()


# --- (a) kill -9 / restart cycles -------------------------------------------------------------------


def _watch(proc, engine, order, *, until_rows: int | None, deadline: float, since_rows: int | None = None,
           started: float | None = None) -> tuple[float, float | None]:
    """Poll a running ``ki insert`` until it ends, or ``until_rows`` rows are finished. Returns its peak RSS
    (MB) and, when ``since_rows`` is given, the seconds from ``started`` to the first row finished beyond it."""
    peak, recovered = 0.0, None
    while proc.poll() is None and time.monotonic() < deadline:
        peak = max(peak, vm_hwm_mb(proc.pid))
        rows = order._finished_rows(engine)
        if since_rows is not None and recovered is None and rows > since_rows:
            recovered = time.monotonic() - started
        if until_rows is not None and rows >= until_rows:
            break
        time.sleep(0.05)
    return peak, recovered


#: ``ki.core.startup.Timeline.line`` in ``ki.log``: the totals, then ``phase [detail] +wall s (cpu +cpu)`` parts
TIMELINE_LINE = re.compile(r"startup timeline: (?P<wall>[\d.]+) s wall, (?P<cpu>[\d.]+) s CPU to the [^;]+; "
                           r"(?P<parts>.*)")


def timelines(data: Path) -> list[dict[str, Any]]:
    """Every ``ki insert`` process's startup timeline in ``<data>/ki.log``, in order: ``wall``, ``cpu``
    (seconds to its first finished row) and ``parts`` (the phases as logged)."""
    log = data / "ki.log"
    text_ = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    return [{"wall": float(m["wall"]), "cpu": float(m["cpu"]), "parts": m["parts"]}
            for m in TIMELINE_LINE.finditer(text_)]


def kill_cycles(order, estate: Path, url: str, workdir: Path, *, kills: int, rng: random.Random,
                seed: int, timeout_seconds: float = 3600) -> dict[str, Any]:
    """Insert ``estate`` with ``kills`` SIGKILLs of ``ki insert``; returns kill points, recovery seconds,
    peak RSS, seconds, the export rows and derived facts."""
    data = workdir / uuid.uuid4().hex[:8]
    data.mkdir(parents=True)
    env = order.estate_env(estate, data_dir=data, database_url=url, seed=seed)
    files = sum(1 for p in (estate / "estate").rglob("*") if p.is_file())
    points = sorted(int(files * order.STAGES * rng.uniform(*order.KILL_RANGE)) for _ in range(kills))
    engine = create_engine(url, poolclass=NullPool)
    out: dict[str, Any] = {"kills": [], "recovery": [], "peak_rss_mb": 0.0, "loads": []}
    started = time.monotonic()
    deadline = started + timeout_seconds
    since: int | None = None
    try:
        for point in [*points, None]:
            restarted = time.monotonic()
            proc = order._ki(["insert", str(estate / "estate")], env)
            floor = (out["kills"][-1] if out["kills"] else 0) + 10
            target = None if point is None else max(point, floor)
            peak, recovered = _watch(proc, engine, order, until_rows=target, deadline=deadline, since_rows=since,
                                     started=restarted)
            if since is not None:
                out["recovery"].append(recovered)
                out["loads"].append(os.getloadavg()[0])
            out["peak_rss_mb"] = max(out["peak_rss_mb"], peak)
            if point is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                since = order._finished_rows(engine)
                out["kills"].append(since)
                proc.communicate()
                continue
            text_out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            if proc.returncode != 0:
                raise RuntimeError(f"ki insert failed ({proc.returncode}):\n{text_out}")
            if point is not None:  # it finished before the kill point: no kill this time
                break
    finally:
        engine.dispose()
    out["seconds"] = time.monotonic() - started
    out["timelines"] = timelines(data)[1:]  # the first process is the start, not a restart
    out["exports"] = order.export(env)
    out["facts"] = order.derived_facts(url, out["exports"])
    out["quarantined"] = quarantined(url)
    return out


def part_kills(order, args, work: Path, dbs: Databases) -> bool:
    estate = args.estate or order.small_estate(Path(tempfile.mkdtemp(dir=work)) / "estate")
    files = sum(1 for p in (estate / "estate").rglob("*") if p.is_file())
    rng = random.Random(args.seed)
    print(f"(a) estate {estate} ({files} files); {load()}")
    clean = kill_cycles(order, estate, dbs.new(), work, kills=0, rng=rng, seed=101)
    print(f"    clean run: {clean['seconds']:.1f} s, peak RSS {clean['peak_rss_mb']:.0f} MB, "
          f"{clean['quarantined']} quarantined; {load()}")
    killed = kill_cycles(order, estate, dbs.new(), work, kills=args.kills, rng=rng, seed=101)
    diff = order.differences(order.normalise(clean["exports"]), order.normalise(killed["exports"]),
                             prefix="export") + order.differences(clean["facts"], killed["facts"], prefix="facts")
    recovery = ", ".join("-" if r is None else f"{r:.1f} s" for r in killed["recovery"])
    print(f"    {len(killed['kills'])} kills at {killed['kills']} finished rows; recovery after each: {recovery}")
    for i, (t, lavg) in enumerate(zip(killed["timelines"], killed["loads"], strict=False), 1):
        print(f"    restart {i} (load {lavg:.1f}): first row after {t['wall']:.2f} s wall, {t['cpu']:.2f} s CPU of "
              f"ki insert: {t['parts']}")
    print(f"    killed run: {killed['seconds']:.1f} s, peak RSS {killed['peak_rss_mb']:.0f} MB, "
          f"{killed['quarantined']} quarantined; export {'identical' if not diff else f'{len(diff)} differences'}"
          f" ({len(killed['exports'])} rows); {load()}")
    for line in diff[:20]:
        print(f"      {line}")
    return not diff and clean["quarantined"] == 0 and killed["quarantined"] == 0


# --- (b) a gateway outage during a long run -----------------------------------------------------------


def outage_estate(root: Path, n: int) -> Path:
    """``n`` small distinct text files in 20 folders."""
    for i in range(n):
        folder = root / f"Mandat {i % 20:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"Vermerk {i:04d}.txt").write_text(
            f"Aktenvermerk {i}: Telefonat mit dem Mandanten über die Forderung Nr. {10_000 + i}.\n", encoding="utf-8")
    return root


#: the breaker's summary of an outage in ``ki.log`` (``ki.adapters.breaker.Breakers.succeeded``)
EPISODE_LINE = re.compile(r"gateway answers again: resuming its stages \(paused since [^,]+, (?P<seconds>\d+) s; "
                          r"(?P<requests>\d+) requests met the outage, (?P<failed_fast>\d+) calls failed fast, "
                          r"(?P<connects>\d+) TCP connects \((?P<refused>\d+) refused\), "
                          r"(?P<probes>\d+) failed HTTP probes\)")


def failed_attempts(url: str, stages: tuple[str, ...]) -> int:
    """Attempts beyond each row's successful one, over ``stages`` (every failed attempt of the run)."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT coalesce(sum(attempts), 0) - count(*) FROM processing_state "
                                         "WHERE stage = ANY(:s)"), {"s": list(stages)}).scalar_one())
    finally:
        engine.dispose()


def episodes(data: Path) -> list[dict[str, int]]:
    """The gateway outages ``ki insert`` summed up in ``<data>/ki.log`` (see :data:`EPISODE_LINE`)."""
    log = data / "ki.log"
    found = EPISODE_LINE.finditer(log.read_text(encoding="utf-8", errors="replace")) if log.exists() else ()
    return [{k: int(v) for k, v in m.groupdict().items()} for m in found]


def _close_socket_after(stub, outage, *, answers: int, seconds: float, stop: threading.Event) -> None:
    """Close ``stub``'s socket once it has had ``answers`` requests, for ``seconds`` (the outage thread)."""
    while stub.count < answers:
        if stop.wait(0.05):
            return
    outage.down()
    stop.wait(seconds)
    outage.up()


def part_outage(order, args, work: Path, dbs: Databases) -> bool:
    sys.path.insert(0, str(REPO))
    from ki.adapters.breaker import MODEL_STAGES
    from tests.helpers.gateway_stub import GatewayStub
    from tests.helpers.outage import Outage, SocketOutage, gateway_default, stage_answer

    estate = outage_estate(work / "outage-estate", args.documents)
    url = dbs.new()
    data = work / "outage-data"
    data.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KI_") or k.startswith("KI_BREAKER_")}
    closed = args.outage_kind == "closed"
    answers = Outage(seconds=args.outage_seconds)
    stop = threading.Event()
    default = stage_answer if closed else gateway_default(answers, start_after=args.outage_after,
                                                          retry_after=args.retry_after)
    with GatewayStub(default=default) as stub:
        socket_outage = SocketOutage(stub)
        env.update({"KI_DATA_DIR": str(data), "KI_DATABASE_URL": url, "KI_LLM_BASE_URL": stub.url,
                    "KI_LLM_MODEL": "stub-model", "KI_WORKERS": str(args.workers)})
        settings = {k: env.get(k, "default") for k in ("KI_BREAKER_FAILURES", "KI_BREAKER_PROBE_SECONDS",
                                                        "KI_BREAKER_PROBE_MAX_SECONDS",
                                                        "KI_BREAKER_CONNECT_PROBE_SECONDS")}
        what = "its socket closed" if closed else "503" + (
            f" with Retry-After: {args.retry_after}" if args.retry_after is not None else "")
        print(f"(b) {args.documents} documents, {args.workers} workers, model stages on a loopback gateway, "
              f"{what} for {args.outage_seconds:g} s after {args.outage_after} answers; {settings}; {load()}")
        closer = threading.Thread(target=_close_socket_after, args=(stub, socket_outage), daemon=True,
                                  kwargs={"answers": args.outage_after, "seconds": args.outage_seconds, "stop": stop})
        if closed:
            closer.start()
        started = time.monotonic()
        proc = order._ki(["insert", str(estate)], env)
        engine = create_engine(url, poolclass=NullPool)
        try:
            peak, _ = _watch(proc, engine, order, until_rows=None, deadline=started + args.timeout)
        finally:
            engine.dispose()
            stop.set()
            if closed:
                closer.join(timeout=15)
        text_out, _ = proc.communicate(timeout=60)
        seconds = time.monotonic() - started
        arrivals = [r.at for r in stub.requests]
    if proc.returncode != 0:
        print(f"    ki insert failed ({proc.returncode}):\n{text_out[-3000:]}")
        return False
    q = quarantined(url)
    failed = failed_attempts(url, MODEL_STAGES)
    seen = episodes(data)
    if closed:
        if socket_outage.up_at is None:
            print("    the run finished before the outage ended")
            return False
        received = socket_outage.arrived_while_down(arrivals)
        delay = socket_outage.first_after_up(arrivals)
        began = f"{socket_outage.down_at - started:.1f} s into the run"
        extra = f"; connections accepted after it until the first request: " \
                f"{socket_outage.connects_until_first_request(arrivals)}"
    else:
        received, delay = answers.dead_requests, answers.resume_delay()
        began = "never" if answers.started_at is None else f"{answers.started_at - started:.1f} s into the run"
        extra = ""
    print(f"    outage began {began}; HTTP requests the dead gateway received: {received}; answered: "
          f"{len(arrivals) - received}; failed attempts of model-stage rows: {failed}; quarantined: {q}")
    for e in seen:
        print(f"    ki's breaker: {e['requests']} requests met the outage, {e['failed_fast']} calls failed fast, "
              f"{e['connects']} TCP connects ({e['refused']} refused), {e['probes']} failed HTTP probes, "
              f"paused {e['seconds']} s")
    print(f"    resume delay (outage end to the first request answered): "
          f"{'-' if delay is None else f'{delay:.1f} s'}{extra}; run {seconds:.1f} s, peak RSS {peak:.0f} MB; {load()}")
    return q == 0 and delay is not None


def main(argv: list[str] | None = None) -> int:
    """Command line (see module doc)."""
    sys.path.insert(0, str(REPO))
    from bench._common import embedded_server, temp_workdir

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--estate", type=Path, help="folder holding estate/ and truth.json")
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1, help="seed of the kill points")
    ap.add_argument("--documents", type=int, default=1000)
    ap.add_argument("--outage-seconds", type=float, default=300.0)
    ap.add_argument("--outage-after", type=int, default=400, help="gateway answers before the outage starts")
    ap.add_argument("--outage-kind", choices=("closed", "503"), default="closed",
                    help="closed: the gateway's socket closes (a dead gateway process); 503: it answers 503")
    ap.add_argument("--retry-after", type=int, default=None,
                    help="--outage-kind 503: the 503s carry Retry-After: SECONDS (the breaker probes no sooner)")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--skip-kills", action="store_true")
    ap.add_argument("--skip-outage", action="store_true")
    args = ap.parse_args(argv)
    order = _order()
    ok = True
    with temp_workdir(prefix="ki-chaos-") as work, embedded_server(work / "pg") as uri:
        dbs = Databases(uri)
        try:
            if not args.skip_kills:
                ok &= part_kills(order, args, work, dbs)
            if not args.skip_outage:
                ok &= part_outage(order, args, work, dbs)
        finally:
            dbs.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
