"""Stage order, statuses, skip reasons, buckets and the error-treatment table.

Spec: insertion-pipeline.md "Stages in execution order", "Processing states and
console buckets" and "Retry policy and quarantine". Everything here is pure data
and pure functions so it can be tested as tables.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ki import errors

PIPELINE_STAGE_ORDER: tuple[str, ...] = (
    "fetch",
    "convert",
    "classify_matter",
    "relate",
    "extract_metadata",
    "extract_decisions",
    "index",
)

STAGE_CONSOLE_NAMES: dict[str, str] = {
    "fetch": "Fetch",
    "convert": "Parse",
    "classify_matter": "Classify",
    "relate": "Relate",
    "extract_metadata": "Extract metadata",
    "extract_decisions": "Extract decisions",
    "index": "Index",
}

#: Stages that call a model; disabled by default until their issues land.
MODEL_STAGES: frozenset[str] = frozenset({"classify_matter", "relate", "extract_metadata", "extract_decisions"})


#: The stages whose output a stage needs. When one of them is disabled, the stage cannot do its
#: work and is skipped (``input_stage_disabled``) instead of failing; re-enabling the input stage
#: requeues it and parks this one back to waiting (requeue_newly_enabled_stages).
STAGE_INPUTS: dict[str, tuple[str, ...]] = {
    "fetch": (),
    "convert": ("fetch",),
    "classify_matter": ("convert",),
    "relate": ("convert", "classify_matter"),
    "extract_metadata": ("convert",),
    "extract_decisions": ("convert",),
    "index": ("convert",),
}


class ProcessingStatus(enum.StrEnum):
    """Stored values of ``processing_state.status``."""

    pending = "pending"
    running = "running"
    done = "done"
    failed = "failed"
    quarantined = "quarantined"
    skipped = "skipped"


# Skip reasons with a meaning of their own (stored in last_error.reason).
WAITING_FOR_PREVIOUS_STAGE = "waiting_for_previous_stage"
DISABLED_BY_CONFIGURATION = "disabled_by_configuration"
SOURCE_OBJECT_DELETED = "source_object_deleted"
CANCELLED = "cancelled"
INPUT_STAGE_DISABLED = "input_stage_disabled"

BUCKETS: tuple[str, ...] = ("pending", "running", "done", "failed", "waiting", "disabled", "skipped", "quarantined")

#: Statuses a run can finish on (nothing more will happen without an operator).
TERMINAL_STATUSES = frozenset({"done", "skipped", "quarantined"})


def stage_bucket(status: str, reason: str | None) -> str:
    """Map a stored (status, last_error.reason) to its console bucket.

    Returns one of :data:`BUCKETS`. ``skipped`` splits three ways: ``waiting``
    (parked behind a predecessor), ``disabled`` (stage off) and ``skipped`` (the
    handler's own judgement). Mirrors :data:`STAGE_BUCKET_SQL`.
    """
    if status == "skipped":
        if reason == WAITING_FOR_PREVIOUS_STAGE:
            return "waiting"
        if reason == DISABLED_BY_CONFIGURATION:
            return "disabled"
        return "skipped"
    return status


#: The same mapping as :func:`stage_bucket`, as a SQL CASE over processing_state.
STAGE_BUCKET_SQL = f"""CASE
  WHEN status = 'skipped' AND reason = '{WAITING_FOR_PREVIOUS_STAGE}' THEN 'waiting'
  WHEN status = 'skipped' AND reason = '{DISABLED_BY_CONFIGURATION}' THEN 'disabled'
  ELSE status END"""


class Treatment(enum.StrEnum):
    """What ``_execute_claim`` does with a failure."""

    deterministic = "deterministic"  # quarantine on the first attempt
    retry = "retry"  # backoff, quarantine after max_attempts
    infrastructure = "infrastructure"  # backoff forever (capped), never quarantine


@dataclass(frozen=True)
class ErrorVerdict:
    """The pure outcome of classifying one exception.

    Attributes:
        treatment: deterministic / retry / infrastructure.
        reason: quarantine reason (DESIGN.md list) or None.
        infrastructure: the outage in words for ``last_error.infrastructure``, else None.
    """

    treatment: Treatment
    reason: str | None = None
    infrastructure: str | None = None


#: HTTP statuses that mean the provider, not the document, is at fault.
INFRASTRUCTURE_HTTP_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})



def _transport_errors() -> tuple[type[BaseException], ...]:
    import httpx  # imported lazily: the CLI's fast paths never need it

    return (httpx.TransportError, ConnectionError, TimeoutError)  # httpx: Connect/Read/RemoteProtocol/timeouts


def classify_error(exc: BaseException) -> ErrorVerdict:
    """Classify an exception per the spec's error table (in this order).

    1. Deterministic: UnsupportedDocument, ArtifactTooLarge, FileNotFoundError,
       ValueError (includes ProviderPermanentError). An explicit deterministic verdict
       wins even when it wraps a transport error.
    2. ModelOutputInvalid: retry up to max_attempts.
    3. Infrastructure: InfrastructureError, httpx transport errors, OSError-level
       connection errors and timeouts, httpx.HTTPStatusError with 408/425/429/5xx.
    4. Anything else (RetryableStageError, StaleClaim, bugs): retry up to max_attempts.
    """
    if isinstance(exc, errors.UnsupportedDocument):
        return ErrorVerdict(Treatment.deterministic, reason=exc.reason)
    if isinstance(exc, errors.ArtifactTooLarge):
        return ErrorVerdict(Treatment.deterministic, reason="too_large")
    if isinstance(exc, errors.ProviderPermanentError):
        return ErrorVerdict(Treatment.deterministic, reason="provider_permanent")
    if isinstance(exc, FileNotFoundError):
        return ErrorVerdict(Treatment.deterministic, reason="source_missing")
    if isinstance(exc, ValueError):
        return ErrorVerdict(Treatment.deterministic, reason=getattr(exc, "reason", None))
    if isinstance(exc, errors.ModelOutputInvalid):
        return ErrorVerdict(Treatment.retry)
    if isinstance(exc, errors.InfrastructureError):
        return ErrorVerdict(
            Treatment.infrastructure, reason=getattr(exc, "reason", None), infrastructure=exc.infrastructure
        )
    import httpx

    if isinstance(exc, httpx.HTTPStatusError):
        code = exc.response.status_code
        if code in INFRASTRUCTURE_HTTP_STATUSES:
            return ErrorVerdict(Treatment.infrastructure, infrastructure=f"gateway answered HTTP {code}")
        return ErrorVerdict(Treatment.retry)
    if isinstance(exc, _transport_errors()):
        return ErrorVerdict(Treatment.infrastructure, infrastructure=f"transport error: {type(exc).__name__}")
    return ErrorVerdict(Treatment.retry)


def backoff_seconds(attempts: int, base_seconds: float, *, cap_seconds: float | None = None) -> float:
    """Backoff before the next attempt: ``base × 2^(attempts−1)``, optionally capped.

    Args:
        attempts: attempts so far, ≥ 1 (the claim increments it).
        base_seconds: ``pipeline.retry_base_seconds``.
        cap_seconds: ``KI_INFRASTRUCTURE_RETRY_MAX_SECONDS`` for infrastructure faults.
    Returns: seconds (float).
    """
    exponent = max(attempts, 1) - 1
    delay = base_seconds * (2 ** min(exponent, 40))
    if cap_seconds is not None:
        delay = min(delay, cap_seconds)
    return float(delay)
