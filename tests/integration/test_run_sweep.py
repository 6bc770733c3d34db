"""Local runs whose process is gone never stay active (issue 14 item 3).

A local run records ``host:pid:start`` (``pipeline_runs.worker``); ``updated_at`` is its heartbeat.
Real reproductions: a runner process killed with SIGKILL mid-stage (the console API and the next run
see it), a run row of a process that ran and ended (``ki status`` as a process), a silent run of
another host. Cost: ~1 min at load 20 (one runner process, one ``ki status``, one small run).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.api.app import create_app
from ki.app.launch import launch_insertion
from ki.core.liveness import process_start_ticks
from ki.orchestration.run_sweep import sweep_local_runs
from ki.store import runs
from tests.helpers.console import make_tokens

HELPER = Path(__file__).resolve().parents[1] / "helpers" / "run_worker.py"
KI = Path(sys.executable).parent / "ki"
MODEL_STAGES_OFF = {f"KI_PIPELINE__STAGES__{s.upper()}__ENABLED": "false"
                    for s in ("classify_matter", "relate", "extract_metadata", "extract_decisions")}


def _estate(root: Path, n: int) -> None:
    root.mkdir(parents=True)
    for i in range(n):
        (root / f"brief-{i}.txt").write_text(f"Schreiben {i} an die Mandantschaft.\n", encoding="utf-8")


def _run_row(ctx, run_id: int):
    with ctx.db.engine.connect() as conn:
        return conn.execute(text("SELECT status, error, worker, provider FROM pipeline_runs WHERE id = :r"),
                            {"r": run_id}).one()


def test_a_killed_local_run_is_resolved_by_the_sweeper_and_the_next_run_adopts_its_work(make_ctx, db_url,
                                                                                      data_dir, tmp_path):
    ctx = make_ctx(workers=2)
    _estate(tmp_path / "akten", 3)
    scan_source(ctx, register_local_source(ctx, tmp_path / "akten"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KI_")} | MODEL_STAGES_OFF
    env["KI_TEST_SLOW_FETCH"] = "brief-1.txt:300"
    proc = subprocess.Popen([sys.executable, str(HELPER), "--db-url", db_url, "--data-dir", str(data_dir),
                             "--workers", "2"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            with ctx.db.engine.connect() as conn:
                run = conn.execute(text("SELECT id, worker FROM pipeline_runs WHERE status = 'running'")).first()
                held = conn.execute(text("SELECT count(*) FROM processing_state ps JOIN source_object so ON "
                                         "so.id = ps.source_object_id WHERE so.external_id = 'brief-1.txt' "
                                         "AND ps.stage = 'fetch' AND ps.status = 'running'")).scalar_one()
            if run is not None and held:
                break
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the slow fetch was never claimed"
            time.sleep(0.05)
        assert run.worker.split(":")[:2] == [os.uname().nodename, str(proc.pid)]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    app = create_app(ctx)
    headers = {"Authorization": f"Bearer {make_tokens(ctx.db.engine).values['reader']}"}
    with TestClient(app) as client:
        status = client.get("/api/status", headers=headers)
        assert status.status_code == 200
        assert status.json()["runs"] == []  # the dead run is never shown active
        listed = {r["id"]: r for r in client.get("/api/runs", headers=headers).json()["runs"]}
    assert listed[run.id]["status"] == "failed"
    expected = (f"the process running it ({run.worker}) ended without finishing it (killed or crashed); "
                "its remaining work is adopted by the next run")
    assert listed[run.id]["error"] == expected
    assert _run_row(ctx, run.id).error == expected

    summary = launch_insertion(ctx, trigger="test", wait_for_retries_seconds=0)  # adopts the killed run's work
    assert summary.status == "completed"
    with ctx.db.engine.connect() as conn:
        fetch = conn.execute(text("SELECT ps.status, ps.attempts, ps.run_id FROM processing_state ps JOIN "
                                  "source_object so ON so.id = ps.source_object_id WHERE so.external_id = "
                                  "'brief-1.txt' AND ps.stage = 'fetch'")).one()
    assert (fetch.status, fetch.attempts, fetch.run_id) == ("done", 2, summary.run_id)


def test_ki_status_fails_the_run_of_an_ended_process(ctx):
    ended = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    start = None
    while start is None and ended.poll() is None:
        start = process_start_ticks(ended.pid)
    ended.wait()
    worker = f"{os.uname().nodename}:{ended.pid}:{start}"
    with ctx.db.engine.begin() as conn:
        run_id = runs.create_run(conn, kind=runs.KIND_INSERTION, label="killed", provider="local", status="running",
                                 source_id=None, trigger="cli", worker=worker)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KI_")}
    env |= {"KI_DATA_DIR": str(ctx.settings.data_dir), "KI_DATABASE_URL": ctx.settings.database_url}
    proc = subprocess.run([str(KI), "status"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = _run_row(ctx, run_id)
    assert (row.status, row.worker) == ("failed", worker)
    assert row.error.startswith(f"the process running it ({worker}) ended without finishing it")


def test_a_silent_run_of_another_host_is_presumed_dead_a_talking_one_is_not(ctx):
    with ctx.db.engine.begin() as conn:
        silent = runs.create_run(conn, kind=runs.KIND_INSERTION, label="silent", provider="local", status="running",
                                 source_id=None, trigger="cli", worker="elsewhere:4242:1")
        talking = runs.create_run(conn, kind=runs.KIND_INSERTION, label="talking", provider="local",
                                  status="running", source_id=None, trigger="cli", worker="elsewhere:4243:1")
        conn.execute(text("UPDATE pipeline_runs SET updated_at = now() - interval '20 minutes' WHERE id = :r"),
                     {"r": silent})
    failed = dict(sweep_local_runs(ctx))  # KI_RUN_SILENT_MINUTES default 15
    assert list(failed) == [silent]
    assert failed[silent] == "silent for 20 min (KI_RUN_SILENT_MINUTES 15); its process (elsewhere:4242:1) is " \
                             "presumed dead"
    assert _run_row(ctx, talking).status == "running"
    assert _run_row(ctx, silent).status == "failed"
