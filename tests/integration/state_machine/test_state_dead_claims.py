"""Dead claimers of this host are recovered at once; other hosts' claims keep the timeout (issue 14 item 2).

A claim records ``host:pid:start`` (``ki.core.liveness``). Real processes: a child that ran and ended,
a live child, and a live pid recorded with another start time (the pid reused by another program).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from sqlalchemy import text

from ki.core.liveness import dead_here, parse_worker, process_start_ticks, this_worker
from ki.orchestration import prepare
from ki.store import claims as q
from tests.helpers.state import make_source, rows


def _identity(pid: int, start: int | None) -> str:
    return f"{socket.gethostname()}:{pid}" + (f":{start}" if start is not None else "")


def test_the_claim_records_host_pid_and_start_time(ctx, src):
    (oid,) = make_source(ctx, src, 1)
    with ctx.db.engine.begin() as conn:
        q.claim_row(conn, oid, "fetch", worker=ctx.worker_id, run_id=None)
    ident = parse_worker(rows(ctx, oid)["fetch"]["claimed_by"])
    assert ident is not None
    assert (ident.host, ident.pid) == (socket.gethostname(), os.getpid())
    assert ident.start == process_start_ticks(os.getpid()) and ident.start > 0
    assert ctx.worker_id == this_worker() and not dead_here(ctx.worker_id)


def test_claims_of_ended_processes_are_recovered_at_once_live_and_foreign_ones_are_not(ctx, src):
    ids = make_source(ctx, src, 5)
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended_start = process_start_ticks(ended.pid)
    ended.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        deadline = time.monotonic() + 10
        while process_start_ticks(live.pid) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        parent = os.getppid()
        holders = {
            ids[0]: _identity(ended.pid, ended_start),  # ran and ended
            ids[1]: _identity(parent, (process_start_ticks(parent) or 0) + 12345),  # pid reused by another program
            ids[2]: _identity(live.pid, process_start_ticks(live.pid)),  # alive
            ids[3]: f"elsewhere-{socket.gethostname()}:{ended.pid}:1",  # another host: cannot be examined
            ids[4]: _identity(ended.pid, None),  # an identity without start time: judged by the pid
        }
        with ctx.db.engine.begin() as conn:
            for oid, worker in holders.items():
                assert q.claim_row(conn, oid, "fetch", worker=worker, run_id=None) is not None
        started = time.monotonic()
        assert prepare.recover_stale_claims(ctx) == 3  # default claim_timeout_seconds (900 s): not waited for
        assert time.monotonic() - started < 5
        for oid in (ids[0], ids[1], ids[4]):
            row = rows(ctx, oid)["fetch"]
            assert (row["status"], row["claimed_by"]) == ("failed", None)
            err = row["last_error"]
            assert err["class"] == "StaleClaim" and err["reason"] is None
            assert err["message"] == f"worker {holders[oid]} is gone (its process ended): claim recovered at once"
        for oid in (ids[2], ids[3]):
            assert rows(ctx, oid)["fetch"]["status"] == "running"
    finally:
        live.kill()
        live.wait()
    # the live child is now gone too (reaped): recovered at the next sweep
    assert prepare.recover_stale_claims(ctx) == 1
    assert rows(ctx, ids[2])["fetch"]["status"] == "failed"
    assert rows(ctx, ids[3])["fetch"]["status"] == "running"


def test_a_zombie_holds_nothing(ctx, src):
    """A killed child its parent has not reaped yet still has a pid and a start time: it is dead."""
    (oid,) = make_source(ctx, src, 1)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        deadline = time.monotonic() + 10
        while process_start_ticks(child.pid) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        worker = _identity(child.pid, process_start_ticks(child.pid))
        with ctx.db.engine.begin() as conn:
            q.claim_row(conn, oid, "fetch", worker=worker, run_id=None)
        assert not dead_here(worker)
        os.kill(child.pid, 9)
        while not dead_here(worker) and time.monotonic() < deadline:  # not reaped: a zombie
            time.sleep(0.01)
        assert os.path.exists(f"/proc/{child.pid}"), "reaped already: the test proves nothing"
        assert prepare.recover_stale_claims(ctx) == 1
    finally:
        child.kill()
        child.wait()


def test_ki_insert_says_what_it_waits_for(ctx, src):
    """Rows another host's process holds: ``ki insert`` names the holder, its silence and the timeout,
    then recovers the claim once it is silent for claim_timeout_seconds and finishes."""
    ids = make_source(ctx, src, 2)
    with ctx.db.engine.begin() as conn:
        q.claim_row(conn, ids[0], "fetch", worker="otherhost:4242:77", run_id=None)
    ki = Path(sys.executable).parent / "ki"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KI_")}
    env |= {"KI_DATA_DIR": str(ctx.settings.data_dir), "KI_DATABASE_URL": ctx.settings.database_url,
            "KI_PIPELINE__CLAIM_TIMEOUT_SECONDS": "4", "KI_INSERT_WAIT_RETRY_SECONDS": "0", "COLUMNS": "300"}
    started = threading.Event()

    def holder_alive_until_the_run_started() -> None:  # then silent: recovered 4 s later
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            with ctx.db.engine.begin() as conn:
                conn.execute(text("UPDATE processing_state SET heartbeat_at = now() WHERE status = 'running'"))
                if conn.execute(text("SELECT count(*) FROM pipeline_runs")).scalar_one():
                    break
            time.sleep(0.2)
        started.set()

    holder = threading.Thread(target=holder_alive_until_the_run_started, daemon=True)
    holder.start()
    proc = subprocess.run([str(ki), "insert", str(src)], env=env, capture_output=True, text=True, timeout=300)
    holder.join()
    out = proc.stdout + proc.stderr
    assert started.is_set()
    assert proc.returncode == 0, out
    assert ("waiting for 1 running stage(s): 1 held by otherhost:4242:77 (heartbeat " in out
            and "a silent holder is presumed dead after 4 s, an ended process of this host at once" in out), out
    row = rows(ctx, ids[0])["fetch"]
    assert (row["status"], row["attempts"]) == ("done", 2)
