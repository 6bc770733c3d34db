"""The durable per-document state machine on a real PostgreSQL.

Spec: insertion-pipeline.md "Processing states and console buckets", "Retry
policy and quarantine", "producer_version semantics", "Orchestration";
DESIGN.md "Leases with fencing" and "Exactly once".

Faults are injected into our own stages by replacing a handler in
``ki.stages.STAGE_HANDLERS`` (monkeypatch.setitem); the store is never mocked.
Some faults are real: a deleted file, a too-large file.
"""

from __future__ import annotations

import itertools
import threading
import time
import traceback
from collections import Counter
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from ki import errors
from ki.config.loader import set_config_value
from ki.context import PipelineContext, StageContext, StageOutcome, unlock_plan
from ki.errors import OrchestratorUnavailable
from ki.launch import launch_insertion
from ki.orchestration import prepare
from ki.orchestration.execute import (
    MESSAGE_MAX_CHARS,
    TRACEBACK_MAX_CHARS,
    execute_claim,
    run_stage_for_object,
)
from ki.orchestration.heartbeat import ClaimKeeper
from ki.orchestration.quarantine import list_quarantine, retry_quarantined
from ki.orchestration.runner import PipelineRunner
from ki.sources.scan import register_local_source, scan_source
from ki.stages import STAGE_HANDLERS
from ki.store import claims as q
from ki.store.db import open_database
from ki.store.status import bucket_counts
from ki.taxonomies import (
    DISABLED_BY_CONFIGURATION,
    INPUT_STAGE_DISABLED,
    MODEL_STAGES,
    PIPELINE_STAGE_ORDER,
    STAGE_BUCKET_SQL,
    WAITING_FOR_PREVIOUS_STAGE,
    stage_bucket,
)

AFTER_FETCH = PIPELINE_STAGE_ORDER[1:]
MODEL_STAGE_LIST = [s for s in PIPELINE_STAGE_ORDER if s in MODEL_STAGES]


# --- helpers -------------------------------------------------------------------------------------


