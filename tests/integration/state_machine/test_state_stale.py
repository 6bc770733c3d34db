"""Stale claims: a silent claim is failed (due now) or quarantined at its attempt limit; renewal keeps it.

Spec: insertion-pipeline.md "Stale claims"; DESIGN.md "Leases with fencing".
"""

from __future__ import annotations

from sqlalchemy import text

from ki.orchestration import prepare
from ki.orchestration.execute import run_stage_for_object
from ki.orchestration.heartbeat import ClaimKeeper
from ki.store import claims as q
from tests.helpers.state import configure, make_source, rows, sql


def test_stale_claim_is_failed_and_due_now(ctx, src):
    ids = make_source(ctx, src, 2)
    with ctx.db.engine.begin() as conn:
        stale = q.claim_row(conn, ids[0], "fetch", worker="host:123", run_id=None)
        fresh = q.claim_row(conn, ids[1], "fetch", worker="host:456", run_id=None)
    sql(ctx, "UPDATE processing_state SET heartbeat_at = now() - interval '20 minutes' WHERE id = :id",
        id=stale.row_id)
    assert prepare.recover_stale_claims(ctx) == 1  # default claim_timeout_seconds 900
    row = rows(ctx, ids[0])["fetch"]
    assert row["status"] == "failed"
    assert row["claim_token"] is None and row["claimed_by"] is None
    err = row["last_error"]
    assert err["class"] == "StaleClaim"
    assert "host:123" in err["message"] and "900" in err["message"]
    assert (err["deterministic"], err["infrastructure"]) == (False, None)
    with ctx.db.engine.connect() as conn:
        assert conn.execute(text("SELECT next_retry_at <= now() FROM processing_state WHERE id = :id"),
                            {"id": stale.row_id}).scalar() is True
    assert rows(ctx, ids[1])["fetch"]["claim_token"] == fresh.token  # a live claim is left alone
    # retried immediately with the next attempt
    assert run_stage_for_object(ctx, "fetch", ids[0]).kind == "done"
    assert rows(ctx, ids[0])["fetch"]["attempts"] == 2


def test_stale_claim_at_the_attempt_limit_is_quarantined(ctx, src):
    ids = make_source(ctx, src, 2)
    configure(ctx, stages__fetch__max_attempts=2)
    with ctx.db.engine.begin() as conn:
        a = q.claim_row(conn, ids[0], "fetch", worker="w", run_id=None)
        q.fail_claim(conn, a, treatment="retry", max_attempts=2, delay_seconds=0, last_error={"class": "RuntimeError"})
    with ctx.db.engine.begin() as conn:
        a2 = q.claim_row(conn, ids[0], "fetch", worker="w", run_id=None)  # attempt 2 of 2
        b = q.claim_row(conn, ids[1], "fetch", worker="w", run_id=None)  # attempt 1 of 2
    assert (a2.attempts, b.attempts) == (2, 1)
    sql(ctx, "UPDATE processing_state SET heartbeat_at = now() - interval '2 hours' WHERE status = 'running'")
    assert prepare.recover_stale_claims(ctx) == 2
    ra, rb = rows(ctx, ids[0])["fetch"], rows(ctx, ids[1])["fetch"]
    assert (ra["status"], ra["last_error"]["class"], ra["attempts"]) == ("quarantined", "StaleClaim", 2)
    assert (rb["status"], rb["last_error"]["class"], rb["attempts"]) == ("failed", "StaleClaim", 1)


def test_renewed_claim_does_not_go_stale(ctx, src):
    (oid,) = make_source(ctx, src, 1)
    with ctx.db.engine.begin() as conn:
        claim = q.claim_row(conn, oid, "fetch", worker="w", run_id=None)
    keeper = ClaimKeeper(ctx.db, interval_seconds=60)
    keeper.add(claim)
    sql(ctx, "UPDATE processing_state SET heartbeat_at = now() - interval '2 hours' WHERE id = :id", id=claim.row_id)
    assert keeper.renew_all() == 1
    assert prepare.recover_stale_claims(ctx) == 0
    assert rows(ctx, oid)["fetch"]["status"] == "running"
    keeper.discard(claim)
    assert keeper.renew_all() == 0
