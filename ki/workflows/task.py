"""The body of ki's Hatchet tasks: drive one (document, stage) row to a terminal state.

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider: each task calls
``run_stage_for_object(stage, id)``, which claims at most one row; the row stays the idempotency
boundary, so a replay or a workflow migration sees the durable state and no-ops over completed
stages) and "Failure modes" (worker death mid-stage: the replay claims the durable row and
resumes at the first unfinished stage).

How a task treats each state of its row (``drive_stage``):

* ``pending``, or ``failed`` with its retry due, of a CPU-bound stage → first wait for one of the worker
  process's CPU slots (:mod:`ki.workflows.cpu_slots`; the row stays pending meanwhile), then as below;
* ``pending``, or ``failed`` with its retry due → ``run_stage_for_object``, on a thread of its own
  (``run_stage_watched``): past the stage's deadline (``pipeline.stages.<stage>.timeout_seconds``) the
  claim keeper records ``StageTimeout`` on the row and the task stops waiting for the hung handler,
  freeing its slot — the same outcome as under the local provider;
* ``failed`` with the retry not yet due → **the task sleeps until it is due** and claims again.
  Raising instead, so that Hatchet's task retry tried later, would put the row at the mercy of
  the task's 6 retries (≈ 4.5 min of backoff at factor 5, cap 60 s), while ki's own policy may
  legitimately wait longer (an infrastructure outage is retried forever with backoff up to
  ``KI_INFRASTRUCTURE_RETRY_MAX_SECONDS``); the row-level policy decides when, Hatchet's retries
  stay for transport faults (database unreachable, worker lost). The task's execution timeout
  (``ki.workflows.dag``: six hours, or more when the stage's deadline times its attempts needs more)
  bounds the wait; when it cancels the task while a handler runs, the handler keeps its claim until it
  returns or its deadline passes (then ``StageTimeout``), so the row never stays running past it;
* ``running`` (another worker holds the claim: a replay of a task whose worker died, or a local
  runner) → wait, running ``recover_stale_claims`` every third of ``claim_timeout_seconds`` so a
  dead worker's claim is failed as ``StaleClaim`` and then claimed here;
* an earlier stage of the document is not terminal (a concurrent launch's prepare step requeued
  it) → that stage is driven first, so the task still ends with its own stage terminal;
* an earlier stage is quarantined (this one stays ``waiting``) → the document ended: ``halted``;
* ``done`` / ``skipped`` / ``quarantined`` → return;
* a row whose stage is paused by an open circuit breaker (:mod:`ki.orchestration.pausing`)
  → the task waits (the row stays pending, no attempt spent) until the breaker closes, or runs as the
  dependency's one probe when it is due.

Outputs are small JSON objects (ids and statuses, never documents: Hatchet's payload limit).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ki.adapters.breaker import BREAKERS
from ki.config.process import available_cores
from ki.core.errors import TaskCancelled
from ki.core.taxonomies import PIPELINE_STAGE_ORDER, stage_bucket
from ki.domain.context import PipelineContext
from ki.orchestration.budget import BudgetGate
from ki.orchestration.execute import run_stage_watched
from ki.orchestration.heartbeat import ClaimKeeper
from ki.orchestration.pausing import ClaimGate
from ki.orchestration.prepare import recover_stale_claims
from ki.store import batches, conveyor
from ki.store.cancel import cancel_requested
from ki.store.status import StageRow, rows_by_stage
from ki.workflows.cpu_slots import CpuSlots, cpu_bound_stages

log = logging.getLogger(__name__)

#: Longest single sleep while waiting (so cancellation and new states are noticed).
POLL_MAX_SECONDS = 2.0
#: How often a task whose stage is paused by an open circuit breaker looks again (s).
PAUSED_POLL_SECONDS = 0.25

_lock = threading.Lock()
_runtime: WorkerRuntime | None = None


#: The worker re-reads the saved configuration (and env pins) at most this often (s), so a
#: ``ki config set`` reaches running workers as it reaches the next local run.
CONFIG_RELOAD_SECONDS = 5.0


#: ``(ctx, run_id, object ids) -> DAGs triggered``: ``ki.workflows.trigger.trigger_members`` (the members
#: the batch's conveyor released, on the run's recorded document workflow).
TriggerMembers = Callable[[PipelineContext, int, list[int]], int]
#: ``(ctx, source_id, on_started) -> insertion run id``: ``ki.app.launch.launch_insertion`` for the sync hand-off
#: (``on_started(run_id)`` once the insertion run's row exists; see ki.adapters.sources.sync).
HandOff = Callable[[PipelineContext, int, Callable[[int], None]], int]


@dataclass
class WorkerRuntime:
    """Process-wide handles of a worker: the pipeline context, the claim keeper and the CPU slots.

    Attributes:
        cpu: the process's :class:`~ki.workflows.cpu_slots.CpuSlots` (``KI_WORKER_CPU_SLOTS``): a task of a
            CPU-bound stage holds one while it claims and runs its row.
        trigger_members / hand_off: what a task starts beyond its own row (the DAGs of the members
            the batch's conveyor released when a DAG ended or a convert adopted attachments; the
            insertion run after a sync). ``ki worker`` installs them (``ki.workflows.worker``), so a
            task body never imports the trigger or the launcher.
    """

    ctx: PipelineContext
    keeper: ClaimKeeper
    cpu: CpuSlots
    last_stale_check: float = 0.0
    config_loaded_at: float = 0.0
    trigger_members: TriggerMembers | None = None
    hand_off: HandOff | None = None

    def fresh_config(self) -> None:
        """Reload the configuration when it is older than :data:`CONFIG_RELOAD_SECONDS`."""
        now = time.monotonic()
        if now - self.config_loaded_at >= CONFIG_RELOAD_SECONDS:
            self.config_loaded_at = now
            self.ctx.reload_config()

    def trigger_released(self, run_id: int, oids: list[int]) -> int:
        """Trigger the DAGs of members the conveyor released (``trigger_members``). Returns how many."""
        if not oids:
            return 0
        if self.trigger_members is None:
            raise RuntimeError("this worker runtime cannot trigger DAGs (run it through ki worker)")
        return self.trigger_members(self.ctx, run_id, oids)

    def release(self, conn: Any, run_id: int, released_by: int) -> list[int]:
        """The conveyor step of member ``released_by`` (``ki.store.conveyor.release``) in ``conn``."""
        return conveyor.release(conn, run_id, released_by=released_by,
                                default_window=self.ctx.settings.hatchet_document_concurrency)


def worker_runtime(slots: int | None = None) -> WorkerRuntime:
    """The worker process's :class:`WorkerRuntime`, opened on first use (thread-safe).

    The database pool holds ``slots + 4`` connections (``KI_WORKER_SLOTS`` by default): one per
    task thread plus the keeper, the sweeper and progress writes. CPU slots: ``KI_WORKER_CPU_SLOTS``, else
    the CPUs the process may run on (:func:`~ki.config.process.available_cores`).
    """
    global _runtime
    with _lock:
        if _runtime is None:
            from ki.config.loader import ProcessSettings
            from ki.store.db import connect

            settings = ProcessSettings()
            n = slots or settings.worker_slots
            ctx = PipelineContext.open(settings, db=connect(settings, pool_size=n + 4))
            timeout = ctx.config.pipeline.claim_timeout_seconds
            keeper = ClaimKeeper(ctx.db, interval_seconds=max(0.2, min(30.0, timeout / 3))).start()
            _runtime = WorkerRuntime(ctx, keeper, CpuSlots(settings.worker_cpu_slots or available_cores()))
        return _runtime


def _rows(ctx: PipelineContext, oid: int) -> dict[str, StageRow]:
    with ctx.db.engine.connect() as conn:
        return rows_by_stage(conn, oid)


def _run_cancelled(ctx: PipelineContext, run_id: int) -> bool:
    with ctx.db.engine.connect() as conn:
        return cancel_requested(conn, run_id)


def _sleep(seconds: float, cancelled: Callable[[], bool]) -> None:
    end = time.monotonic() + max(0.0, seconds)
    while True:
        if cancelled():
            raise TaskCancelled("cancelled by the orchestrator")
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.25))


#: Longest error message a task's output carries (characters; the row keeps the whole error).
OUTPUT_MESSAGE_MAX = 300


def failure_output(row: StageRow | None) -> dict[str, Any]:
    """What a task's output says about a quarantined row (the Hatchet dashboard shows a task's output):
    ``error_class`` (ki's error class, ``last_error.class``), ``reason`` (the row's classified reason) and
    ``message`` (``last_error.message``, at most :data:`OUTPUT_MESSAGE_MAX` characters); {} without a row."""
    if row is None:
        return {}
    error = row.last_error or {}
    return {"error_class": error.get("class"), "reason": row.reason,
            "message": (error.get("message") or "")[:OUTPUT_MESSAGE_MAX]}


def drive_stage(rt: WorkerRuntime, run_id: int, oid: int, stage: str, *,
                cancelled: Callable[[], bool] = lambda: False) -> dict[str, Any]:
    """Drive ``stage`` of object ``oid`` (and any unfinished earlier stage) to a terminal state.

    Returns ``{"stage", "object", "status", "executions"}``: ``status`` is the row's console
    bucket (``done``, ``skipped``, ``disabled``, ``quarantined``), ``halted`` (an earlier stage is
    quarantined, so this row stays waiting; ``by`` names it) or ``missing`` (the object is gone); a
    quarantined or halted result adds the quarantined row's :func:`failure_output`; ``executions``
    lists the ``ExecutionResult.kind`` of every call made (``not_claimed`` for a replay over a
    done row is not listed: no call claims it).

    Raises:
        RunAborted: a stage hit a configuration error (the row was released untouched).
        TaskCancelled: ``cancelled()`` turned true while waiting.
        sqlalchemy errors: the database is unreachable (Hatchet's task retry takes over).
    """
    ctx = rt.ctx
    upto = PIPELINE_STAGE_ORDER.index(stage)
    executions: list[str] = []
    stale_every = max(0.5, ctx.config.pipeline.claim_timeout_seconds / 3)
    gate = ClaimGate(ctx)  # circuit breakers: a paused stage waits here
    gate.attach()
    budget = BudgetGate(ctx, run_id=run_id)
    while True:
        rows = _rows(ctx, oid)
        if not rows:
            return {"stage": stage, "object": oid, "status": "missing", "executions": executions}
        target: StageRow | None = None
        for s in PIPELINE_STAGE_ORDER[: upto + 1]:
            row = rows.get(s)
            if row is None:
                continue
            if row.status in ("pending", "running", "failed"):
                target = row
                break
            if row.status == "quarantined" and s != stage:
                return {"stage": stage, "object": oid, "status": "halted", "by": s, "executions": executions,
                        **failure_output(row)}
        if target is None:
            own = rows.get(stage)
            status = stage_bucket(own.status, own.reason) if own else "missing"
            if status == "waiting":
                status = "halted"
            out = {"stage": stage, "object": oid, "status": status, "executions": executions}
            return out | failure_output(own) if status == "quarantined" else out
        now = datetime.now(UTC)
        if _run_cancelled(ctx, run_id):  # ki run cancel: claim nothing more for this batch
            raise TaskCancelled(f"run {run_id} was cancelled")
        if target.status == "pending" or (target.status == "failed" and target.next_retry_at is not None
                                          and target.next_retry_at <= now):
            # a CPU-bound stage waits for one of the process's CPU slots first (ki.workflows.cpu_slots): the row
            # stays pending meanwhile, no attempt spent, no deadline running
            cpu_bound = cpu_bound_stages(ctx.config)
            cpu = rt.cpu.hold(target.stage, cancelled, limit=cpu_bound[target.stage]) \
                if target.stage in cpu_bound else nullcontext(False)
            with cpu as waited:
                if waited and _run_cancelled(ctx, run_id):
                    raise TaskCancelled(f"run {run_id} was cancelled")
                admitted, probe = (False, None) if target.stage in budget.held() else gate.admit(target.stage)
                # its dependency is paused (ki.adapters.breaker), or a spending cap holds it
                # (ki.orchestration.budget): the row stays pending, no attempt spent
                if admitted:
                    try:
                        result = run_stage_watched(ctx, target.stage, oid, run_id=run_id, keeper=rt.keeper,
                                                   cancelled=cancelled)
                    finally:
                        budget.spent(target.stage)
                        if probe is not None:
                            BREAKERS.end_probe(probe)
            if not admitted:  # waits with the CPU slot given back
                _sleep(PAUSED_POLL_SECONDS, cancelled)
                continue
            if result.kind != "not_claimed":
                executions.append(result.kind)
            else:
                _sleep(0.05, cancelled)  # locked by a concurrent claimer this instant
            continue
        if target.status == "failed":
            due = target.next_retry_at or now
            _sleep(min(POLL_MAX_SECONDS, max(0.01, (due - now).total_seconds())), cancelled)
            continue
        # running elsewhere: wait for it to finish, or for its claim to go stale
        if time.monotonic() - rt.last_stale_check >= stale_every:
            rt.last_stale_check = time.monotonic()
            recover_stale_claims(ctx)
        _sleep(min(POLL_MAX_SECONDS, stale_every / 2), cancelled)


def stage_task(stage: str, run_id: int, oid: int, *, final: bool,
               cancelled: Callable[[], bool] = lambda: False) -> dict[str, Any]:
    """The body of every stage task: drive the row, refresh the batch's progress, and (final
    task) record the document's end, which completes the run when it was the last document, and
    release and trigger the batch's next members (the conveyor, :mod:`ki.store.conveyor`; the end
    and the release commit together under the per-run lock, the trigger follows the commit, and a
    replay triggers the same successors again, which collide on their idempotency keys).
    After ``convert``, embedded objects the container registered (attachments) join the batch
    (``batches.adopt_children``) and are released into free slots of its window, as the local runner
    would run them in the same run."""
    rt = worker_runtime()
    rt.fresh_config()
    out = drive_stage(rt, run_id, oid, stage, cancelled=cancelled)
    released: list[int] = []
    if stage == "convert":  # embedded objects the container registered join its batch
        with rt.ctx.db.engine.begin() as conn:
            if batches.adopt_children(conn, run_id, oid):
                released = rt.release(conn, run_id, oid)
    with rt.ctx.db.engine.begin() as conn:
        if final:
            outcome = batches.document_outcome(conn, oid)
            # members a later classification re-opened (this one too) are owed a DAG again before the run ends
            finished = batches.finish_member(conn, run_id, oid, "requeued" if outcome == "unfinished" else outcome,
                                          before_finalize=conveyor.reopen_finished)
            if finished:
                out["run_status"] = finished
            released = rt.release(conn, run_id, oid)
        else:
            batches.refresh_progress(conn, run_id, force=False)
    if released:
        out["triggered"] = rt.trigger_released(run_id, released)
    return out


def failure_hook(run_id: int, oid: int, errors: dict[str, str], *, workflow_run_id: str | None = None
                 ) -> dict[str, Any]:
    """The DAG failed in the orchestrator (a task exhausted its retries or was cancelled): record
    the member as ``orchestration_failed`` with the error so the run can end (``failed``, saying
    why), and release the batch's next members; the document's rows stay as they are, so the next
    run picks them up.

    A DAG the sweeper superseded (cancelled and replaced, see ``ki.workflows.sweeper``) is no
    longer the member's recorded workflow run: its failure is ignored (the replacement ends it)."""
    rt = worker_runtime()
    message = "; ".join(f"{k}: {v}" for k, v in sorted(errors.items()))[:1500] or "task failed"
    with rt.ctx.db.engine.begin() as conn:
        if workflow_run_id is not None:
            current = batches.member_workflow_run(conn, run_id, oid)
            if current is not None and current != workflow_run_id:
                return {"object": oid, "outcome": "superseded"}
        status = batches.finish_member(conn, run_id, oid, batches.OUTCOME_ORCHESTRATION_FAILED,
                                    error=f"object {oid}: {message}")
        released = rt.release(conn, run_id, oid)
    return {"object": oid, "outcome": batches.OUTCOME_ORCHESTRATION_FAILED, "run_status": status,
            "triggered": rt.trigger_released(run_id, released)}
