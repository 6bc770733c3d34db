"""The explicit retry from quarantine: the earliest quarantined stage is released, downstream invalidated.

Spec: insertion-pipeline.md "Retry from quarantine".
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from ki.app.launch import launch_insertion
from ki.core.taxonomies import PIPELINE_STAGE_ORDER, WAITING_FOR_PREVIOUS_STAGE
from ki.orchestration.execute import run_stage_for_object
from ki.orchestration.quarantine import retry_quarantined
from ki.stages import STAGE_HANDLERS
from tests.helpers.state import AFTER_FETCH, buckets, configure, expected_done_buckets, make_source, raising, rows


def test_quarantine_retry_releases_the_earliest_quarantined_stage(ctx, src, monkeypatch):
    ids = make_source(ctx, src, 2)
    oid = ids[0]
    real = {s: STAGE_HANDLERS[s] for s in ("convert", "index")}
    # index quarantines first (deterministic), then a convert re-run quarantines convert too
    monkeypatch.setitem(STAGE_HANDLERS, "index", raising(lambda: ValueError("index refused"), only={oid},
                                                        then=real["index"]))
    launch_insertion(ctx, wait_for_retries_seconds=0)
    assert rows(ctx, oid)["index"]["status"] == "quarantined"
    configure(ctx, stages__convert__rerun_token="r1")
    monkeypatch.setitem(STAGE_HANDLERS, "convert", raising(lambda: ValueError("convert refused"), only={oid},
                                                          then=real["convert"]))
    launch_insertion(ctx, wait_for_retries_seconds=0)
    r = rows(ctx, oid)
    assert (r["convert"]["status"], r["index"]["status"]) == ("quarantined", "quarantined")
    assert r["convert"]["attempts"] == 1
    overruled = r["convert"]["last_error"]

    response = retry_quarantined(ctx, oid, stage="index", actor="tester")
    assert response.released_stage == "convert"
    assert response.requested_stage == "index"
    assert response.invalidated_stages == list(PIPELINE_STAGE_ORDER[2:])
    assert response.max_attempts == 3
    assert response.deterministic is True
    assert response.previous_error["class"] == "ValueError"
    assert response.previous_error["message"] == "convert refused"
    assert "traceback" not in response.previous_error

    r = rows(ctx, oid)
    assert r["fetch"]["status"] == "done"
    assert (r["convert"]["status"], r["convert"]["attempts"], r["convert"]["last_error"]) == ("pending", 0, None)
    for stage in PIPELINE_STAGE_ORDER[2:]:
        assert (r[stage]["status"], r[stage]["reason"], r[stage]["attempts"], r[stage]["producer_version"]) == (
            "skipped", WAITING_FOR_PREVIOUS_STAGE, 0, None)
    with ctx.db.engine.connect() as conn:
        audit = conn.execute(text("SELECT actor, action, source_object_id, details FROM audit_log")).all()
    assert len(audit) == 1
    actor, action, audit_oid, details = audit[0]
    assert (actor, action, audit_oid) == ("tester", "quarantine_retry", oid)
    assert details["released_stage"] == "convert"
    assert details["overruled_error"] == overruled
    assert details["overruled_error"]["traceback"]  # the full record is kept in the audit log
    # the other object is untouched
    assert buckets(ctx, ids[1]) == expected_done_buckets()

    monkeypatch.setitem(STAGE_HANDLERS, "convert", real["convert"])
    monkeypatch.setitem(STAGE_HANDLERS, "index", real["index"])
    summary = launch_insertion(ctx, trigger="quarantine_retry", wait_for_retries_seconds=0)
    assert summary.counters.quarantined == 0
    assert buckets(ctx, oid) == expected_done_buckets()
    assert rows(ctx, oid)["convert"]["attempts"] == 1


def test_quarantine_retry_of_a_bounded_failure_and_errors(ctx, src, monkeypatch):
    ids = make_source(ctx, src, 2)
    configure(ctx, stages__fetch__max_attempts=1)
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", raising(lambda: RuntimeError("flaky"), only={ids[0]}))
    run_stage_for_object(ctx, "fetch", ids[0])
    response = retry_quarantined(ctx, ids[0])
    assert (response.released_stage, response.requested_stage, response.deterministic, response.max_attempts) == (
        "fetch", None, False, 1)
    assert response.invalidated_stages == list(AFTER_FETCH)
    with pytest.raises(LookupError):
        retry_quarantined(ctx, ids[1])
    with pytest.raises(ValueError, match="unknown stage"):
        retry_quarantined(ctx, ids[0], stage="gen_evals")


def test_quarantine_retry_goes_through_launch_insertion_with_its_prepare_steps(ctx, src, monkeypatch):
    """``ki quarantine retry`` is a run like every trigger's: the run's prepare steps run first (here: a
    claim another host left silent is recovered), then only the released object's work is run."""
    a, b, c = make_source(ctx, src, 3)
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", raising(lambda: ValueError("refused"), only={a}, times=1,
                                                        then=STAGE_HANDLERS["fetch"]))
    launch_insertion(ctx, wait_for_retries_seconds=0)
    assert rows(ctx, a)["fetch"]["status"] == "quarantined"
    with ctx.db.engine.begin() as conn:  # b's index: claimed by a silent worker of another host
        conn.execute(text("""UPDATE processing_state SET status = 'running', claimed_by = 'elsewhere:1:1',
                                    claim_token = gen_random_uuid(), heartbeat_at = now() - interval '2 hours'
                             WHERE source_object_id = :b AND stage = 'index'"""), {"b": b})
        conn.execute(text("UPDATE processing_state SET status = 'pending' WHERE source_object_id = :c "
                          "AND stage = 'index'"), {"c": c})  # other pending work: not this retry's
    retry_quarantined(ctx, a, actor="tester")
    summary = launch_insertion(ctx, trigger="quarantine_retry", label="Retry", released_object=a,
                               wait_for_retries_seconds=0)
    assert summary.status == "completed"
    assert buckets(ctx, a) == expected_done_buckets()
    assert summary.counters.done == sum(1 for v in expected_done_buckets().values() if v == "done")
    recovered = rows(ctx, b)["index"]
    assert recovered["status"] == "failed" and recovered["last_error"]["class"] == "StaleClaim"  # prepare step
    assert rows(ctx, c)["index"]["status"] == "pending"  # left to its own run
    with ctx.db.engine.connect() as conn:
        run = conn.execute(text("SELECT label, trigger, status FROM pipeline_runs WHERE id = :id"),
                           {"id": summary.run_id}).one()
    assert tuple(run) == ("Retry", "quarantine_retry", "completed")