def make_source(ctx: PipelineContext, root: Path, n: int, *, prefix: str = "doc") -> list[int]:
    """Write ``n`` small distinct .txt files under ``root``, register and scan; return object ids in order."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"{prefix}{i:03d}.txt").write_text(
            f"Schreiben Nr. {i} an die Mandantschaft.\nVertrag über Lieferung von {i} Einheiten.\n",
            encoding="utf-8",
        )
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    return object_ids(ctx, sid, prefix)


def object_ids(ctx: PipelineContext, source_id: int, prefix: str = "") -> list[int]:
    with ctx.db.engine.connect() as conn:
        return [r.id for r in conn.execute(
            text("SELECT id FROM source_object WHERE source_id = :s AND external_id LIKE :p ORDER BY external_id"),
            {"s": source_id, "p": prefix + "%"},
        )]


def rows(ctx: PipelineContext, oid: int) -> dict[str, dict]:
    """stage → the processing_state row (as a dict) of one object."""
    with ctx.db.engine.connect() as conn:
        result = conn.execute(
            text("SELECT * FROM processing_state WHERE source_object_id = :id"), {"id": oid}
        ).mappings().all()
    return {r["stage"]: dict(r) for r in result}


def all_rows(ctx: PipelineContext) -> list[dict]:
    with ctx.db.engine.connect() as conn:
        return [dict(r) for r in conn.execute(text("SELECT * FROM processing_state")).mappings()]


def buckets(ctx: PipelineContext, oid: int) -> dict[str, str]:
    return {s: stage_bucket(r["status"], r["reason"]) for s, r in rows(ctx, oid).items()}


def configure(ctx: PipelineContext, **values) -> None:
    """Save ``pipeline.*`` edits (``stages__fetch__max_attempts=2`` style keys) and reload."""
    for key, value in values.items():
        set_config_value(ctx.settings.data_dir, "pipeline." + key.replace("__", "."), value)
    ctx.reload_config()


def sql(ctx: PipelineContext, statement: str, **params) -> None:
    with ctx.db.engine.begin() as conn:
        conn.execute(text(statement), params)


def run_all(ctx: PipelineContext, oid: int) -> dict[str, str]:
    """Run every stage of one object in order with run_stage_for_object; stage → result kind."""
    return {s: run_stage_for_object(ctx, s, oid).kind for s in PIPELINE_STAGE_ORDER}


def run_when_due(ctx: PipelineContext, stage: str, oid: int, *, timeout: float = 5.0):
    """Call run_stage_for_object until the row is claimable (its retry fell due)."""
    deadline = time.monotonic() + timeout
    while True:
        result = run_stage_for_object(ctx, stage, oid)
        if result.kind != "not_claimed" or time.monotonic() > deadline:
            return result
        time.sleep(0.01)


def complete_fenced(ctx: PipelineContext, oid: int, stage: str, plan: q.UnlockPlan) -> q.Completion | None:
    """Claim the (object, stage) row and record it done with ``plan`` (q.complete_claim), as the executor does."""
    with ctx.db.engine.begin() as conn:
        claim = q.claim_row(conn, oid, stage, worker=ctx.worker_id, run_id=None)
    assert claim is not None
    with ctx.db.engine.begin() as conn:
        return q.complete_claim(
            conn, claim, status="done", producer_version=ctx.config.pipeline.producer_version(stage),
            last_error=None, unlock=plan,
        )


def raising(exc_factory, *, only: set[int] | None = None, times: int | None = None, then=None):
    """A stage handler that raises ``exc_factory()`` (for objects in ``only``, the first ``times`` calls),
    else delegates to ``then``."""
    calls = itertools.count()
    lock = threading.Lock()

    def handler(sctx: StageContext) -> StageOutcome:
        if only is None or sctx.obj.id in only:
            with lock:
                n = next(calls)
            if times is None or n < times:
                raise exc_factory()
        if then is None:
            return StageOutcome(status="done")
        return then(sctx)

    return handler


def expected_done_buckets() -> dict[str, str]:
    """A document that went all the way in this release: model stages disabled, the rest done."""
    return {s: ("disabled" if s in MODEL_STAGES else "done") for s in PIPELINE_STAGE_ORDER}


@pytest.fixture
def src(tmp_path) -> Path:
    return tmp_path / "share"


@pytest.fixture(autouse=True)
def _model_stages_off(data_dir):
    """These tests exercise the state machine, not the model stages: they run with those switched off in
    the saved configuration (written before any context of the test loads it), the model stages standing
    in for "a disabled stage"."""
    for stage in MODEL_STAGES:
        set_config_value(data_dir, f"pipeline.stages.{stage}.enabled", False)


# --- seeding and unlocking -----------------------------------------------------------------------


def test_scan_seeds_fetch_pending_and_every_later_stage_waiting(ctx, src):
    ids = make_source(ctx, src, 3)
    assert len(ids) == 3
    for oid in ids:
        r = rows(ctx, oid)
        assert list(sorted(r)) == sorted(PIPELINE_STAGE_ORDER)
        assert (r["fetch"]["status"], r["fetch"]["last_error"], r["fetch"]["attempts"]) == ("pending", None, 0)
        for stage in AFTER_FETCH:
            assert r[stage]["status"] == "skipped"
            assert r[stage]["last_error"] == {"reason": WAITING_FOR_PREVIOUS_STAGE}
            assert r[stage]["reason"] == WAITING_FOR_PREVIOUS_STAGE
            assert r[stage]["attempts"] == 0
            assert r[stage]["producer_version"] is None
    with ctx.db.engine.connect() as conn:
        counts = bucket_counts(conn)
    assert counts["fetch"]["pending"] == 3
    for stage in AFTER_FETCH:
        assert counts[stage]["waiting"] == 3
        assert sum(counts[stage].values()) == 3
    # a rescan of unchanged files seeds nothing twice
    scan_source(ctx, register_local_source(ctx, src))
    assert len(all_rows(ctx)) == 3 * len(PIPELINE_STAGE_ORDER)


def test_completion_unlocks_only_the_next_waiting_row(ctx, src):
    (oid,) = make_source(ctx, src, 1)
    assert run_stage_for_object(ctx, "fetch", oid).kind == "done"
    r = rows(ctx, oid)
    assert r["fetch"]["status"] == "done"
    assert r["fetch"]["producer_version"] == "mvp-1"
    assert r["fetch"]["completions"] == 1
    assert r["fetch"]["claim_token"] is None
    assert r["fetch"]["last_error"] is None
    assert (r["convert"]["status"], r["convert"]["last_error"], r["convert"]["attempts"]) == ("pending", None, 0)
    assert all(r[s]["reason"] == WAITING_FOR_PREVIOUS_STAGE for s in PIPELINE_STAGE_ORDER[2:])

    # _unlock_next (complete_claim's unlock) does nothing to a row that is not waiting: fetch
    # finishes again (its row put back to pending here) while convert is already pending
    fetch_plan = unlock_plan(ctx.config.pipeline, "fetch")
    assert fetch_plan == q.UnlockPlan((), "convert")
    sql(ctx, "UPDATE processing_state SET status = 'pending' WHERE source_object_id = :id AND stage = 'fetch'", id=oid)
    before = rows(ctx, oid)
    assert complete_fenced(ctx, oid, "fetch", fetch_plan) == q.Completion(passed=0)
    after = rows(ctx, oid)
    assert (after["fetch"]["status"], after["fetch"]["completions"]) == ("done", 2)
    assert {s: row for s, row in after.items() if s != "fetch"} == {s: row for s, row in before.items() if s != "fetch"}

    # with only classify_matter switched on, finishing convert flips exactly that row
    configure(ctx, stages__classify_matter__enabled=True)
    ctx.reload_config()
    assert run_stage_for_object(ctx, "convert", oid).kind == "done"
    r = rows(ctx, oid)
    assert (r["classify_matter"]["status"], r["classify_matter"]["attempts"]) == ("pending", 0)
    assert all(r[s]["reason"] == WAITING_FOR_PREVIOUS_STAGE for s in PIPELINE_STAGE_ORDER[3:])
    # switched-off stages after a finished one are recorded on the way, in the same statement
    # (skipped/disabled_by_configuration with their producer_version, never claimed), and the
    # next enabled stage becomes pending
    configure(ctx, stages__classify_matter__enabled=False)
    ctx.reload_config()
    assert run_stage_for_object(ctx, "classify_matter", oid).kind == "skipped"  # pending already: claimed
    r = rows(ctx, oid)
    assert r["classify_matter"]["reason"] == DISABLED_BY_CONFIGURATION
    for s in ("relate", "extract_metadata", "extract_decisions"):
        assert (r[s]["status"], r[s]["reason"], r[s]["attempts"], r[s]["completions"]) == (
            "skipped", DISABLED_BY_CONFIGURATION, 0, 0)
        assert r[s]["producer_version"] == ctx.config.pipeline.producer_version(s)
    assert (r["index"]["status"], r["index"]["attempts"]) == ("pending", 0)

    # and nothing after the last stage: finishing index unlocks nothing
    assert unlock_plan(ctx.config.pipeline, "extract_decisions") == q.UnlockPlan((), "index")
    index_plan = unlock_plan(ctx.config.pipeline, "index")
    assert index_plan == q.UnlockPlan((), None)
    assert complete_fenced(ctx, oid, "index", index_plan) == q.Completion(passed=0)
    after = rows(ctx, oid)
    assert (after["index"]["status"], after["index"]["completions"]) == ("done", 1)
    assert {s: row for s, row in after.items() if s != "index"} == {s: row for s, row in r.items() if s != "index"}

    # stages that are waiting are not claimable
    (other,) = make_source(ctx, src, 1, prefix="other")
    assert run_stage_for_object(ctx, "index", other).kind == "not_claimed"
    assert rows(ctx, other)["index"]["attempts"] == 0
    # a done stage is not claimed again (a replayed task is harmless)
    assert run_stage_for_object(ctx, "fetch", oid).kind == "not_claimed"
    assert rows(ctx, oid)["fetch"]["completions"] == 2  # the run plus the finish above


def test_full_object_with_run_stage_for_object(ctx, src):
    (oid,) = make_source(ctx, src, 1)
    # the switched-off model stages are recorded when convert finishes, never claimed
    assert run_all(ctx, oid) == {s: ("not_claimed" if s in MODEL_STAGES else "done") for s in PIPELINE_STAGE_ORDER}
    assert buckets(ctx, oid) == expected_done_buckets()
    r = rows(ctx, oid)
    for stage in PIPELINE_STAGE_ORDER:
        assert r[stage]["producer_version"] == ctx.config.pipeline.producer_version(stage)
        assert r[stage]["attempts"] == (0 if stage in MODEL_STAGES else 1)
    with ctx.db.engine.connect() as conn:
        chunks = conn.execute(text("SELECT count(*) FROM chunk WHERE source_object_id = :id"), {"id": oid}).scalar()
    assert chunks >= 1


def test_bucket_counts_equal_stage_bucket_in_python(ctx, src, monkeypatch):
    ids = make_source(ctx, src, 8)
    configure(ctx, retry_base_seconds=60)
    real_convert = STAGE_HANDLERS["convert"]

    def convert(sctx):
        if sctx.obj.id == ids[1]:
            raise errors.UnsupportedDocument("corrupt", reason="corrupt")
        if sctx.obj.id == ids[2]:
            raise RuntimeError("transient")
        if sctx.obj.id == ids[3]:
            return StageOutcome(status="skipped", reason="no_text")
        return real_convert(sctx)

    monkeypatch.setitem(STAGE_HANDLERS, "convert", convert)
    for oid in ids[:5]:
        run_all(ctx, oid)
    # ids[5]: fetched only; ids[6]: fetch held by a worker; ids[7]: untouched
    run_stage_for_object(ctx, "fetch", ids[5])
    with ctx.db.engine.begin() as conn:
        assert q.claim_row(conn, ids[6], "fetch", worker="w", run_id=None) is not None

    table = all_rows(ctx)
    python = Counter((r["stage"], stage_bucket(r["status"], r["reason"])) for r in table)
    with ctx.db.engine.connect() as conn:
        counts = bucket_counts(conn)
        # the same CASE expression as text (GET /api/status uses it) agrees row by row
        per_row = {
            r.id: r.bucket for r in conn.execute(text(f"SELECT id, {STAGE_BUCKET_SQL} AS bucket FROM processing_state"))
        }
    for r in table:
        assert per_row[r["id"]] == stage_bucket(r["status"], r["reason"])
    for stage in PIPELINE_STAGE_ORDER:
        for bucket, n in counts[stage].items():
            assert n == python.get((stage, bucket), 0), (stage, bucket)
    # the fixture really produced every bucket
    seen = {b for (_, b) in python}
    assert seen == {"pending", "running", "done", "failed", "waiting", "disabled", "skipped", "quarantined"}
    assert counts["fetch"] == {"pending": 1, "running": 1, "done": 6, "failed": 0, "waiting": 0, "disabled": 0,
                               "skipped": 0, "quarantined": 0}
    assert counts["convert"]["quarantined"] == 1
    assert counts["convert"]["failed"] == 1
    assert counts["convert"]["skipped"] == 1
    assert counts["convert"]["done"] == 2
    assert counts["convert"]["pending"] == 1
    assert counts["convert"]["waiting"] == 2


# --- claims, tokens and fencing ------------------------------------------------------------------


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


# --- retry policy --------------------------------------------------------------------------------


def test_backoff_is_written_to_next_retry_at(ctx, src, monkeypatch):
    (oid,) = make_source(ctx, src, 1)
    configure(ctx, retry_base_seconds=0.05, stages__fetch__max_attempts=5)
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", raising(lambda: RuntimeError("flaky")))
    for attempt in range(1, 5):
        result = run_when_due(ctx, "fetch", oid)
        assert (result.kind, result.error_class) == ("retry", "RuntimeError")
        r = rows(ctx, oid)["fetch"]
        assert r["status"] == "failed"
        assert r["attempts"] == attempt
        # both columns are written by the same statement, so the difference is the backoff exactly
        assert r["next_retry_at"] - r["updated_at"] == timedelta(seconds=0.05 * 2 ** (attempt - 1))
        assert r["last_error"]["class"] == "RuntimeError"
        assert r["last_error"]["deterministic"] is False
        assert r["last_error"]["infrastructure"] is None
        assert r["claim_token"] is None
    result = run_when_due(ctx, "fetch", oid)
    assert result.kind == "quarantined"
    r = rows(ctx, oid)["fetch"]
    assert (r["status"], r["attempts"], r["next_retry_at"]) == ("quarantined", 5, None)


def test_default_backoff_is_5_then_10_seconds(ctx, src, monkeypatch):
    (oid,) = make_source(ctx, src, 1)
    assert ctx.config.pipeline.retry_base_seconds == 5
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", raising(lambda: errors.RetryableStageError("not yet")))
    assert run_stage_for_object(ctx, "fetch", oid).kind == "retry"
    r = rows(ctx, oid)["fetch"]
    assert r["next_retry_at"] - r["updated_at"] == timedelta(seconds=5)
    sql(ctx, "UPDATE processing_state SET next_retry_at = now() WHERE id = :id", id=r["id"])
    assert run_stage_for_object(ctx, "fetch", oid).kind == "retry"
    r = rows(ctx, oid)["fetch"]
    assert r["next_retry_at"] - r["updated_at"] == timedelta(seconds=10)
    sql(ctx, "UPDATE processing_state SET next_retry_at = now() WHERE id = :id", id=r["id"])
    assert run_stage_for_object(ctx, "fetch", oid).kind == "quarantined"  # default max_attempts 3


def _raise_chained(message: str):
    try:
        raise RuntimeError("gateway body: " + "y" * 3000)
    except RuntimeError as inner:
        raise ValueError(message) from inner


def test_deterministic_error_quarantines_on_attempt_one_with_its_record(ctx, src, monkeypatch):
    (oid,) = make_source(ctx, src, 1)
    configure(ctx, stages__fetch__max_attempts=10)
    message = "the model returned a value the schema cannot hold: " + "x" * 5000

    def handler(sctx):
        _raise_chained(message)

    monkeypatch.setitem(STAGE_HANDLERS, "fetch", handler)
    result = run_stage_for_object(ctx, "fetch", oid)
    assert (result.kind, result.error_class) == ("quarantined", "ValueError")
    r = rows(ctx, oid)
    row = r["fetch"]
    assert (row["status"], row["attempts"], row["next_retry_at"], row["claim_token"]) == ("quarantined", 1, None, None)
    err = row["last_error"]
    assert err["class"] == "ValueError"
    assert err["message"] == message[:MESSAGE_MAX_CHARS]
    assert len(err["message"]) == 2000
    assert len(err["traceback"]) == TRACEBACK_MAX_CHARS == 6000
    assert err["traceback"].endswith(f"ValueError: {message}\n")  # the tail, not the head
    assert not err["traceback"].startswith("Traceback (most recent call last)")
    assert err["deterministic"] is True
    assert err["infrastructure"] is None
    assert err["reason"] is None
    assert row["producer_version"] is None
    # downstream stays parked; quarantine is terminal for the claim machinery
    assert all(r[s]["reason"] == WAITING_FOR_PREVIOUS_STAGE for s in AFTER_FETCH)
    assert run_stage_for_object(ctx, "fetch", oid).kind == "not_claimed"
    entry = list_quarantine(ctx)
    assert [(e.source_object_id, e.stage, e.attempts) for e in entry] == [(oid, "fetch", 1)]
    assert "traceback" not in entry[0].error
    assert entry[0].error["class"] == "ValueError"


def test_short_traceback_is_kept_whole(ctx, src, monkeypatch):
    (oid,) = make_source(ctx, src, 1)
    exc = errors.UnsupportedDocument("PDF header missing", reason="corrupt", details={"pages": 0})
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", raising(lambda: exc))
    assert run_stage_for_object(ctx, "fetch", oid).kind == "quarantined"
    err = rows(ctx, oid)["fetch"]["last_error"]
    assert err["traceback"].startswith("Traceback (most recent call last)")
    assert err["traceback"] == "".join(traceback.format_exception(exc))
    assert (err["class"], err["message"], err["reason"], err["details"]) == (
        "UnsupportedDocument", "PDF header missing", "corrupt", {"pages": 0})
    assert rows(ctx, oid)["fetch"]["reason"] == "corrupt"


def test_real_missing_file_quarantines_as_source_missing(ctx, src):
    ids = make_source(ctx, src, 2)
    (src / "doc000.txt").unlink()
    assert run_stage_for_object(ctx, "fetch", ids[0]).kind == "quarantined"
    assert run_stage_for_object(ctx, "fetch", ids[1]).kind == "done"
    err = rows(ctx, ids[0])["fetch"]["last_error"]
    assert (err["class"], err["reason"], err["deterministic"], err["infrastructure"]) == (
        "FileNotFoundError", "source_missing", True, None)
    assert rows(ctx, ids[0])["fetch"]["attempts"] == 1


def test_real_oversized_file_quarantines_as_too_large(ctx, src):
    (oid,) = make_source(ctx, src, 1)
    (src / "doc000.txt").write_bytes(b"a" * ((1 << 20) + 10))
    configure(ctx, max_file_mb=1)
    assert run_stage_for_object(ctx, "fetch", oid).kind == "quarantined"
    row = rows(ctx, oid)["fetch"]
    assert (row["attempts"], row["last_error"]["class"], row["last_error"]["reason"]) == (
        1, "ArtifactTooLarge", "too_large")
    assert row["last_error"]["deterministic"] is True


@pytest.mark.parametrize(
    "factory",
    [
        lambda: errors.RetryableStageError("matter assignment missing"),
        lambda: errors.ModelOutputInvalid("submit_result never validated"),
        lambda: RuntimeError("bug"),
        lambda: httpx.HTTPStatusError("bad request", request=httpx.Request("POST", "http://g.invalid"),
                                      response=httpx.Response(400, request=httpx.Request("POST", "http://g.invalid"))),
    ],
    ids=["RetryableStageError", "ModelOutputInvalid", "RuntimeError", "HTTP400"],
)
def test_other_errors_retry_up_to_max_attempts_then_quarantine(ctx, src, monkeypatch, factory):
    (oid,) = make_source(ctx, src, 1)
    configure(ctx, retry_base_seconds=0.01, stages__fetch__max_attempts=3)
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", raising(factory))
    kinds = [run_when_due(ctx, "fetch", oid).kind for _ in range(3)]
    assert kinds == ["retry", "retry", "quarantined"]
    row = rows(ctx, oid)["fetch"]
    assert (row["status"], row["attempts"]) == ("quarantined", 3)
    assert row["last_error"]["class"] == type(factory()).__name__
    assert row["last_error"]["deterministic"] is False
    assert row["last_error"]["infrastructure"] is None
    assert run_stage_for_object(ctx, "fetch", oid).kind == "not_claimed"


def test_max_attempts_is_per_stage(ctx, src, monkeypatch):
    (oid,) = make_source(ctx, src, 1)
    configure(ctx, retry_base_seconds=0.01, stages__convert__max_attempts=1)
    monkeypatch.setitem(STAGE_HANDLERS, "convert", raising(lambda: RuntimeError("once")))
    assert run_stage_for_object(ctx, "fetch", oid).kind == "done"
    assert run_stage_for_object(ctx, "convert", oid).kind == "quarantined"
    assert rows(ctx, oid)["convert"]["attempts"] == 1


def test_retry_that_succeeds_records_done_and_clears_the_error(ctx, src, monkeypatch):
    (oid,) = make_source(ctx, src, 1)
    configure(ctx, retry_base_seconds=0.01)
    monkeypatch.setitem(STAGE_HANDLERS, "fetch",
                        raising(lambda: RuntimeError("once"), times=1, then=STAGE_HANDLERS["fetch"]))
    assert run_when_due(ctx, "fetch", oid).kind == "retry"
    assert run_when_due(ctx, "fetch", oid).kind == "done"
    row = rows(ctx, oid)["fetch"]
    assert (row["status"], row["attempts"], row["last_error"], row["next_retry_at"], row["completions"]) == (
        "done", 2, None, None, 1)


@pytest.mark.parametrize(
    ("factory", "infrastructure", "reason"),
    [
        (lambda: errors.SourceUnavailable("share gone", infrastructure="source root missing: /mnt/x"),
         "source root missing: /mnt/x", "source_missing"),
        (lambda: httpx.ConnectError("refused", request=httpx.Request("GET", "http://g.invalid")),
         "transport error: ConnectError", None),
        (lambda: httpx.HTTPStatusError("busy", request=httpx.Request("POST", "http://g.invalid"),
                                       response=httpx.Response(503, request=httpx.Request("POST", "http://g.invalid"))),
         "gateway answered HTTP 503", None),
    ],
    ids=["SourceUnavailable", "ConnectError", "HTTP503"],
)
def test_infrastructure_faults_never_quarantine(make_ctx, src, monkeypatch, factory, infrastructure, reason):
    ctx = make_ctx(infrastructure_retry_max_seconds=0.1)
    (oid,) = make_source(ctx, src, 1)
    configure(ctx, retry_base_seconds=0.02, stages__fetch__max_attempts=2)
    failures = 6
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", raising(factory, times=failures, then=STAGE_HANDLERS["fetch"]))
    for attempt in range(1, failures + 1):
        result = run_when_due(ctx, "fetch", oid)
        assert result.kind == "retry", attempt
        row = rows(ctx, oid)["fetch"]
        assert (row["status"], row["attempts"]) == ("failed", attempt)
        assert row["last_error"]["infrastructure"] == infrastructure
        assert row["last_error"]["reason"] == reason
        assert row["last_error"]["deterministic"] is False
        # exponential, capped at KI_INFRASTRUCTURE_RETRY_MAX_SECONDS
        assert row["next_retry_at"] - row["updated_at"] == timedelta(seconds=min(0.02 * 2 ** (attempt - 1), 0.1))
    assert rows(ctx, oid)["fetch"]["attempts"] > ctx.config.pipeline.stage("fetch").max_attempts
    assert run_when_due(ctx, "fetch", oid).kind == "done"
    row = rows(ctx, oid)["fetch"]
    assert (row["status"], row["attempts"], row["last_error"]) == ("done", failures + 1, None)


def test_attempts_spent_on_an_outage_do_not_use_up_the_budget(make_ctx, src, monkeypatch):
    ctx = make_ctx(infrastructure_retry_max_seconds=0.02)
    (oid,) = make_source(ctx, src, 1)
    configure(ctx, retry_base_seconds=0.01, stages__fetch__max_attempts=3)
    outage = raising(lambda: httpx.ConnectError("refused", request=httpx.Request("GET", "http://g.invalid")),
                     times=4)
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", outage)
    assert [run_when_due(ctx, "fetch", oid).kind for _ in range(4)] == ["retry"] * 4
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", raising(lambda: errors.ModelOutputInvalid("truncated")))
    # the document's own budget (3) is untouched by the outage: this is its first countable failure
    assert run_when_due(ctx, "fetch", oid).kind == "retry"


def test_unmounted_source_root_is_an_outage_not_a_quarantine(ctx, src, tmp_path):
    (oid,) = make_source(ctx, src, 1)
    configure(ctx, retry_base_seconds=0.01, stages__fetch__max_attempts=1)
    moved = tmp_path / "unmounted"
    src.rename(moved)
    for attempt in (1, 2, 3):
        assert run_when_due(ctx, "fetch", oid).kind == "retry"
        row = rows(ctx, oid)["fetch"]
        assert (row["status"], row["attempts"]) == ("failed", attempt)
        assert row["last_error"]["class"] == "SourceUnavailable"
        assert row["last_error"]["reason"] == "source_missing"
        assert row["last_error"]["infrastructure"].startswith("source root missing")
    moved.rename(src)
    assert run_when_due(ctx, "fetch", oid).kind == "done"


# --- stale claims --------------------------------------------------------------------------------


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


# --- disabled stages -----------------------------------------------------------------------------


def test_disabled_stage_parks_rows_and_later_stages_still_run(ctx, src, monkeypatch):
    ids = make_source(ctx, src, 3)
    configure(ctx, stages__convert__enabled=False, retry_base_seconds=60)
    index_calls: list[int] = []
    real_index = STAGE_HANDLERS["index"]

    def index(sctx):
        index_calls.append(sctx.obj.id)
        return real_index(sctx)

    monkeypatch.setitem(STAGE_HANDLERS, "index", index)
    summary = launch_insertion(ctx, wait_for_retries_seconds=0)
    assert summary.status == "completed"
    # index needs convert's output: with convert off it is skipped, not run and not failed
    assert index_calls == []
    for oid in ids:
        r = rows(ctx, oid)
        assert r["fetch"]["status"] == "done"
        for stage in ["convert", *MODEL_STAGE_LIST]:
            assert (r[stage]["status"], r[stage]["reason"]) == ("skipped", DISABLED_BY_CONFIGURATION)
            assert r[stage]["producer_version"] == ctx.config.pipeline.producer_version(stage)
        assert (r["index"]["status"], r["index"]["reason"], r["index"]["attempts"]) == (
            "skipped", INPUT_STAGE_DISABLED, 1)
        assert r["index"]["last_error"]["details"] == {"disabled_inputs": ["convert"]}
    with ctx.db.engine.connect() as conn:
        counts = bucket_counts(conn)
    assert counts["convert"]["disabled"] == 3
    assert counts["classify_matter"]["disabled"] == 3

    # re-enabling requeues the parked rows and parks everything downstream again
    configure(ctx, stages__convert__enabled=True)
    requeued, parked = prepare.requeue_newly_enabled_stages(ctx)
    assert (requeued, parked) == (3, 3 * 5)
    for oid in ids:
        r = rows(ctx, oid)
        assert (r["fetch"]["status"], r["fetch"]["completions"]) == ("done", 1)
        assert (r["convert"]["status"], r["convert"]["attempts"], r["convert"]["last_error"]) == ("pending", 0, None)
        for stage in PIPELINE_STAGE_ORDER[2:]:
            assert (r[stage]["status"], r[stage]["reason"], r[stage]["producer_version"]) == (
                "skipped", WAITING_FOR_PREVIOUS_STAGE, None)
    assert prepare.requeue_newly_enabled_stages(ctx) == (0, 0)  # model stages are still disabled
    summary = launch_insertion(ctx, wait_for_retries_seconds=0)
    assert (summary.status, summary.counters.quarantined, summary.counters.retried) == ("completed", 0, 0)
    for oid in ids:
        assert buckets(ctx, oid) == expected_done_buckets()
        assert rows(ctx, oid)["fetch"]["completions"] == 1  # fetch did not run again


def test_disabled_first_stage_is_requeued_by_the_run_itself(ctx, src):
    ids = make_source(ctx, src, 2)
    configure(ctx, stages__fetch__enabled=False, stages__convert__max_attempts=1, retry_base_seconds=60)
    launch_insertion(ctx, wait_for_retries_seconds=0)
    for oid in ids:
        r = rows(ctx, oid)
        assert r["fetch"]["reason"] == DISABLED_BY_CONFIGURATION
        # convert cannot run without fetch's output: skipped as such, never quarantined
        assert (r["convert"]["status"], r["convert"]["reason"]) == ("skipped", INPUT_STAGE_DISABLED)
    configure(ctx, stages__fetch__enabled=True)
    summary = launch_insertion(ctx, wait_for_retries_seconds=0)
    assert (summary.status, summary.counters.quarantined) == ("completed", 0)
    for oid in ids:
        assert buckets(ctx, oid) == expected_done_buckets()


# --- producer_version bumps ----------------------------------------------------------------------


def test_rerun_token_requeues_exactly_the_earliest_outdated_stage(ctx, src, monkeypatch):
    ids = make_source(ctx, src, 3)
    poisoned = ids[2]
    real_convert = STAGE_HANDLERS["convert"]

    def convert(sctx):
        if sctx.obj.id == poisoned:
            raise errors.UnsupportedDocument("corrupt", reason="corrupt")
        return real_convert(sctx)

    monkeypatch.setitem(STAGE_HANDLERS, "convert", convert)
    launch_insertion(ctx, wait_for_retries_seconds=0)
    # a file that arrives later is only seeded (fetch pending, the rest waiting)
    (src / "late.txt").write_text("Nachtrag zum Vertrag.\n", encoding="utf-8")
    sid = register_local_source(ctx, src)
    scan_source(ctx, sid)
    (late,) = object_ids(ctx, sid, "late")
    done_ids = ids[:2]
    for oid in done_ids:
        assert buckets(ctx, oid) == expected_done_buckets()
    before_poisoned = rows(ctx, poisoned)
    before_late = rows(ctx, late)

    # bump convert and index: per object, only convert (the earliest) is requeued
    configure(ctx, stages__convert__rerun_token="tok", stages__index__rerun_token="tok2")
    requeued, parked = prepare.requeue_outdated_stages(ctx)
    assert requeued == 2
    assert parked == 2 * 5  # classify_matter .. index, per done object
    for oid in done_ids:
        r = rows(ctx, oid)
        assert (r["fetch"]["status"], r["fetch"]["producer_version"]) == ("done", "mvp-1")
        assert (r["convert"]["status"], r["convert"]["attempts"], r["convert"]["last_error"]) == ("pending", 0, None)
        for stage in PIPELINE_STAGE_ORDER[2:]:
            assert (r[stage]["status"], r[stage]["reason"], r[stage]["producer_version"]) == (
                "skipped", WAITING_FOR_PREVIOUS_STAGE, None)
    # quarantined rows are not reclaimed; waiting rows (no recorded version) are untouched
    assert rows(ctx, poisoned) == before_poisoned
    assert rows(ctx, late) == before_late
    assert prepare.requeue_outdated_stages(ctx) == (0, 0)  # idempotent

    monkeypatch.setitem(STAGE_HANDLERS, "convert", real_convert)
    summary = launch_insertion(ctx, wait_for_retries_seconds=0)
    assert summary.status == "completed"
    for oid in [*done_ids, late]:
        r = rows(ctx, oid)
        assert buckets(ctx, oid) == expected_done_buckets()
        assert r["convert"]["producer_version"] == "mvp-1+tok"
        assert r["index"]["producer_version"] == "mvp-1+tok2"
        assert r["fetch"]["producer_version"] == "mvp-1"
    for oid in done_ids:
        r = rows(ctx, oid)
        assert (r["fetch"]["completions"], r["convert"]["completions"], r["index"]["completions"]) == (1, 2, 2)
    assert rows(ctx, poisoned)["convert"]["status"] == "quarantined"


def test_version_bump_of_a_later_stage_leaves_earlier_stages_alone(ctx, src):
    (oid,) = make_source(ctx, src, 1)
    launch_insertion(ctx, wait_for_retries_seconds=0)
    configure(ctx, stages__index__rerun_token="again")
    summary = launch_insertion(ctx, wait_for_retries_seconds=0)  # the run's prepare step requeues
    assert (summary.counters.processed, summary.counters.done) == (1, 1)
    r = rows(ctx, oid)
    assert (r["fetch"]["completions"], r["convert"]["completions"], r["index"]["completions"]) == (1, 1, 2)
    assert r["index"]["producer_version"] == "mvp-1+again"


# --- quarantine retry ----------------------------------------------------------------------------


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


# --- launch_insertion and the run ledger ---------------------------------------------------------


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
