"""Whose fault is an outage-looking failure: the dependency's (an outage) or the file's (a poison file)?

Spec work-queue.md "Poison messages" and "Lifecycle deadline"; the decision is written in
docs/design-decisions.md ("Whose fault is a fault that only one file meets"). An infrastructure fault
of a dependency (Docling Serve, the gateway, OpenSearch: ``ki.adapters.breaker.dependency_of``) or a
:class:`~ki.core.errors.StageTimeout` is the dependency's fault — retried, never quarantined, counted by
its circuit breaker — unless the evidence says the dependency served other files since this file's
fault streak began and fails for nobody else (:mod:`ki.core.served` for a dependency's answers,
:func:`ki.store.faults.fault_evidence` for others passing the same stage before its deadline):
then it is the file's fault, counted toward ``max_attempts`` (treatment ``retry``) and kept from the
breaker, and the file is quarantined ``poison_suspected`` (``timeout`` for a deadline) with the
evidence once its budget is spent.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from sqlalchemy.engine import Connection

from ki.adapters.breaker import dependency_of, stage_dependencies
from ki.core.errors import StageTimeout
from ki.core.retry import ErrorVerdict, Treatment
from ki.core.served import SERVED
from ki.domain.context import PipelineContext
from ki.store.claims import Claim
from ki.store.faults import fault_evidence

#: ``last_error`` key carrying when a file's fault streak began (ISO time), from one attempt to the next.
FAULT_SINCE_KEY = "fault_since"


@dataclass(frozen=True)
class Blame:
    """The verdict to record and the breaker to tell.

    Attributes:
        verdict: the classifier's verdict, or a ``retry`` verdict with reason ``poison_suspected`` /
            ``timeout`` and the evidence in ``details`` when the file is at fault.
        breaker: the dependency whose breaker counts this fault, or None (not an outage, or no dependency).
        fault_since: when the file's fault streak began (ISO), recorded in ``last_error`` for the next
            attempt; None when the failure is no fault of a dependency.
        counted: the fault is held against the file (``verdict.details`` is the evidence).
    """

    verdict: ErrorVerdict
    breaker: str | None = None
    fault_since: str | None = None
    counted: bool = False


def _parse(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


def blame(ctx: PipelineContext, conn: Connection, claim: Claim, exc: BaseException,
          verdict: ErrorVerdict) -> Blame:
    """Decide whose fault ``exc`` (classified as ``verdict``) on ``claim`` is. A dependency's fault
    is judged by what the dependency answered other files in this process (:data:`ki.core.served.SERVED`) since
    the file's fault streak began (``last_error.fault_since``; a streak begins at its first fault, which is
    never the file's: it goes to the breaker); a deadline by the attempt history of the same stage, read on
    ``conn`` (:func:`ki.store.faults.fault_evidence`: others passing it, any process, since the attempt
    that began the streak was claimed). Only infrastructure verdicts of a dependency or a deadline are
    examined; every other verdict is returned as it is (database faults, source outages: never the file's).
    Spec: work-queue.md "Poison messages", "Lifecycle deadline"."""
    if verdict.treatment is not Treatment.infrastructure:
        return Blame(verdict)
    needs = stage_dependencies(ctx.config)
    if isinstance(exc, StageTimeout):
        stages = [claim.stage]
        own = needs.get(claim.stage, frozenset())
        dependency = next(iter(own)) if len(own) == 1 else None
        reason = "timeout"
    else:
        dependency = dependency_of(exc)
        if dependency is None:
            return Blame(verdict)
        stages = sorted(s for s, d in needs.items() if dependency in d) or [claim.stage]
        reason = "poison_suspected"
    previous = (claim.last_error or {}).get(FAULT_SINCE_KEY)
    if reason == "timeout":  # others passing the same stage (any process): the attempt history
        evidence = fault_evidence(conn, row_id=claim.row_id, source_object_id=claim.source_object_id,
                                  stages=stages, since=previous)
        began = evidence.since
    else:  # others the dependency answered (this process): ki.core.served
        began = _parse(previous) or datetime.now(UTC)
        evidence = SERVED.since(dependency, began, claim.source_object_id)
    since = began.isoformat()
    # The first fault of a streak is never the file's: others served before it (or while it ran) say
    # nothing about the dependency after it, and an outage's first faults must reach its breaker.
    if previous is None or not evidence.file_at_fault:
        if dependency is not None and reason == "poison_suspected":
            SERVED.fault(dependency, claim.source_object_id)
        return Blame(verdict, breaker=dependency, fault_since=since)
    details = {**(verdict.details or {}), "fault": verdict.infrastructure, "dependency": dependency,
               "stages": stages, "others_succeeded": evidence.succeeded, "since": since,
               "last_success": evidence.last_success.isoformat() if evidence.last_success else None}
    return Blame(replace(verdict, treatment=Treatment.retry, reason=reason, details=details), fault_since=since,
                 counted=True)
