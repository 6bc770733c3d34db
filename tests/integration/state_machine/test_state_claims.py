"""Claims, tokens and fencing: a claim increments attempts and writes a fresh token; a stale token's
completion is refused.

Spec: insertion-pipeline.md "Processing states and console buckets" (the claim query); DESIGN.md
"Leases with fencing" and "Exactly once".
"""

from __future__ import annotations

import logging
import time

from sqlalchemy import text

from ki.core.taxonomies import WAITING_FOR_PREVIOUS_STAGE
from ki.orchestration import prepare
from ki.orchestration.execute import execute_claim, run_stage_for_object
from ki.stages import STAGE_HANDLERS
from ki.store import claims as q
from ki.store import downstream
from ki.store.requeue import requeue_from_fetch
from ki.store.status import lost_claim
from tests.helpers.state import configure, make_source, raising, rows, sql


def test_claim_increments_attempts_and_writes_a_fresh_token(ctx, src):
    (oid,) = make_source(ctx, src, 1)
    with ctx.db.engine.begin() as conn:
        first = q.claim_row(conn, oid, "fetch", worker="worker-a", run_id=None)
    assert first is not None and first.attempts == 1
    r = rows(ctx, oid)["fetch"]
    assert r["status"] == "running"
    assert r["attempts"] == 1
    assert r["claim_token"] == first.token
    assert r["claimed_by"] == "worker-a"
    assert r["heartbeat_at"] is not None and r["claimed_at"] is not None
    # a running row cannot be claimed by a second worker
    with ctx.db.engine.begin() as conn:
        assert q.claim_row(conn, oid, "fetch", worker="worker-b", run_id=None) is None
        assert q.claim_next(conn, worker="worker-b", run_id=None) == []
        assert q.fail_claim(conn, first, treatment="retry", max_attempts=3, delay_seconds=0,
                            last_error={"class": "X"}) == "failed"
    with ctx.db.engine.begin() as conn:
        second = q.claim_next(conn, worker="worker-b", run_id=None)
    assert len(second) == 1
    assert second[0].row_id == first.row_id
    assert second[0].attempts == 2
    assert second[0].token != first.token
    r = rows(ctx, oid)["fetch"]
    assert (r["attempts"], r["claim_token"], r["claimed_by"], r["next_retry_at"]) == (
        2, second[0].token, "worker-b", None)


def test_claim_next_takes_the_oldest_and_skips_locked_rows(ctx, src):
    ids = make_source(ctx, src, 3)
    sql(ctx, "UPDATE processing_state SET updated_at = now() - interval '1 hour' "
             "WHERE source_object_id = :id AND stage = 'fetch'", id=ids[2])
    sql(ctx, "UPDATE processing_state SET updated_at = now() - interval '30 minutes' "
             "WHERE source_object_id = :id AND stage = 'fetch'", id=ids[1])
    # a concurrent transaction holds the oldest row: the claim skips it instead of waiting
    with ctx.db.engine.connect() as locker:
        locker.execute(text("SELECT id FROM processing_state WHERE source_object_id = :id AND stage = 'fetch' "
                            "FOR UPDATE"), {"id": ids[2]})
        with ctx.db.engine.begin() as conn:
            conn.execute(text("SET LOCAL lock_timeout = '2s'"))
            claimed = q.claim_next(conn, worker="w", run_id=None)
        assert [c.source_object_id for c in claimed] == [ids[1]]
        locker.rollback()
    with ctx.db.engine.begin() as conn:
        claimed = q.claim_next(conn, worker="w", run_id=None)
    assert [c.source_object_id for c in claimed] == [ids[2]]


def test_failed_row_is_claimable_only_when_its_retry_is_due(ctx, src):
    (oid,) = make_source(ctx, src, 1)
    with ctx.db.engine.begin() as conn:
        claim = q.claim_row(conn, oid, "fetch", worker="w", run_id=None)
        q.fail_claim(conn, claim, treatment="retry", max_attempts=3, delay_seconds=3600,
                     last_error={"class": "RuntimeError"})
    assert run_stage_for_object(ctx, "fetch", oid).kind == "not_claimed"
    sql(ctx, "UPDATE processing_state SET next_retry_at = now() - interval '1 second' "
             "WHERE source_object_id = :id AND stage = 'fetch'", id=oid)
    assert run_stage_for_object(ctx, "fetch", oid).kind == "done"
    assert rows(ctx, oid)["fetch"]["attempts"] == 2


