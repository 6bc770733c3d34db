"""The attempt history (issue 18 item 1): every attempt kept, written with its outcome, never erased by a retry.

Real PostgreSQL; faults injected by replacing a stage handler. Cost: ~10 s.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from ki.core import errors
from ki.orchestration.execute import run_stage_for_object
from ki.orchestration.quarantine import retry_quarantined
from ki.stages import STAGE_HANDLERS
from ki.store import claims as q
from ki.store import stale_claims
from ki.store.attempts import history
from ki.store.signatures import error_signature
from tests.helpers.state import configure, make_source, raising, rows, run_when_due, sql


def _history(ctx, row_id):
    with ctx.db.engine.connect() as conn:
        return history(conn, row_id)


def test_every_attempt_is_kept_and_a_retry_erases_none(ctx, src, monkeypatch):
    (oid,) = make_source(ctx, src, 1)
    configure(ctx, retry_base_seconds=0.01, stages__fetch__max_attempts=2)
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", raising(lambda: RuntimeError(f"flaky read of {src}/doc000.txt")))
    assert run_when_due(ctx, "fetch", oid).kind == "retry"
    assert run_when_due(ctx, "fetch", oid).kind == "quarantined"
    row = rows(ctx, oid)["fetch"]
    entries = _history(ctx, row["id"])
    assert [(e.attempt, e.outcome, e.error_class) for e in entries] == [
        (1, "failed", "RuntimeError"), (2, "quarantined", "RuntimeError")]
    sig = error_signature("RuntimeError", row["reason"], "flaky read of /x/y.txt")
    assert {e.signature for e in entries} == {sig} == {row["last_error"]["signature"]}
    assert all(e.worker == ctx.worker_id and e.started_at is not None and e.duration_seconds >= 0
               and e.started_at <= e.finished_at for e in entries)
    assert entries[0].message == f"flaky read of {src}/doc000.txt"

    retry_quarantined(ctx, oid, actor="tester")
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", raising(lambda: None, only=set()))  # now it works
    assert run_stage_for_object(ctx, "fetch", oid).kind == "done"
    entries = _history(ctx, row["id"])
    assert [(e.attempt, e.outcome, e.actor) for e in entries] == [
        (1, "failed", None), (2, "quarantined", None), (2, "retried", "tester"), (1, "done", None)]
    assert entries[-1].producer_version == ctx.config.pipeline.producer_version("fetch")
    assert entries[-1].error_class is None
    # the row's error is cleared, the history keeps it
    assert rows(ctx, oid)["fetch"]["last_error"] is None
    assert entries[1].message.startswith("flaky read of")


def test_history_is_append_only(ctx, src):
    (oid,) = make_source(ctx, src, 1)
    assert run_stage_for_object(ctx, "fetch", oid).kind == "done"
    with pytest.raises(DBAPIError, match="append-only"):
        sql(ctx, "UPDATE work_item_attempt SET outcome = 'failed'")
    assert [e.outcome for e in _history(ctx, rows(ctx, oid)["fetch"]["id"])] == ["done"]


def test_infrastructure_and_skips_and_stale_claims_are_recorded(ctx, src, monkeypatch):
    a, b = make_source(ctx, src, 2)
    configure(ctx, retry_base_seconds=0.01)
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", raising(lambda: errors.SourceUnavailable("share /srv gone"),
                                                         only={a}))
    assert run_stage_for_object(ctx, "fetch", a).kind == "retry"
    (entry,) = _history(ctx, rows(ctx, a)["fetch"]["id"])
    assert entry.outcome == "failed" and entry.infrastructure is not None
    assert rows(ctx, a)["fetch"]["last_error"]["signature"] == entry.signature

    # a stale claim: recovery fails it and names the silent worker in the history
    with ctx.db.engine.begin() as conn:
        claim = q.claim_row(conn, b, "fetch", worker="ghost-worker", run_id=None)
    sql(ctx, "UPDATE processing_state SET heartbeat_at = now() - interval '1 hour' WHERE id = :id", id=claim.row_id)
    with ctx.db.engine.begin() as conn:
        assert stale_claims.recover_stale_claims(conn, timeout_seconds=60, max_attempts={"fetch": 3}) == 1
    (stale,) = _history(ctx, claim.row_id)
    assert (stale.outcome, stale.worker, stale.error_class, stale.signature) == (
        "stale", "ghost-worker", "StaleClaim", stale_claims.STALE_SIGNATURE)
    with ctx.db.engine.connect() as conn:
        n = conn.execute(text("SELECT count(*) FROM work_item_attempt")).scalar_one()
    assert n == 2
