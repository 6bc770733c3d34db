"""Cancelling a Hatchet batch mid-run (ki.app.cancel → ki.workflows.cancel) on the real engine.

24 documents, a conveyor window of 4, a worker whose convert handler sleeps 1.5 s: once converts are running the
run is cancelled. The run ends ``cancelled`` at once, every member is finished (the unreleased ones with outcome
``cancelled``, so the conveyor triggers nothing more), and once the stages in hand have finished no row is running
or quarantined and every row is either as it was before the run or finished; the next insertion completes every
document. Cost: ~1-3 min.
"""

from __future__ import annotations

import time

import pytest

from ki.app.cancel import cancel_run
from ki.app.launch import launch_insertion
from tests.helpers.hatchet_harness import configure, q, scan, write_docs

pytestmark = [pytest.mark.hatchet, pytest.mark.timeout(300)]

N = 24


def _rows(ctx) -> dict[int, tuple]:
    return {r.id: (r.status, r.reason, r.attempts) for r in q(
        ctx, "SELECT id, status, reason, attempts FROM processing_state")}


def test_cancel_a_hatchet_batch_mid_run(hx, make_ctx, tmp_path):
    root = tmp_path / "share"
    write_docs(root, N)
    ctx = make_ctx(hatchet_document_concurrency=4)
    configure(ctx.settings.data_dir, "hatchet")
    hx.start_worker(slots=4, env={"KI_TEST_SLOW": "convert:1.5"})
    scan(ctx, root)
    ctx.reload_config()
    before = _rows(ctx)
    run_id = launch_insertion(ctx, trigger="test").run_id
    deadline = time.monotonic() + 180
    while not q(ctx, "SELECT 1 FROM processing_state WHERE stage = 'convert' AND status = 'running'"):
        assert time.monotonic() < deadline, hx.diagnostics(ctx)
        time.sleep(0.1)

    outcome = cancel_run(ctx, run_id, actor="test", wait_seconds=0)
    assert outcome.run.status == "cancelled", outcome
    members = q(ctx, "SELECT outcome, finished_at FROM pipeline_run_object WHERE run_id = :r", r=run_id)
    assert len(members) == N and all(m.finished_at is not None for m in members)
    waiting = sum(1 for m in members if m.outcome == "cancelled")
    assert waiting >= N - 8, members  # the window is 4: most members never got a DAG

    while q(ctx, "SELECT 1 FROM processing_state WHERE status = 'running'"):  # the stages in hand finish
        assert time.monotonic() < deadline + 60, hx.diagnostics(ctx)
        time.sleep(0.2)
    after = _rows(ctx)
    changed = {k for k in before if after[k] != before[k]}
    assert all(after[k][0] in ("done", "skipped", "pending") for k in changed), {k: after[k] for k in changed}
    assert not [v for v in after.values() if v[0] == "quarantined"]
    assert len(changed) < len(before) // 2  # most rows are exactly as before the run
    # nothing more is claimed for the cancelled run
    settled = _rows(ctx)
    assert q(ctx, "SELECT status FROM pipeline_runs WHERE id = :r", r=run_id)[0].status == "cancelled"

    summary = launch_insertion(ctx, trigger="test")
    hx.wait_run(ctx, summary.run_id)
    final = _rows(ctx)
    assert all(v[0] in ("done", "skipped") for v in final.values()), final
    assert settled.keys() == final.keys()
