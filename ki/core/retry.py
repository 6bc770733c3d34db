"""The error-treatment table: ``classify_error``, backoff, and what each treatment does.

Spec: insertion-pipeline.md "Retry policy and quarantine" (the error table, the backoff) and
DESIGN.md "Outages are not the file's fault". Pure data and pure functions (tested as a table);
the exception classes themselves are in :mod:`ki.core.errors`, and ``ki.orchestration.execute`` records
the verdict on the row.
"""

from __future__ import annotations

import enum
import errno as _errno
from dataclasses import dataclass

from ki.core import errors
from ki.core.taxonomies import SOURCE_UNREADABLE


class Treatment(enum.StrEnum):
    """What ``_execute_claim`` does with a failure."""

    deterministic = "deterministic"  # quarantine on the first attempt
    retry = "retry"  # backoff, quarantine after max_attempts
    infrastructure = "infrastructure"  # backoff forever (capped), never quarantine
    park = "park"  # wait (skipped, a waiting reason) until a scan sees the source change; never quarantine


@dataclass(frozen=True)
class ErrorVerdict:
    """The pure outcome of classifying one exception.

    Attributes:
        treatment: deterministic / retry / infrastructure.
        reason: the quarantine reason (``ki.core.errors.QUARANTINE_REASONS``), never None for the
            deterministic and retry treatments (a quarantine always names its reason); for an
            infrastructure fault the reason the row waits with, or None.
        infrastructure: the outage in words for ``last_error.infrastructure``, else None.
        details: evidence to record beside the message (e.g. a validation error's fields), or None.
    """

    treatment: Treatment
    reason: str | None = None
    infrastructure: str | None = None
    details: dict | None = None


#: HTTP statuses that mean the provider (gateway, converter), not the document, is at fault; the one list.
INFRASTRUCTURE_HTTP_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})

#: SQLSTATEs whose failure says nothing about the document: serialization failure
#: and deadlock, then by class prefix: 08 connection exception, 53 insufficient resources, 57P0x
#: operator intervention (admin/crash shutdown, cannot connect now, database dropped, idle timeout).
INFRASTRUCTURE_SQLSTATES = frozenset({"40001", "40P01"})
INFRASTRUCTURE_SQLSTATE_PREFIXES = ("08", "53", "57P0")

#: work-queue spec "Retry with Exponential Backoff": transient errors identified by their message
#: (lower-case substrings).
TRANSIENT_MESSAGE_PATTERNS = (
    "read or write conflict", "transaction can be retried", "temporarily unavailable", "timeout", "timed out",
    "rate limit", "too many requests", "connection reset", "broken pipe",
)

#: errno values of an ``OSError`` that mean the machine or a network share failed, not the file
#: (no space, quota, I/O error on a remote share, stale handle, network down, out of descriptors).
INFRASTRUCTURE_ERRNOS = frozenset({
    _errno.ENOSPC, _errno.EDQUOT, _errno.ESTALE, _errno.ENOTCONN, _errno.EHOSTDOWN, _errno.EHOSTUNREACH,
    _errno.ENETDOWN, _errno.ENETUNREACH, _errno.ETIMEDOUT, _errno.ECONNRESET, _errno.ECONNREFUSED,
    _errno.ECONNABORTED, _errno.EPIPE, _errno.EAGAIN, _errno.EMFILE, _errno.ENFILE, _errno.ENOMEM,
})

#: Reasons of the treatments that can quarantine, when the exception names none.
OWN_FAULT_REASON = "internal_error"
MODEL_OUTPUT_REASON = "model_output_invalid"
#: A pydantic ``ValidationError`` of a model ki does not define: the document's content failed a check.
CONTENT_INVALID_REASON = "corrupt"


def _transport_errors() -> tuple[type[BaseException], ...]:
    import httpx  # imported lazily: the CLI's fast paths never need it

    return (httpx.TransportError, ConnectionError, TimeoutError)  # httpx: Connect/Read/RemoteProtocol/timeouts


def _chain(exc: BaseException, limit: int = 8) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during (``__cause__``/``__context__``), nearest first."""
    out: list[BaseException] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and len(out) < limit and id(cur) not in seen:
        out.append(cur)
        seen.add(id(cur))
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
    return out


def _sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a psycopg error, or of the one a SQLAlchemy error wraps (``.orig``)."""
    for e in (exc, getattr(exc, "orig", None)):
        code = getattr(e, "sqlstate", None) if e is not None else None
        if isinstance(code, str) and code:
            return code
    return None


