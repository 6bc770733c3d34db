"""launch_insertion, the run ledger and the local runner; the hatchet provider fails closed.

Spec: insertion-pipeline.md "Orchestration" and "In-process provider (local)".
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.core import errors
from ki.core.errors import OrchestratorUnavailable
from ki.core.taxonomies import MODEL_STAGES, PIPELINE_STAGE_ORDER
from ki.domain.context import PipelineContext
from ki.orchestration.execute import execute_claim
from ki.orchestration.runner import PipelineRunner
from ki.stages import STAGE_HANDLERS
from ki.store import claims as q
from ki.store.db import open_database
from tests.helpers.state import buckets, configure, expected_done_buckets, make_source, raising, rows, sql


def test_launch_insertion_records_the_run_and_its_counters(ctx, src, monkeypatch):
    ids = make_source(ctx, src, 5)
    configure(ctx, retry_base_seconds=0.05)
    real = {s: STAGE_HANDLERS[s] for s in ("fetch", "convert")}
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", raising(lambda: RuntimeError("once"), only={ids[3]}, times=1,
                                                        then=real["fetch"]))
    monkeypatch.setitem(STAGE_HANDLERS, "convert", raising(lambda: errors.UnsupportedDocument("bad", reason="corrupt"),
                                                          only={ids[4]}, then=real["convert"]))
    summary = launch_insertion(ctx, trigger="test", wait_for_retries_seconds=10, workers=3)
    assert summary.status == "completed"
    c = summary.counters
    # 4 complete documents × 7 stages + 1 retry + (fetch done, convert quarantined); the switched-off
    # model stages are recorded skipped by convert's commit (processed and skipped, never claimed)
    assert (c.processed, c.done, c.skipped, c.retried, c.quarantined, c.claim_lost) == (31, 13, 16, 1, 1, 0)
    with ctx.db.engine.connect() as conn:
        run = conn.execute(text("SELECT * FROM pipeline_runs WHERE id = :id"), {"id": summary.run_id}).mappings().one()
        claimed_by_run = conn.execute(text("SELECT count(*) FROM processing_state WHERE run_id = :id"),
                                      {"id": summary.run_id}).scalar()
    assert (run["kind"], run["provider"], run["status"], run["trigger"], run["error"]) == (
        "insertion", "local", "completed", "test", None)
    assert (run["processed"], run["done"], run["skipped"], run["retried"], run["quarantined"]) == (31, 13, 16, 1, 1)
    assert run["finished_at"] is not None and run["finished_at"] >= run["started_at"]
    # every row the run claimed, and the switched-off ones its completions recorded on the way
    assert claimed_by_run == 4 * 7 + 2
    for oid in ids[:4]:
        assert buckets(ctx, oid) == expected_done_buckets()
    assert rows(ctx, ids[3])["fetch"]["attempts"] == 2
    assert buckets(ctx, ids[4])["convert"] == "quarantined"
    assert all(b == "waiting" for s, b in buckets(ctx, ids[4]).items() if s not in ("fetch", "convert"))

    # a second run finds nothing to do and re-runs nothing
    again = launch_insertion(ctx, wait_for_retries_seconds=0)
    assert again.status == "completed" and again.run_id != summary.run_id
    assert (again.counters.processed, again.counters.done) == (0, 0)
    with ctx.db.engine.connect() as conn:
        assert conn.execute(text("SELECT max(completions) FROM processing_state")).scalar() == 1
        run2 = conn.execute(text("SELECT status, processed FROM pipeline_runs WHERE id = :id"),
                            {"id": again.run_id}).one()
    assert tuple(run2) == ("completed", 0)


def test_pipeline_runner_runs_every_row_exactly_once(make_ctx, src):
    ctx = make_ctx(workers=6)
    ids = make_source(ctx, src, 20)
    # a shared pool of 2 x workers connections (pool_size + overflow): the threads' own connections are
    # outside it, so handlers (which may nest two pooled connections) never wait for one a worker holds
    small = open_database(ctx.db.engine.url.render_as_string(hide_password=False), pool_size=6, migrate=False)
    ctx = PipelineContext(db=small, blobs=ctx.blobs, config=ctx.config, settings=ctx.settings)
    runner = PipelineRunner(ctx, workers=6)
    counters = runner.run_until_idle()
    assert (counters.processed, counters.done, counters.skipped, counters.retried, counters.quarantined) == (
        140, 60, 80, 0, 0)
    assert runner.prepare_report is not None and runner.prepare_report.stale_recovered == 0
    for oid in ids:
        r = rows(ctx, oid)
        assert buckets(ctx, oid) == expected_done_buckets()
        assert all(r[s]["completions"] == (0 if s in MODEL_STAGES else 1) for s in PIPELINE_STAGE_ORDER)
        assert all(r[s]["attempts"] == (0 if s in MODEL_STAGES else 1) for s in PIPELINE_STAGE_ORDER)
    small.dispose()


def test_runner_finishes_a_row_left_running_by_a_dead_worker(ctx, src):
    ids = make_source(ctx, src, 2)
    with ctx.db.engine.begin() as conn:
        dead = q.claim_row(conn, ids[0], "fetch", worker="killed:1", run_id=None)
    sql(ctx, "UPDATE processing_state SET heartbeat_at = now() - interval '1 day' WHERE id = :id", id=dead.row_id)
    summary = launch_insertion(ctx, wait_for_retries_seconds=0)
    assert summary.status == "completed"
    for oid in ids:
        assert buckets(ctx, oid) == expected_done_buckets()
    assert rows(ctx, ids[0])["fetch"]["attempts"] == 2
    assert execute_claim(ctx, dead).kind == "claim_lost"
    assert rows(ctx, ids[0])["fetch"]["completions"] == 1


def test_hatchet_provider_fails_closed(ctx, src, monkeypatch):
    """Provider hatchet without an engine (no HATCHET_CLIENT_TOKEN): refused before anything is written."""
    monkeypatch.delenv("HATCHET_CLIENT_TOKEN", raising=False)
    make_source(ctx, src, 1)
    set_config_value(ctx.settings.data_dir, "components.orchestrator_provider", "hatchet")
    with pytest.raises(OrchestratorUnavailable, match="HATCHET_CLIENT_TOKEN"):
        launch_insertion(ctx)
    with ctx.db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM pipeline_runs")).scalar() == 0
        assert conn.execute(text("SELECT count(*) FROM processing_state WHERE status <> 'skipped' "
                                 "AND status <> 'pending'")).scalar() == 0


def test_hatchet_provider_pinned_by_env_fails_closed(ctx, src, monkeypatch):
    monkeypatch.delenv("HATCHET_CLIENT_TOKEN", raising=False)
    make_source(ctx, src, 1)
    monkeypatch.setenv("KI_COMPONENTS__ORCHESTRATOR_PROVIDER", "hatchet")
    with pytest.raises(OrchestratorUnavailable):
        launch_insertion(ctx)
    with ctx.db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM pipeline_runs")).scalar() == 0