def test_completion_with_a_stale_token_is_refused(ctx, src, monkeypatch):
    (oid,) = make_source(ctx, src, 1)
    configure(ctx, claim_timeout_seconds=1)
    with ctx.db.engine.begin() as conn:
        old = q.claim_row(conn, oid, "fetch", worker="dead-worker", run_id=None)
    time.sleep(1.1)  # the old worker goes silent past claim_timeout_seconds
    assert prepare.recover_stale_claims(ctx) == 1
    recovered = rows(ctx, oid)["fetch"]
    assert recovered["status"] == "failed"
    assert recovered["last_error"]["class"] == "StaleClaim"

    # a new worker claims and finishes the row
    assert run_stage_for_object(ctx, "fetch", oid).kind == "done"
    before = rows(ctx, oid)
    assert before["fetch"]["attempts"] == 2
    assert before["fetch"]["completions"] == 1

    # the old worker wakes up and tries to commit: refused, nothing changes
    result = execute_claim(ctx, old)
    assert result.kind == "claim_lost"
    assert rows(ctx, oid) == before

    # the same holds for a failure recorded under the old token
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", raising(lambda: RuntimeError("late failure from the dead worker")))
    result = execute_claim(ctx, old)
    assert (result.kind, result.error_class) == ("claim_lost", "RuntimeError")
    assert rows(ctx, oid) == before
    with ctx.db.engine.connect() as conn:
        assert conn.execute(text("SELECT sum(completions) FROM processing_state WHERE stage = 'fetch'")).scalar() == 1


def test_stale_token_is_refused_while_the_new_claim_runs(ctx, src):
    (oid,) = make_source(ctx, src, 1)
    with ctx.db.engine.begin() as conn:
        old = q.claim_row(conn, oid, "fetch", worker="dead", run_id=None)
    sql(ctx, "UPDATE processing_state SET heartbeat_at = now() - interval '2 hours' WHERE id = :id", id=old.row_id)
    assert prepare.recover_stale_claims(ctx) == 1
    with ctx.db.engine.begin() as conn:
        new = q.claim_row(conn, oid, "fetch", worker="alive", run_id=None)
    assert new.token != old.token and new.attempts == 2
    assert execute_claim(ctx, old).kind == "claim_lost"
    r = rows(ctx, oid)
    assert (r["fetch"]["status"], r["fetch"]["claim_token"], r["fetch"]["completions"]) == ("running", new.token, 0)
    assert r["convert"]["reason"] == WAITING_FOR_PREVIOUS_STAGE  # the refused completion unlocked nothing
    assert execute_claim(ctx, new).kind == "done"
    r = rows(ctx, oid)
    assert (r["fetch"]["status"], r["fetch"]["completions"], r["convert"]["status"]) == ("done", 1, "pending")


def test_a_refused_completion_says_why(ctx, src, caplog):
    """A refused completion names its cause (ki.store.status.lost_claim): a recovered lease is a warning, a
    rerun or a change the pipeline asked for itself is logged at info (it is routine, not a fault)."""
    oid, other = make_source(ctx, src, 2)
    exec_log = "ki.orchestration.execute"

    def refused(claim) -> tuple[str, int, str]:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=exec_log):
            assert execute_claim(ctx, claim).kind == "claim_lost"
        (record,) = [r for r in caplog.records if r.name == exec_log and "discarded" in r.getMessage()]
        with ctx.db.engine.connect() as conn:
            cause = lost_claim(conn, claim.row_id, claim.token).cause
        return cause, record.levelno, record.getMessage()

    # a lease recovered as stale: a warning that names the silent worker
    with ctx.db.engine.begin() as conn:
        old = q.claim_row(conn, oid, "fetch", worker="silent-worker", run_id=None)
    sql(ctx, "UPDATE processing_state SET heartbeat_at = now() - interval '2 hours' WHERE id = :id", id=old.row_id)
    assert prepare.recover_stale_claims(ctx) == 1
    cause, level, message = refused(old)
    assert (cause, level) == ("stale", logging.WARNING)
    assert "lease was recovered" in message and "silent-worker" in message

    # the same row claimed again by another worker
    with ctx.db.engine.begin() as conn:
        new = q.claim_row(conn, oid, "fetch", worker="alive", run_id=None)
    cause, level, message = refused(old)
    assert (cause, level) == ("reclaimed", logging.WARNING) and "lease was recovered" in message
    assert "worker alive" in message

    # another file's stage asked for this one again: routine
    with ctx.db.engine.begin() as conn:
        assert downstream.request_rerun(conn, [oid], "fetch") == 1
    cause, level, message = refused(new)
    assert (cause, level) == ("rerun", logging.INFO) and "asked for it again" in message
    with ctx.db.engine.begin() as conn:  # ... and still routine once another worker runs the rerun
        q.claim_row(conn, oid, "fetch", worker="rerunner", run_id=None)
    cause, level, message = refused(new)
    assert (cause, level) == ("rerun", logging.INFO) and "worker rerunner" in message

    # the file changed while its stage ran: routine, it starts again from fetch
    with ctx.db.engine.begin() as conn:
        running = q.claim_row(conn, other, "fetch", worker="alive", run_id=None)
        requeue_from_fetch(conn, [other])
    cause, level, message = refused(running)
    assert (cause, level) == ("changed", logging.INFO) and "changed" in message
    assert rows(ctx, other)["fetch"]["status"] == "pending"  # the refusal wrote nothing
    with ctx.db.engine.begin() as conn:
        q.claim_row(conn, other, "fetch", worker="next", run_id=None)
    cause, level, message = refused(running)
    assert (cause, level) == ("changed", logging.INFO) and "worker next" in message
