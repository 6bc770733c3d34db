"""Cancelling a local run mid-run (``ki run cancel``, ``POST /api/runs/{id}/cancel``; ki.app.cancel).

Real reproduction: a local run whose two workers each hold a ``fetch`` that does not return until the runner has
read the cancellation; the real ``ki run cancel`` command cancels it. Then: the two stages in hand finished (done),
every other row is exactly as it was before the run, nothing is running, the run ended ``cancelled`` with counters
that match the rows, ``ki run list --json`` shows it, the cancellation is audited, and the next run finishes every
file. The API refuses unknown fields (422), an unknown run (404), a finished one (409) and a reader (403).
Cost: ~15 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.api.app import create_app
from ki.app.launch import launch_insertion
from ki.orchestration.runner import PipelineRunner
from ki.stages import STAGE_HANDLERS
from tests.helpers.console import make_tokens

KI = Path(sys.executable).parent / "ki"
MODEL_STAGES_OFF = {"pipeline": {"stages": {s: {"enabled": False} for s in
                                            ("classify_matter", "relate", "extract_metadata", "extract_decisions")}}}
FILES = 12


def _rows(ctx) -> dict[tuple[str, str], tuple]:
    with ctx.db.engine.connect() as conn:
        rows = conn.execute(text("SELECT so.external_id, ps.stage, ps.status, ps.reason, ps.attempts, ps.lane "
                                 "FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id"))
        return {(r.external_id, r.stage): (r.status, r.reason, r.attempts, r.lane) for r in rows}


def _wait(cond, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_cancel_mid_run_keeps_every_row_and_the_next_run_resumes(make_ctx, db_url, data_dir, tmp_path,
                                                                 monkeypatch):
    (data_dir / "config.json").write_text(json.dumps(MODEL_STAGES_OFF))
    root = tmp_path / "akten"
    root.mkdir()
    for i in range(FILES):
        (root / f"brief-{i:02d}.txt").write_text(f"Schreiben {i} an die Mandantschaft.\n", encoding="utf-8")
    ctx = make_ctx(workers=2, insert_wait_retry_seconds=0)
    scan_source(ctx, register_local_source(ctx, root))
    before = _rows(ctx)

    seen_cancel = threading.Event()
    holding: list[str] = []
    original_seen, original_fetch = PipelineRunner._cancel_seen, STAGE_HANDLERS["fetch"]

    def cancel_seen(self):
        if original_seen(self):
            seen_cancel.set()
        return self.cancelled

    def fetch(hctx):  # holds the row until the runner has read the cancellation, then finishes normally
        holding.append(hctx.obj.external_id)
        assert seen_cancel.wait(60), "the runner never read the cancellation"
        return original_fetch(hctx)

    monkeypatch.setattr(PipelineRunner, "_cancel_seen", cancel_seen)
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", fetch)
    box: dict = {}
    runner = threading.Thread(target=lambda: box.setdefault("summary", launch_insertion(ctx, trigger="cli")))
    runner.start()
    _wait(lambda: len(holding) == 2, "both workers to hold a fetch")
    with ctx.db.engine.connect() as conn:
        run_id = conn.execute(text("SELECT id FROM pipeline_runs WHERE status = 'running'")).scalar_one()

    env = {k: v for k, v in os.environ.items() if not k.startswith("KI_")} | {
        "KI_DATA_DIR": str(data_dir), "KI_DATABASE_URL": db_url}
    proc = subprocess.run([str(KI), "run", "cancel", str(run_id), "--wait", "60"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"run {run_id} cancelled: 2 done" in proc.stdout, proc.stdout
    runner.join(60)
    summary = box["summary"]
    assert summary.status == "cancelled" and summary.counters.done == 2
    assert "cancelled by cli" in summary.error

    after = _rows(ctx)
    held = set(holding)
    changed = {k for k in before if after[k] != before[k]}
    # the two fetches in hand finished, and only their convert was unlocked: nothing else moved
    assert {k[0] for k in changed} == held
    for name in held:
        assert after[(name, "fetch")][0] == "done"
        assert after[(name, "convert")][:3] == ("pending", None, 0)
    assert not any(v[0] == "running" for v in after.values())
    with ctx.db.engine.connect() as conn:
        run = conn.execute(text("SELECT status, done, processed, quarantined, cancelled_by, finished_at "
                                "FROM pipeline_runs WHERE id = :r"), {"r": run_id}).one()
        audited = conn.execute(text("SELECT actor, details FROM audit_log WHERE action = 'run_cancel'")).one()
    assert (run.status, run.done, run.processed, run.quarantined, run.cancelled_by) == ("cancelled", 2, 2, 0, "cli")
    assert run.finished_at is not None
    assert audited.actor == "cli" and audited.details["run_id"] == run_id

    listed = subprocess.run([str(KI), "run", "list", "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    first = json.loads(listed.stdout)["runs"][0]
    assert (first["id"], first["status"], first["kind"], first["provider"], first["done"]) == (
        run_id, "cancelled", "insertion", "local", 2)

    monkeypatch.setitem(STAGE_HANDLERS, "fetch", original_fetch)
    resumed = launch_insertion(ctx, trigger="cli")
    assert resumed.status == "completed"
    final = _rows(ctx)
    assert all(v[0] in ("done", "skipped") for v in final.values())
    assert sum(1 for (n, s), v in final.items() if s == "fetch" and v[0] == "done") == FILES
    # the resumed run did the rest, nothing twice: the held files' fetch is not run again
    assert resumed.counters.done == sum(1 for v in final.values() if v[0] == "done") - 2

    app = create_app(ctx)
    tokens = make_tokens(ctx.db.engine)
    operator = {"Authorization": f"Bearer {tokens.values['operator']}"}
    with TestClient(app) as client:
        assert client.post(f"/api/runs/{run_id}/cancel", json={"wat": 1}, headers=operator).status_code == 422
        assert client.post("/api/runs/999999/cancel", headers=operator).json()["error"] == "not_found"
        refused = client.post(f"/api/runs/{resumed.run_id}/cancel", json={"reason": "late"}, headers=operator)
        assert refused.status_code == 409 and refused.json()["error"] == "finished"
        reader = {"Authorization": f"Bearer {tokens.values['reader']}"}
        assert client.post(f"/api/runs/{run_id}/cancel", headers=reader).status_code == 403
        runs = client.get("/api/runs?status=cancelled", headers=operator).json()["runs"]
        assert [r["id"] for r in runs] == [run_id] and runs[0]["cancelled_by"] == "cli"
