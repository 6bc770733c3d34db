"""``run_stage_for_object``: the only way a stage runs.

Spec: DESIGN.md "The one rule"; insertion-pipeline.md "Retry policy and
quarantine" (``_execute_claim`` error classification, backoff, quarantine record)
and "Processing states" (``_unlock_next``). Every executor (the local runner, a
Hatchet task, a console retry) claims at most one row and records the outcome
here; a completion is committed only while the row still holds the claim token.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from sqlalchemy.engine import Connection

from ki.adapters.breaker import BREAKERS, CONFIRMED_BY_COMPLETION, retry_after_of, stage_dependencies
from ki.core.errors import CAPABILITY_REASONS, ConfigurationError, RunAborted, StageTimeout
from ki.core.retry import Treatment, backoff_seconds, classify_error
from ki.core.served import SERVED, working_on
from ki.core.taxonomies import (
    DISABLED_BY_CONFIGURATION,
    INPUT_STAGE_DISABLED,
    SOURCE_OBJECT_DELETED,
)
from ki.domain.context import EnsureReady, PipelineContext, SourceObjectView, StageContext, StageOutcome, StagePlan
from ki.domain.relate.inline_conversion import ensure_source_object_ready
from ki.orchestration.blame import FAULT_SINCE_KEY, blame
from ki.orchestration.heartbeat import ClaimKeeper
from ki.orchestration.observe import note_failure, note_timeout, observed
from ki.store import claims as q
from ki.store.attempts import MESSAGE_MAX_CHARS
from ki.store.claims import Claim
from ki.store.downstream import skip_downstream
from ki.store.status import lost_claim

log = logging.getLogger(__name__)

TRACEBACK_MAX_CHARS = 6000

Handler = Callable[[StageContext], StageOutcome]

#: Told, from the keeper's thread, that a handler passed its deadline: the outcome recorded for it.
Abandoned = Callable[["ExecutionResult"], None]

ResultKind = Literal["done", "skipped", "retry", "quarantined", "not_claimed", "claim_lost"]


@dataclass(frozen=True)
class ExecutionResult:
    """What one call did.

    Attributes:
        kind: done / skipped / retry (failed, will be retried) / quarantined /
            not_claimed (the row was not eligible) / claim_lost (the commit was refused).
        stage, source_object_id: the row.
        error_class: exception class name for retry/quarantined.
        passed: switched-off stages after this one recorded ``skipped/disabled_by_configuration``
            by the same commit (they count as processed and skipped in the run's counters).
    """

    kind: ResultKind
    stage: str
    source_object_id: int
    error_class: str | None = None
    passed: int = 0


def error_record(exc: BaseException, *, deterministic: bool, reason: str | None, infrastructure: str | None,
                 capabilities: list[str] | None = None, details: dict | None = None) -> dict:
    """The ``last_error`` JSON for a failure (spec: "What quarantine records").

    Keys: class, message (≤2,000 chars), traceback (last ≤6,000 chars), deterministic,
    reason, infrastructure (the outage in words or None), details (converter evidence, or the
    classifier's ``details``, e.g. a validation error's fields).
    """
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    record = {
        "class": type(exc).__name__,
        "message": str(exc)[:MESSAGE_MAX_CHARS],
        "traceback": tb[-TRACEBACK_MAX_CHARS:],
        "deterministic": deterministic,
        "reason": reason,
        "infrastructure": infrastructure,
    }
    details = getattr(exc, "details", None) or details
    if details:
        record["details"] = details
    if capabilities is not None:
        record["capabilities"] = capabilities
    return record


def _handlers() -> dict[str, Handler]:
    from ki.stages import STAGE_HANDLERS

    return STAGE_HANDLERS


def run_stage_for_object(
    ctx: PipelineContext,
    stage: str,
    source_object_id: int,
    *,
    run_id: int | None = None,
    keeper: ClaimKeeper | None = None,
    on_abandon: Abandoned | None = None,
) -> ExecutionResult:
    """Claim the (object, stage) row if it is eligible, run its handler, record the outcome
    (``keeper``, ``on_abandon``: see :func:`execute_claim`).

    A row that is done, running elsewhere, waiting, or quarantined is not claimed
    (``not_claimed``): a replayed task or a second worker is harmless.

    Returns: the :class:`ExecutionResult`. Never raises for a handler failure (the
    failure is recorded on the row); raises only when the database itself fails.
    """
    with ctx.db.engine.begin() as conn:
        claim = q.claim_row(conn, source_object_id, stage, worker=ctx.worker_id, run_id=run_id)
    if claim is None:
        return ExecutionResult("not_claimed", stage, source_object_id)
    return execute_claim(ctx, claim, keeper=keeper, on_abandon=on_abandon)


def run_stage_watched(ctx: PipelineContext, stage: str, source_object_id: int, *, run_id: int | None,
                      keeper: ClaimKeeper, cancelled: Callable[[], bool] = lambda: False,
                      poll_seconds: float = 0.25) -> ExecutionResult:
    """:func:`run_stage_for_object` on a thread of its own, waited for until it returns or its claim is
    abandoned at the stage's deadline (``keeper`` records ``StageTimeout``; the returned result is that
    outcome and the thread is left to die). A Hatchet task uses it, so a hung handler frees the task slot.

    Raises: what ``run_stage_for_object`` raises; ``ki.core.errors.TaskCancelled`` when ``cancelled()`` turns
    true while the handler runs (the handler goes on under its claim until it returns or its deadline
    passes, so the row never stays running past its deadline).
    """
    box: dict[str, object] = {}
    finished = threading.Event()
    caller = threading.get_ident()

    def abandoned(result: ExecutionResult) -> None:
        box.setdefault("result", result)
        finished.set()

    def body() -> None:
        BREAKERS.hand_over_probes(caller)  # a probe the caller was admitted as is this handler's request
        try:
            box.setdefault("result", run_stage_for_object(ctx, stage, source_object_id, run_id=run_id,
                                                          keeper=keeper, on_abandon=abandoned))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            box.setdefault("error", exc)
        finally:
            finished.set()

    threading.Thread(target=body, name=f"ki-{stage}-{source_object_id}", daemon=True).start()
    while not finished.wait(poll_seconds):
        if cancelled():
            from ki.core.errors import TaskCancelled

            raise TaskCancelled("cancelled by the orchestrator while the handler ran")
    if "error" in box and "result" not in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"]  # type: ignore[return-value]


def ready_for(ctx: PipelineContext) -> EnsureReady:
    """The executor's inline conversion on ``ctx``: ``oid -> (status, detail)``, another object's
    fetch/convert run through :func:`run_stage_for_object` (``ensure_source_object_ready``)."""

    def run(stage: str, source_object_id: int) -> ExecutionResult:
        return run_stage_for_object(ctx, stage, source_object_id)

    def ready(source_object_id: int) -> tuple[str, str]:
        return ensure_source_object_ready(ctx, source_object_id, run_stage=run)

    return ready


def stage_context(ctx: PipelineContext, claim: Claim, obj: SourceObjectView) -> StageContext:
    """The :class:`StageContext` a handler is given, with the executor's ``ensure_ready``."""
    return StageContext(pipeline=ctx, claim=claim, obj=obj, ready=ready_for(ctx))


