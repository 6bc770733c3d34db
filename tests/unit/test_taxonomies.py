"""The error-treatment table, backoff and console buckets, row by row.

Spec: insertion-pipeline.md "Retry policy and quarantine" (error classification
table, backoff) and "Processing states and console buckets".
"""

from __future__ import annotations

import itertools

import httpx
import pytest

from ki.core import errors
from ki.core.retry import INFRASTRUCTURE_HTTP_STATUSES, ErrorVerdict, Treatment, backoff_seconds, classify_error
from ki.core.taxonomies import (
    BUCKETS,
    CANCELLED,
    DISABLED_BY_CONFIGURATION,
    PIPELINE_STAGE_ORDER,
    SOURCE_OBJECT_DELETED,
    WAITING_FOR_PREVIOUS_STAGE,
    ProcessingStatus,
    stage_bucket,
)

REQUEST = httpx.Request("POST", "http://gateway.invalid/v1/chat/completions")


def status_error(code: int) -> httpx.HTTPStatusError:
    response = httpx.Response(code, request=REQUEST)
    return httpx.HTTPStatusError(f"gateway answered {code}", request=REQUEST, response=response)


# --- the table ---------------------------------------------------------------------------------


def test_stage_order_is_the_spec_order():
    assert PIPELINE_STAGE_ORDER == (
        "fetch", "convert", "classify_matter", "relate", "extract_metadata", "extract_decisions", "index",
    )


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (errors.UnsupportedDocument("docling said 422"), "conversion_failed"),
        (errors.UnsupportedDocument("scan without text", reason="needs_ocr"), "needs_ocr"),
        (errors.UnsupportedDocument("encrypted", reason="password_required"), "password_required"),
        (errors.ArtifactTooLarge("too big", limit_bytes=10, seen_bytes=11), "too_large"),
        (FileNotFoundError(2, "No such file", "/src/a.txt"), "source_missing"),
        (ValueError("bad input"), "internal_error"),
        (errors.ProviderPermanentError("API key rejected (401)"), "provider_permanent"),
    ],
    ids=["unsupported", "unsupported-needs_ocr", "unsupported-password", "too_large", "file_not_found",
         "value_error", "provider_permanent"],
)
def test_deterministic_errors_quarantine_first_time(exc, reason):
    verdict = classify_error(exc)
    assert verdict == ErrorVerdict(Treatment.deterministic, reason=reason, infrastructure=None)


def test_model_output_invalid_is_retried():
    assert classify_error(errors.ModelOutputInvalid("submit_result never validated")) == ErrorVerdict(
        Treatment.retry, reason="model_output_invalid"
    )


def test_infrastructure_error_carries_its_reason_in_words():
    verdict = classify_error(errors.InfrastructureError("gateway down", infrastructure="gateway answered HTTP 503"))
    assert verdict.treatment is Treatment.infrastructure
    assert verdict.infrastructure == "gateway answered HTTP 503"
    assert verdict.reason is None
    # without an explicit reason, the message is the reason
    assert classify_error(errors.InfrastructureError("docling unreachable")).infrastructure == "docling unreachable"


def test_source_unavailable_is_infrastructure_recorded_as_source_missing():
    exc = errors.SourceUnavailable("root /mnt/share is gone", infrastructure="source root missing: /mnt/share")
    verdict = classify_error(exc)
    assert verdict == ErrorVerdict(Treatment.infrastructure, reason="source_missing",
                                   infrastructure="source root missing: /mnt/share")


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ConnectError("connection refused", request=REQUEST),
        httpx.ReadError("connection reset", request=REQUEST),
        httpx.RemoteProtocolError("server disconnected without sending a response", request=REQUEST),
        httpx.ReadTimeout("timed out", request=REQUEST),
        httpx.ConnectTimeout("timed out", request=REQUEST),
        httpx.PoolTimeout("pool exhausted", request=REQUEST),
    ],
    ids=lambda e: type(e).__name__,
)
def test_gateway_transport_errors_are_infrastructure(exc):
    verdict = classify_error(exc)
    assert verdict.treatment is Treatment.infrastructure
    assert verdict.infrastructure == f"transport error: {type(exc).__name__}"
    assert verdict.reason is None


@pytest.mark.parametrize("exc", [ConnectionRefusedError("refused"), TimeoutError("timed out")],
                         ids=lambda e: type(e).__name__)
def test_os_level_connection_errors_and_timeouts_are_infrastructure(exc):
    verdict = classify_error(exc)
    assert verdict.treatment is Treatment.infrastructure
    assert verdict.infrastructure == f"transport error: {type(exc).__name__}"


@pytest.mark.parametrize("code", [408, 425, 429, 500, 502, 503, 504])
def test_gateway_outage_statuses_are_infrastructure(code):
    verdict = classify_error(status_error(code))
    assert verdict == ErrorVerdict(Treatment.infrastructure, infrastructure=f"gateway answered HTTP {code}")


def test_infrastructure_status_set_is_exactly_the_spec_list():
    assert frozenset({408, 425, 429, 500, 502, 503, 504}) == INFRASTRUCTURE_HTTP_STATUSES


