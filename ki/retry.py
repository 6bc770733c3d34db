"""The error-treatment table: ``classify_error``, backoff, and what each treatment does.

Spec: insertion-pipeline.md "Retry policy and quarantine" (the error table, the backoff) and
DESIGN.md "Outages are not the file's fault". Pure data and pure functions (tested as a table);
the exception classes themselves are in :mod:`ki.errors`, and ``ki.orchestration.execute`` records
the verdict on the row.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ki import errors


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


#: HTTP statuses that mean the provider (gateway, converter), not the document, is at fault; the one list.
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
