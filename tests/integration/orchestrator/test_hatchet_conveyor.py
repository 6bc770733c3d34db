"""The batch conveyor and the DAG per enabled stage set, on a real engine (hatchet-lite v0.105.0).

Spec: insertion-pipeline.md "Orchestration" (``KI_HATCHET_DOCUMENT_CONCURRENCY``) and the decision
"Hatchet DAG shape and pacing" (DESIGN.md; issue 22 "Tests"): a batch triggers at most its window of
document DAGs at once and each DAG's end triggers the next members; two batches pace themselves
side by side; a replayed final task never triggers a member twice; a configuration change that
enables a stage registers a new workflow (the worker restarts to serve it), the batch in flight
finishes on its DAG and the next one runs the new DAG, ending with the local provider's rows.

The ledger-only behaviour (release, replay, concurrent ends) is tested without an engine in
tests/integration/state_machine/test_state_conveyor.py; fixtures: ``conftest.py`` here.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from ki.app.launch import launch_insertion
from ki.config.loader import ProcessSettings, set_config_value
from ki.domain.context import PipelineContext
from ki.store.db import open_database
from ki.workflows.client import hatchet_client
from ki.workflows.dag import document_workflow_name
from tests.helpers.hatchet_harness import (
    configure,
    dags_per_member,
    engine_dags,
    engine_run,
    new_database,
    peak_in_flight,
    q,
    scan,
    write_docs,
)

pytestmark = [pytest.mark.hatchet, pytest.mark.timeout(300)]

WINDOW = 3


def _members(ctx: PipelineContext, run_id: int) -> list:
    return q(ctx, "SELECT source_object_id, workflow_run_id, outcome, released_by, finished_at "
                  "FROM pipeline_run_object WHERE run_id = :r ORDER BY source_object_id", r=run_id)


def test_conveyor_paces_each_batch_and_two_batches_progress(hx, make_ctx, tmp_path):
    """Two batches launched one after the other, window 3 each, 2 workers x 8 slots: neither ever has
    more than 3 DAGs in flight (the engine's run list against ki's recorded ends), the second batch
    finishes documents while the first still runs, each member has exactly one DAG, and every DAG
    after a batch's first window was released by the end of another member of the same batch. A
    completed DAG replayed in the engine mid-run (its final task runs again) triggers nobody twice."""
    for name in ("a", "b"):
        write_docs(tmp_path / name, 24, prefix=name)
    ctx = make_ctx(hatchet_document_concurrency=WINDOW)
    configure(ctx.settings.data_dir, "hatchet")
    for _ in range(2):
        hx.start_worker(slots=8, env={"KI_TEST_SLOW": "convert:0.3"})
    scan(ctx, tmp_path / "a")
    ctx.reload_config()
    first = launch_insertion(ctx, trigger="test").run_id
    scan(ctx, tmp_path / "b")
    second = launch_insertion(ctx, trigger="test").run_id

    # replay three finished DAGs of the first batch while it still has members waiting
    deadline = time.monotonic() + 180
    while len(done := [m for m in _members(ctx, first) if m.finished_at]) < 3:
        assert time.monotonic() < deadline, hx.diagnostics(ctx)
        time.sleep(0.2)
    from hatchet_sdk.features.runs import BulkCancelReplayOpts

    hatchet_client().runs.bulk_replay(BulkCancelReplayOpts(ids=[m.workflow_run_id for m in done[:3]]))

    for run_id in (first, second):
        hx.wait_run(ctx, run_id, timeout=240)
    ends = {}
    for run_id in (first, second):
        members = _members(ctx, run_id)
        assert len(members) == 24 and {m.outcome for m in members} == {"done"}
        assert len({m.workflow_run_id for m in members}) == 24
        # the first window was released by the trigger, every later member by another member's end
        released = Counter(m.released_by for m in members)
        assert released[None] == WINDOW and sum(released.values()) == 24
        assert all(by in {m.source_object_id for m in members} for by in released if by is not None)
        assert all(c == 1 for by, c in released.items() if by is not None)  # one successor per end
        per_member = dags_per_member(hx.namespace, run_id)
        assert len(per_member) == 24 and set(per_member.values()) == {1}, per_member
        peak = peak_in_flight(hx.namespace, ctx, run_id)
        assert 1 < peak <= WINDOW, peak
        ends[run_id] = sorted(m.finished_at for m in members)
    # fairness: the second batch finished documents while the first was still running
    assert ends[second][0] < ends[first][-1]
    assert q(ctx, "SELECT count(*) FROM processing_state WHERE stage = 'index' AND status = 'done'")[0][0] == 48
    assert q(ctx, "SELECT max(completions) FROM processing_state")[0][0] == 1  # the replays redid nothing


def test_enabling_a_stage_mid_run_registers_a_new_dag(hx, make_ctx, pg_server_uri, template_db, tmp_path):
    """Stages fetch+convert, then ``index`` enabled while the batch runs: the worker restarts to serve
    the new workflow, the running batch finishes on its fetch+convert DAG, the next batch runs
    fetch+convert+index DAGs, and the end state equals the local provider's with the same two
    configurations in sequence."""
    root = tmp_path / "share"
    write_docs(root, 20)
    before, after = ["fetch", "convert"], ["fetch", "convert", "index"]
    ctx = make_ctx(hatchet_document_concurrency=WINDOW)
    configure(ctx.settings.data_dir, "hatchet", stages=before)
    worker = hx.start_worker(slots=8, env={"KI_TEST_SLOW": "convert:0.4"})
    scan(ctx, root)
    ctx.reload_config()
    first = launch_insertion(ctx, trigger="test").run_id
    deadline = time.monotonic() + 120
    while q(ctx, "SELECT count(*) FROM pipeline_run_object WHERE run_id = :r AND finished_at IS NOT NULL",
            r=first)[0][0] < 4:
        assert time.monotonic() < deadline, hx.diagnostics(ctx)
        time.sleep(0.2)
    set_config_value(ctx.settings.data_dir, "pipeline.stages.index.enabled", True)
    hx.wait_run(ctx, first, timeout=240)
    assert q(ctx, "SELECT workflow_name FROM pipeline_runs WHERE id = :r", r=first)[0][0] == \
        document_workflow_name(before)
    ctx.reload_config()
    second = launch_insertion(ctx, trigger="test").run_id
    hx.wait_run(ctx, second, timeout=240)
    assert q(ctx, "SELECT workflow_name FROM pipeline_runs WHERE id = :r", r=second)[0][0] == \
        document_workflow_name(after)
    assert worker.poll() is None and "restarting" in hx.log_text()  # re-executed itself, same process
    tasks = {t.display_name.rsplit("-", 1)[0] for d in engine_dags(hx.namespace, second)[:3]
             for t in engine_run(str(d.workflow_run_external_id)).tasks
             if not t.display_name.startswith("record_failure")}
    assert tasks == set(after)

    local_url = new_database(pg_server_uri, template_db)
    local_dir = tmp_path / "local-data"
    configure(local_dir, "local", stages=before)
    local = PipelineContext.open(ProcessSettings(data_dir=local_dir, database_url=local_url),
                                 db=open_database(local_url, pool_size=8, migrate=False))
    try:
        scan(local, root)
        assert launch_insertion(local, trigger="test", wait_for_retries_seconds=0).status == "completed"
        set_config_value(local_dir, "pipeline.stages.index.enabled", True)
        local.reload_config()
        assert launch_insertion(local, trigger="test", wait_for_retries_seconds=0).status == "completed"
        rows = """SELECT so.path, ps.stage, ps.status, ps.reason, ps.completions, ps.producer_version
                  FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
                  ORDER BY so.path, ps.stage"""
        chunks = "SELECT so.path, c.ordinal, c.text FROM chunk c JOIN source_object so ON so.id = c.source_object_id " \
                 "ORDER BY 1, 2"
        assert q(ctx, rows) == q(local, rows)
        assert q(ctx, chunks) == q(local, chunks) and len(q(ctx, chunks)) >= 20
    finally:
        local.db.dispose()
