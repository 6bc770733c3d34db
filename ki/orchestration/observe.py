"""Every stage execution counted and traced: the wrapper around ``execute_claim``.

:func:`observed` times an execution from claim to recorded outcome, counts it in the Prometheus
metrics (:func:`ki.adapters.observability.metrics.record_execution`) and, while tracing is on, runs it inside the
stage attempt's span (:func:`ki.adapters.observability.tracing.stage_span`). Quarantine reasons and the dependency of
an infrastructure fault are counted where the failure is classified (:func:`note_failure`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ki.adapters.observability import metrics, tracing

if TYPE_CHECKING:
    from ki.domain.context import PipelineContext
    from ki.store.claims import Claim

F = TypeVar("F", bound=Callable[..., Any])


def observed(execute: F) -> F:
    """Decorate ``execute(ctx, claim, **kwargs) -> ExecutionResult``: count, time and trace each call."""

    @functools.wraps(execute)
    def wrapper(ctx: PipelineContext, claim: Claim, **kwargs: Any) -> Any:
        started = time.monotonic()
        version = ctx.plan(claim.stage).producer_version if tracing.enabled() else None
        with tracing.stage_span(claim.stage, claim.source_object_id, claim.attempts, version) as span:
            result = execute(ctx, claim, **kwargs)
            tracing.set_outcome(span, result.kind, result.error_class)
        metrics.record_execution(claim.stage, result.kind, result.error_class, time.monotonic() - started,
                                 queue_wait_seconds=claim.waited_seconds)
        return result

    return wrapper  # type: ignore[return-value]


def note_failure(stage: str, *, status: str | None, reason: str | None, dependency: str | None,
                 infrastructure: str | None) -> None:
    """Count a recorded failure: a quarantine by reason; an infrastructure fault by its dependency
    (``dependency`` from :func:`ki.adapters.breaker.dependency_of`, else ``source`` for fetch, ``database`` for a
    database fault, else ``other``). ``infrastructure`` is the outage in words (None: not an outage)."""
    if status == "quarantined":
        metrics.record_quarantine(stage, reason)
    if infrastructure is None:
        return
    if dependency is None:
        dependency = ("source" if stage == "fetch" else "database" if infrastructure.startswith("database")
                      else "other")
    metrics.record_infrastructure_fault(dependency)


def note_timeout(stage: str, kind: str, seconds: float) -> None:
    """Count an execution abandoned at its deadline (the keeper recorded ``StageTimeout``: ``kind`` is that
    failure's ``retry`` or ``quarantined``) as outcome ``timeout`` after ``seconds``; the handler's thread, if it
    ever returns, is counted ``stale`` (its result is refused)."""
    metrics.record_execution(stage, kind, "StageTimeout", seconds)