def _connection_lost(exc: BaseException) -> bool:
    """A driver-level connection failure without a SQLSTATE (server gone, socket closed, pool timeout)."""
    if getattr(exc, "connection_invalidated", False):
        return True
    for cls in type(exc).__mro__:
        if cls.__module__.split(".")[0] in ("psycopg", "sqlalchemy") and cls.__name__ in (
                "OperationalError", "InterfaceError", "DisconnectionError", "TimeoutError"):
            return True
    return False


def _outage(exc: BaseException) -> ErrorVerdict | None:
    """The infrastructure verdict for one exception of the chain, or None when it is no outage."""
    if isinstance(exc, errors.InfrastructureError):
        return ErrorVerdict(Treatment.infrastructure, reason=getattr(exc, "reason", None),
                            infrastructure=exc.infrastructure)
    import httpx

    if isinstance(exc, httpx.HTTPStatusError):
        code = exc.response.status_code
        if code in INFRASTRUCTURE_HTTP_STATUSES:
            return ErrorVerdict(Treatment.infrastructure, infrastructure=f"gateway answered HTTP {code}")
        return None
    state = _sqlstate(exc)
    if state is not None:
        if state in INFRASTRUCTURE_SQLSTATES or state.startswith(INFRASTRUCTURE_SQLSTATE_PREFIXES):
            return ErrorVerdict(Treatment.infrastructure,
                                infrastructure=f"database fault SQLSTATE {state}: {str(exc).splitlines()[0][:160]}")
    elif _connection_lost(exc):
        return ErrorVerdict(Treatment.infrastructure,
                            infrastructure=f"database connection lost: {str(exc).splitlines()[0][:160]}"
                            if str(exc) else f"database connection lost ({type(exc).__name__})")
    if isinstance(exc, _transport_errors()):
        return ErrorVerdict(Treatment.infrastructure, infrastructure=f"transport error: {type(exc).__name__}")
    if isinstance(exc, OSError) and exc.errno in INFRASTRUCTURE_ERRNOS:
        return ErrorVerdict(Treatment.infrastructure,
                            infrastructure=f"system error {_errno.errorcode.get(exc.errno, exc.errno)}: {exc}")
    message = str(exc).lower()
    for pattern in TRANSIENT_MESSAGE_PATTERNS:
        if pattern in message:
            return ErrorVerdict(Treatment.infrastructure,
                                infrastructure=f"transient fault ({pattern!r}): {str(exc).splitlines()[0][:160]}")
    return None


def _validation_evidence(exc: BaseException) -> dict:
    try:
        fields = exc.errors(include_url=False, include_context=False, include_input=False)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - evidence is best effort
        fields = []
    return {"schema": getattr(exc, "title", None), "error_count": len(fields),
            "errors": [{"loc": [str(p) for p in f.get("loc", ())], "type": f.get("type"), "msg": f.get("msg")}
                       for f in fields[:20]]}


def _own_schema(title: str | None) -> bool:
    """Whether a ``ValidationError``'s model (its ``title``, the class name) is one ki defines (a
    ``ki.*`` module): ki's own output schemas. A model of a library (docling-core's document, a parser's
    record) checks a document's content instead."""
    from pydantic import BaseModel

    if not title:
        return False
    name = title.split("[", 1)[0]
    stack = list(BaseModel.__subclasses__())
    seen: set[type] = set()
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        if cls.__name__ == name and cls.__module__.split(".", 1)[0] == "ki":
            return True
        stack.extend(cls.__subclasses__())
    return False


