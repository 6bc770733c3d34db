"""Sync runs with the local provider: ``launch_sync``, ``ki sync``, ``ki insert``, ``POST /api/actions/sync``.

Issue 19 item 1: a sync is a ``sync`` run in ``pipeline_runs``; a second sync of a source while one runs
is refused (``uq_pipeline_runs_active_sync``), not queued twice; with ``pipeline.auto_insert_after_sync``
on, a sync that brought something new hands off to ``launch_insertion`` and records the insertion run's
id (``insertion_run_id``); off (or nothing new), the sync completes with a null ``insertion_run_id``.
Real PostgreSQL, real files in temp dirs, the real console app; ~20 s in all.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from typer.testing import CliRunner

from ki.adapters.sources.scan import register_local_source
from ki.api.app import create_app
from ki.app.launch import launch_sync
from ki.cli.app import app as cli_app
from ki.config.loader import set_config_value
from ki.core.errors import SyncAlreadyRunning
from tests.helpers.console import make_tokens

pytestmark = pytest.mark.timeout(300)


def _write(root: Path, n: int, prefix: str = "note") -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"{prefix}{i}.txt").write_text(f"Aktennotiz {prefix} {i}: Lieferung und Gewährleistung.\n",
                                               encoding="utf-8")


def _run(ctx, run_id: int):
    with ctx.db.engine.connect() as conn:
        return conn.execute(text("SELECT * FROM pipeline_runs WHERE id = :r"), {"r": run_id}).one()


def _count(ctx, sql: str, **params) -> int:
    with ctx.db.engine.connect() as conn:
        return int(conn.execute(text(sql), params).scalar_one())


def test_local_sync_hands_off_when_something_is_new(ctx, tmp_path):
    root = tmp_path / "share"
    _write(root, 3)
    sid = register_local_source(ctx, root)

    first = launch_sync(ctx, sid, trigger="test")
    assert first.status == "completed" and first.report.new == 3
    row = _run(ctx, first.run_id)
    assert (row.kind, row.provider, row.status, row.processed, row.done) == ("sync", "local", "completed", 3, 3)
    assert row.insertion_run_id == first.insertion_run_id == first.insertion.run_id
    ins = _run(ctx, row.insertion_run_id)
    assert (ins.kind, ins.trigger, ins.status, ins.source_id) == ("insertion", "sync", "completed", sid)
    assert _count(ctx, "SELECT count(*) FROM processing_state WHERE stage = 'index' AND status = 'done'") == 3

    # nothing new: the sync completes without a hand-off
    again = launch_sync(ctx, sid, trigger="test")
    assert again.status == "completed" and again.insertion is None
    assert _run(ctx, again.run_id).insertion_run_id is None
    assert _count(ctx, "SELECT count(*) FROM pipeline_runs WHERE kind = 'insertion'") == 1

    # auto-insert off: new files are seeded, not inserted; insertion_run_id stays null
    set_config_value(ctx.settings.data_dir, "pipeline.auto_insert_after_sync", False)
    _write(root, 2, prefix="late")
    off = launch_sync(ctx, sid, trigger="test")
    assert off.status == "completed" and off.report.new == 2 and off.insertion is None
    assert _run(ctx, off.run_id).insertion_run_id is None
    assert _count(ctx, "SELECT count(*) FROM processing_state WHERE stage = 'fetch' AND status = 'pending'") == 2

    # ki insert = sync + insertion through the same path: it inserts even with auto-insert off
    result = CliRunner().invoke(cli_app, ["insert", str(root)])
    assert result.exit_code == 0, result.output
    assert _count(ctx, "SELECT count(*) FROM processing_state WHERE stage = 'index' AND status = 'done'") == 5
    last = _count(ctx, "SELECT max(id) FROM pipeline_runs WHERE kind = 'sync'")
    assert _run(ctx, last).insertion_run_id is not None
    assert _run(ctx, _run(ctx, last).insertion_run_id).trigger == "sync"


def test_second_sync_of_a_source_is_refused_while_one_runs(ctx, tmp_path):
    root = tmp_path / "share"
    _write(root, 2)
    sid = register_local_source(ctx, root)
    scanned, release = threading.Event(), threading.Event()
    results: list = []

    def slow_hand_off(ctx, source_id, on_started):  # the first sync stays active until released
        scanned.set()
        assert release.wait(60)
        return None

    t = threading.Thread(target=lambda: results.append(launch_sync(ctx, sid, trigger="test",
                                                                   hand_off=slow_hand_off)))
    t.start()
    assert scanned.wait(60)
    with pytest.raises(SyncAlreadyRunning) as refused:
        launch_sync(ctx, sid, trigger="test")
    assert refused.value.run_id is not None
    assert _count(ctx, "SELECT count(*) FROM pipeline_runs WHERE kind = 'sync'") == 1  # not queued twice
    assert CliRunner().invoke(cli_app, ["sync", str(sid)]).exit_code == 4
    release.set()
    t.join(60)
    assert results[0].status == "completed" and results[0].run_id == refused.value.run_id
    assert _run(ctx, results[0].run_id).insertion_run_id is None  # the hand-off started nothing
    assert launch_sync(ctx, sid, trigger="test").status == "completed"  # free again


def test_sync_of_an_unavailable_source_fails_the_run_and_changes_nothing(ctx, tmp_path):
    root = tmp_path / "share"
    _write(root, 2)
    sid = register_local_source(ctx, root)
    assert launch_sync(ctx, sid, trigger="test").status == "completed"
    root.rename(tmp_path / "elsewhere")
    failed = launch_sync(ctx, sid, trigger="test")
    assert failed.status == "failed" and "SourceUnavailable" in failed.error
    row = _run(ctx, failed.run_id)
    assert row.status == "failed" and row.insertion_run_id is None and "missing" in row.error
    assert _count(ctx, "SELECT count(*) FROM source_object WHERE missing_scans > 0 OR deleted_at IS NOT NULL") == 0
    result = CliRunner().invoke(cli_app, ["sync", str(sid)])
    assert result.exit_code == 3, result.output
    assert CliRunner().invoke(cli_app, ["sync", "999"]).exit_code == 2


def test_console_sync_action(make_ctx, tmp_path):
    ctx = make_ctx(workers=2)
    root = tmp_path / "share"
    _write(root, 3)
    sid = register_local_source(ctx, root)
    app = create_app(ctx)
    tokens = make_tokens(ctx.db.engine)
    with TestClient(app) as client:
        assert client.post("/api/actions/sync", json={"source_id": sid},
                           headers=tokens.header("reader")).status_code == 403
        assert client.post("/api/actions/sync", json={"source_id": 4242},
                           headers=tokens.header("operator")).status_code == 404
        r = client.post("/api/actions/sync", json={"source_id": sid}, headers=tokens.header("operator"))
        assert r.status_code == 202, r.text
        run_id = r.json()["run"]["id"]
        assert r.json()["run"]["kind"] == "sync"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and _run(ctx, run_id).status in ("queued", "running"):
            time.sleep(0.1)
        row = _run(ctx, run_id)
        assert row.status == "completed" and row.insertion_run_id is not None
        app.state.ki.launcher.wait_idle(120)
        assert _run(ctx, row.insertion_run_id).status == "completed"
        assert _count(ctx, "SELECT count(*) FROM processing_state WHERE stage = 'index' AND status = 'done'") == 3
        runs = client.get("/api/runs?kind=sync", headers=tokens.header("reader")).json()["runs"]
        assert runs[0]["id"] == run_id and runs[0]["insertion_run_id"] == row.insertion_run_id
        with ctx.db.engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM audit_log WHERE action = 'sync_start'")).scalar() == 1


def test_a_sync_left_unfinished_by_a_dead_process_is_failed_not_blocking(ctx, tmp_path):
    """A process killed mid-sync (or whose database stopped) leaves its sync run ``running``; the next sync
    takes the source's sync lock (the dead process's went with its connection), fails that run with the
    cause, and runs."""
    from ki.store import runs

    root = tmp_path / "share"
    _write(root, 2)
    sid = register_local_source(ctx, root)
    with ctx.db.engine.begin() as conn:
        orphan = runs.create_run(conn, kind=runs.KIND_SYNC, label="Sync", provider="local", status="running",
                                 source_id=sid, trigger="cli")
    result = launch_sync(ctx, sid, trigger="test")
    assert result.status == "completed" and result.run_id != orphan
    row = _run(ctx, orphan)
    assert row.status == "failed" and "ended before it finished" in row.error
    assert result.insertion is not None and result.insertion.status == "completed"