@contextmanager
def _recording(ctx: PipelineContext, conn: Connection | None) -> Iterator[Connection]:
    """The connection an outcome is recorded on: the caller's autocommit connection (one
    statement = one transaction), else a pooled one in a transaction of its own."""
    if conn is not None:
        yield conn
    else:
        with ctx.db.engine.begin() as own:
            yield own


@observed
def execute_claim(ctx: PipelineContext, claim: Claim, *, keeper: ClaimKeeper | None = None,
                  conn: Connection | None = None, on_abandon: Abandoned | None = None) -> ExecutionResult:
    """``_execute_claim``: run the handler for a claim already taken and record the outcome.

    Args:
        keeper: renews the claim while the handler runs, until the stage's deadline
            (``pipeline.stages.<stage>.timeout_seconds``); past it the keeper's thread records
            ``StageTimeout`` under the fencing token (the handler's late result is refused) and calls
            ``on_abandon`` with that outcome, so the caller can stop waiting for this thread.
        conn: an AUTOCOMMIT connection the caller holds (the local runner's worker threads) to
            record the outcome on, saving a pool checkout and a BEGIN/COMMIT pair; default: a
            pooled connection per outcome.
    Raises: RunAborted on a configuration error (the row is released untouched); database
        errors while recording (the row stays running until stale-claim recovery).
    """
    plan = ctx.plan(claim.stage)
    try:
        obj = SourceObjectView.for_claim(ctx.db, claim)
    except LookupError as exc:
        return _record_failure(ctx, claim, exc, stage_max_attempts=plan.max_attempts, conn=conn)

    if not plan.enabled:
        outcome = StageOutcome(status="skipped", reason=DISABLED_BY_CONFIGURATION)
        return _record_outcome(ctx, claim, outcome, plan, conn)
    if plan.disabled_inputs:
        outcome = StageOutcome(status="skipped", reason=INPUT_STAGE_DISABLED,
                               details={"disabled_inputs": list(plan.disabled_inputs)})
        return _record_outcome(ctx, claim, outcome, plan, conn)
    if obj.deleted_at is not None:
        outcome = StageOutcome(status="skipped", reason=SOURCE_OBJECT_DELETED, halt_downstream=True)
        return _record_outcome(ctx, claim, outcome, plan, conn)

    handler = _handlers()[claim.stage]
    started = datetime.now(UTC)
    if keeper is not None:
        keeper.add(claim, timeout_seconds=plan.timeout_seconds,
                   on_expired=_expiry(ctx, claim, plan, threading.get_ident(), started, on_abandon))
    try:
        with working_on(claim.source_object_id):
            outcome = handler(stage_context(ctx, claim, obj))
    except ConfigurationError as exc:
        # ki's own request or setup is wrong: not the file's fault and not an outage to wait
        # out. The row is released unchanged (attempt given back) and the run stops, saying why.
        _release_claim(ctx, claim)
        raise RunAborted(f"{claim.stage} stopped on a configuration error: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - every failure is classified and recorded on the row
        return _record_failure(ctx, claim, exc, stage_max_attempts=plan.max_attempts, conn=conn)
    finally:
        if keeper is not None:
            keeper.discard(claim)
    return _record_outcome(ctx, claim, outcome, plan, conn)


def _expiry(ctx: PipelineContext, claim: Claim, plan: StagePlan, thread_id: int, started: datetime,
            on_abandon: Abandoned | None) -> Callable[[], None]:
    """What the keeper does when ``claim`` passes its deadline (from the keeper's thread): record
    ``StageTimeout`` with where the handler's thread ``thread_id`` hangs, then ``on_abandon(result)``
    unless the handler's own outcome was recorded first (the fencing token decides)."""

    def expired() -> None:
        deps = tuple(sorted(stage_dependencies(ctx.config).get(claim.stage, frozenset())))
        exc = StageTimeout(claim.stage, plan.timeout_seconds, deps)
        frame = sys._current_frames().get(thread_id)
        stack = "".join(traceback.format_stack(frame))[-TRACEBACK_MAX_CHARS:] if frame is not None else ""
        result = _record_failure(ctx, claim, exc, stage_max_attempts=plan.max_attempts, stack=stack,
                                 report_lost=False)
        if result.kind == "claim_lost":
            return  # the handler finished first: its outcome stands
        note_timeout(claim.stage, result.kind, (datetime.now(UTC) - started).total_seconds())
        log.warning("%s of object %s passed its deadline of %g s: abandoned (%s)", claim.stage,
                    claim.source_object_id, plan.timeout_seconds, result.kind)
        if on_abandon is not None:
            on_abandon(result)

    return expired


def _release_claim(ctx: PipelineContext, claim: Claim) -> None:
    """Give a claim back untouched (pending, the attempt not counted)."""
    with ctx.db.engine.begin() as conn:
        q.release_claim(conn, claim)


def _record_outcome(ctx: PipelineContext, claim: Claim, outcome: StageOutcome, plan: StagePlan,
                    conn: Connection | None = None) -> ExecutionResult:
    version = plan.producer_version
    last_error = None
    if outcome.status == "skipped":
        last_error = {"reason": outcome.reason or "skipped_by_handler", **({"details": outcome.details}
                                                                           if outcome.details else {})}
    if outcome.halt_downstream:  # two statements, one transaction (rare: the document ends here)
        with ctx.db.engine.begin() as tx:
            committed = q.complete_claim(tx, claim, status=outcome.status, producer_version=version,
                                         last_error=last_error)
            if committed is not None:
                skip_downstream(tx, claim.source_object_id, claim.stage, outcome.reason or "halted")
    else:
        with _recording(ctx, conn) as rec:
            committed = q.complete_claim(rec, claim, status=outcome.status, producer_version=version,
                                         last_error=last_error, unlock=plan.unlock)
    if outcome.status == "done":
        _confirm_dependencies(ctx, claim.stage, claim.source_object_id)
    if committed is None:
        _report_lost_claim(ctx, claim)
        return ExecutionResult("claim_lost", claim.stage, claim.source_object_id)
    return ExecutionResult(outcome.status, claim.stage, claim.source_object_id, passed=committed.passed)


def _report_lost_claim(ctx: PipelineContext, claim: Claim) -> None:
    """Log why a completion was refused (:func:`ki.store.status.lost_claim`): a recovered lease is a
    warning (the work is repeated), a rerun or change the pipeline asked for is routine (info)."""
    with ctx.db.engine.connect() as conn:
        lost = lost_claim(conn, claim.row_id, claim.token)
    level = logging.INFO if lost.expected else logging.WARNING
    log.log(level, "%s of object %s: this result is discarded and the stage runs again: %s",
            claim.stage, claim.source_object_id, lost.detail)


def _confirm_dependencies(ctx: PipelineContext, stage: str, source_object_id: int) -> None:
    """A completed fetch/index reached its source root/OpenSearch: close their breakers (ki.adapters.breaker)."""
    needs = stage_dependencies(ctx.config).get(stage, frozenset()) & CONFIRMED_BY_COMPLETION
    for dependency in needs:
        BREAKERS.succeeded(dependency)
        SERVED.success(dependency, source_object_id)


def _record_failure(ctx: PipelineContext, claim: Claim, exc: BaseException, *, stage_max_attempts: int,
                    conn: Connection | None = None, stack: str | None = None,
                    report_lost: bool = True) -> ExecutionResult:
    with _recording(ctx, conn) as rec:
        return _record_failure_on(ctx, rec, claim, exc, stage_max_attempts=stage_max_attempts, stack=stack,
                                  report_lost=report_lost)


def _record_failure_on(ctx: PipelineContext, rec: Connection, claim: Claim, exc: BaseException, *,
                       stage_max_attempts: int, stack: str | None, report_lost: bool) -> ExecutionResult:
    judged = blame(ctx, rec, claim, exc, classify_error(exc))
    verdict = judged.verdict
    base = ctx.config.pipeline.retry_base_seconds
    capabilities = None
    if verdict.reason in CAPABILITY_REASONS:
        from ki.adapters.convert.router import capabilities as current_capabilities

        capabilities = sorted(current_capabilities(ctx.config))
    if verdict.treatment is Treatment.infrastructure:
        delay = backoff_seconds(claim.attempts, base, cap_seconds=ctx.settings.infrastructure_retry_max_seconds)
    else:
        delay = backoff_seconds(claim.attempts, base)
    record = error_record(
        exc,
        deterministic=verdict.treatment is Treatment.deterministic,
        reason=verdict.reason,
        infrastructure=verdict.infrastructure,
        capabilities=capabilities,
        details=verdict.details,
    )
    if judged.counted:  # the evidence against the file, not the exception's own details
        record["details"] = verdict.details
    if judged.fault_since is not None:
        record[FAULT_SINCE_KEY] = judged.fault_since
    if stack:
        record["traceback"] = f"the handler was abandoned here:\n{stack}"
    if judged.breaker is not None:  # the circuit breaker counts the outage (ki.adapters.breaker)
        BREAKERS.failed(judged.breaker, record["infrastructure"] or record["message"],
                        retry_after=retry_after_of(exc), subject=claim.source_object_id)
    status = q.fail_claim(rec, claim, treatment=verdict.treatment.value, max_attempts=stage_max_attempts,
                          delay_seconds=delay, last_error=record)
    outage = (record["infrastructure"] or "") if verdict.treatment is Treatment.infrastructure else None
    note_failure(claim.stage, status=status, reason=verdict.reason, dependency=judged.breaker, infrastructure=outage)
    if status is None:
        if report_lost:
            _report_lost_claim(ctx, claim)
        return ExecutionResult("claim_lost", claim.stage, claim.source_object_id, type(exc).__name__)
    if status == "quarantined":
        log.info("quarantined %s of object %s: %s: %s", claim.stage, claim.source_object_id,
                 type(exc).__name__, record["message"][:200])
    elif status == "skipped":  # parked with a waiting reason (Treatment.park)
        log.info("%s of object %s waits (%s): %s", claim.stage, claim.source_object_id, verdict.reason,
                 record["message"][:200])
    kind: ResultKind = {"quarantined": "quarantined", "skipped": "skipped"}.get(status, "retry")  # type: ignore[assignment]
    return ExecutionResult(kind, claim.stage, claim.source_object_id, type(exc).__name__)