def classify_error(exc: BaseException) -> ErrorVerdict:
    """Classify an exception per the spec's error table (in this order).

    1. ki's own output failing ki's own schema (``InternalError``, and a pydantic ``ValidationError``
       of a model ki defines, :func:`_own_schema`): retry up to
       max_attempts, then quarantine as ``internal_error`` with the evidence.
    2. Deterministic: UnsupportedDocument, ArtifactTooLarge, FileNotFoundError, a pydantic
       ``ValidationError`` raised while checking a document's content (reason ``corrupt``, the failing
       fields as evidence), ValueError (includes ProviderPermanentError). An explicit deterministic
       verdict wins even when it wraps a transport error.
    3. ModelOutputInvalid: retry up to max_attempts (reason ``model_output_invalid``).
    4. Infrastructure, for the exception or any it was raised from: InfrastructureError, httpx
       transport errors, connection errors and timeouts, HTTP 408/425/429/5xx, database faults
       by SQLSTATE (40001, 40P01, 08xxx, 53xxx, 57P0x) or a lost connection, OS errors of the
       machine or a share (:data:`INFRASTRUCTURE_ERRNOS`), and the work-queue spec's transient
       message patterns (:data:`TRANSIENT_MESSAGE_PATTERNS`).
    5. ``SourceReadDenied`` (a file the share will not let ki read): parked waiting with reason
       ``source_unreadable`` until a scan sees its permissions change (``ki.store.unreadable``).
       A ``StageTimeout``: infrastructure here; whose fault it is (the dependency's or the file's) is
       decided with the evidence of other files by ``ki.orchestration.blame``.
    6. Anything else (RetryableStageError, StaleClaim, bugs): retry up to max_attempts, then
       quarantine as ``internal_error``.

    Every verdict that can quarantine names its reason (``ki.core.errors.QUARANTINE_REASONS``).
    """
    from pydantic import ValidationError

    if isinstance(exc, errors.InternalError):
        return ErrorVerdict(Treatment.retry, reason=OWN_FAULT_REASON, details=exc.details or None)
    if isinstance(exc, ValidationError):
        if _own_schema(exc.title):  # ki's own output broke ki's own schema: ki's bug
            return ErrorVerdict(Treatment.retry, reason=OWN_FAULT_REASON, details=_validation_evidence(exc))
        # the document's content failed a check (a parser's or library's model): the file's own fault
        return ErrorVerdict(Treatment.deterministic, reason=CONTENT_INVALID_REASON, details=_validation_evidence(exc))
    if isinstance(exc, errors.UnsupportedDocument):
        return ErrorVerdict(Treatment.deterministic, reason=exc.reason)
    if isinstance(exc, errors.ArtifactTooLarge):
        return ErrorVerdict(Treatment.deterministic, reason="too_large")
    if isinstance(exc, errors.ProviderPermanentError):
        return ErrorVerdict(Treatment.deterministic, reason="provider_permanent")
    if isinstance(exc, FileNotFoundError):
        return ErrorVerdict(Treatment.deterministic, reason="source_missing")
    if isinstance(exc, ValueError):
        return ErrorVerdict(Treatment.deterministic, reason=getattr(exc, "reason", None) or OWN_FAULT_REASON)
    if isinstance(exc, errors.ModelOutputInvalid):
        return ErrorVerdict(Treatment.retry, reason=MODEL_OUTPUT_REASON)
    if isinstance(exc, errors.SourceReadDenied):  # the share will not let ki read it: wait for a change
        return ErrorVerdict(Treatment.park, reason=SOURCE_UNREADABLE, infrastructure=exc.infrastructure)
    if isinstance(exc, errors.StageTimeout):
        return ErrorVerdict(Treatment.infrastructure, infrastructure=exc.infrastructure,
                            details={"timeout_seconds": exc.timeout_seconds})
    for link in _chain(exc):
        verdict = _outage(link)
        if verdict is not None:
            return verdict
    return ErrorVerdict(Treatment.retry, reason=OWN_FAULT_REASON)


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


#: Longest ``Retry-After`` honoured (s): a dependency asking for more is probed again after this anyway.
RETRY_AFTER_MAX_SECONDS = 120.0


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header value asks to wait (RFC 9110 §10.2.3: delay-seconds or an
    HTTP-date), at most :data:`RETRY_AFTER_MAX_SECONDS`; None when absent or unreadable. ``now``: the
    current time as a POSIX timestamp (default: the clock), for an HTTP-date."""
    if not value or not value.strip():
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), RETRY_AFTER_MAX_SECONDS)
    import time
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    wait = when.timestamp() - (time.time() if now is None else now)
    return min(max(0.0, wait), RETRY_AFTER_MAX_SECONDS)
