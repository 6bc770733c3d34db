"""The retry policy: backoff, deterministic quarantine with its record, bounded retries, outages that
never quarantine.

Spec: insertion-pipeline.md "Retry policy and quarantine"; DESIGN.md "Outages are not the file's fault".
"""

from __future__ import annotations

import traceback
from datetime import timedelta

import httpx
import pytest

from ki.core import errors
from ki.core.taxonomies import WAITING_FOR_PREVIOUS_STAGE
from ki.orchestration.execute import MESSAGE_MAX_CHARS, TRACEBACK_MAX_CHARS, run_stage_for_object
from ki.orchestration.quarantine import list_quarantine
from ki.stages import STAGE_HANDLERS
from tests.helpers.state import AFTER_FETCH, configure, make_source, raising, rows, run_when_due, sql


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
    assert err["reason"] == "internal_error"  # never null: a ValueError naming no reason is ki's own (issue 14)
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