@pytest.mark.parametrize("code", [400, 422, 501])
def test_other_http_statuses_are_bounded_retries(code):
    verdict = classify_error(status_error(code))
    assert verdict == ErrorVerdict(Treatment.retry, reason="internal_error")
    assert verdict.infrastructure is None


@pytest.mark.parametrize(
    "exc",
    [
        errors.RetryableStageError("convert has not completed"),
        errors.StaleClaim("claim silent for 900 s"),
        RuntimeError("unexpected bug"),
        KeyError("missing"),
        errors.ClaimLost("lost"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_everything_else_is_a_bounded_retry(exc):
    assert classify_error(exc) == ErrorVerdict(Treatment.retry, reason="internal_error", infrastructure=None)


def test_value_error_wrapping_a_transport_error_stays_deterministic():
    try:
        try:
            raise httpx.ConnectError("connection refused", request=REQUEST)
        except httpx.ConnectError as inner:
            raise ValueError("the model returned garbage") from inner
    except ValueError as exc:
        wrapped = exc
    assert isinstance(wrapped.__cause__, httpx.ConnectError)
    verdict = classify_error(wrapped)
    assert verdict.treatment is Treatment.deterministic
    assert verdict.infrastructure is None


def test_provider_permanent_wrapping_a_429_quota_stays_deterministic():
    try:
        try:
            raise status_error(429)
        except httpx.HTTPStatusError as inner:
            raise errors.ProviderPermanentError("insufficient_quota: the account is out of credit") from inner
    except errors.ProviderPermanentError as exc:
        wrapped = exc
    assert classify_error(wrapped) == ErrorVerdict(Treatment.deterministic, reason="provider_permanent")


def test_unsupported_document_refuses_an_unknown_reason():
    with pytest.raises(ValueError, match="unknown quarantine reason"):
        errors.UnsupportedDocument("x", reason="because")


# --- backoff -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("attempts", "expected"), [(1, 5.0), (2, 10.0), (3, 20.0), (4, 40.0)])
def test_backoff_doubles_from_the_base(attempts, expected):
    assert backoff_seconds(attempts, 5) == expected


def test_backoff_with_another_base_and_fractional_base():
    assert [backoff_seconds(a, 0.25) for a in (1, 2, 3)] == [0.25, 0.5, 1.0]
    assert backoff_seconds(1, 0) == 0.0


def test_backoff_attempts_below_one_count_as_first():
    assert backoff_seconds(0, 5) == 5.0


def test_infrastructure_backoff_is_capped():
    assert backoff_seconds(6, 5, cap_seconds=300) == 160.0
    assert backoff_seconds(7, 5, cap_seconds=300) == 300.0
    assert backoff_seconds(50, 5, cap_seconds=300) == 300.0
    # an uncapped huge attempt count neither overflows nor goes negative
    assert backoff_seconds(10_000, 5) == 5.0 * 2**40
    assert backoff_seconds(10_000, 5, cap_seconds=300) == 300.0


# --- buckets -------------------------------------------------------------------------------------

REASONS = [None, WAITING_FOR_PREVIOUS_STAGE, DISABLED_BY_CONFIGURATION, SOURCE_OBJECT_DELETED, CANCELLED,
           "no_text", "no_revision_evidence", "corrupt"]


def expected_bucket(status: str, reason: str | None) -> str:
    if status == "skipped":
        return {WAITING_FOR_PREVIOUS_STAGE: "waiting", DISABLED_BY_CONFIGURATION: "disabled"}.get(reason, "skipped")
    return status


@pytest.mark.parametrize(("status", "reason"), list(itertools.product([s.value for s in ProcessingStatus], REASONS)))
def test_stage_bucket_every_status_and_reason(status, reason):
    bucket = stage_bucket(status, reason)
    assert bucket == expected_bucket(status, reason)
    assert bucket in BUCKETS


def test_bucket_table_explicit_rows():
    assert stage_bucket("pending", None) == "pending"
    assert stage_bucket("running", None) == "running"
    assert stage_bucket("done", None) == "done"
    assert stage_bucket("failed", "corrupt") == "failed"
    assert stage_bucket("quarantined", "corrupt") == "quarantined"
    assert stage_bucket("skipped", WAITING_FOR_PREVIOUS_STAGE) == "waiting"
    assert stage_bucket("skipped", DISABLED_BY_CONFIGURATION) == "disabled"
    assert stage_bucket("skipped", "no_revision_evidence") == "skipped"
    assert stage_bucket("skipped", SOURCE_OBJECT_DELETED) == "skipped"
    assert stage_bucket("skipped", None) == "skipped"
    # a waiting/disabled reason on a non-skipped row does not change its bucket
    assert stage_bucket("pending", WAITING_FOR_PREVIOUS_STAGE) == "pending"
    assert stage_bucket("quarantined", DISABLED_BY_CONFIGURATION) == "quarantined"


def test_buckets_are_the_eight_console_buckets():
    assert BUCKETS == ("pending", "running", "done", "failed", "waiting", "disabled", "skipped", "quarantined")
