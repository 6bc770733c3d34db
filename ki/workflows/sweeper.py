"""The run sweeper: resolve ``pipeline_runs`` rows that nothing will ever advance.

Spec: insertion-pipeline.md "Orchestration" (the sweeper; ``KI_RUN_SWEEP_SECONDS``,
``KI_RUN_SILENT_MINUTES``, ``KI_RUN_ABANDONED_HOURS``). It runs on a timer in ``ki worker``
(:class:`SweeperThread`), from ``ki insert`` while it waits, and opportunistically from status
reads (:func:`sweep_if_due`). It looks at active (``queued``/``running``) runs of the ``hatchet``
provider; ``local`` runs are swept by :mod:`ki.orchestration.run_sweep` (their process's
liveness), which :func:`sweep_if_due` runs first.

Verdicts, in order, for each active run:

1. **alive** — liveness is ``pipeline_runs.updated_at`` and, for a batch, the newest
   ``processing_state.updated_at`` of its documents; silent for less than
   ``KI_RUN_SILENT_MINUTES`` → not examined.
2. **completed** — a batch whose documents are all terminal (no pending/running/failed row) is
   completed by the pipeline's own aggregation (``batches.complete_if_terminal``, the same path
   as the final task).
3. Otherwise Hatchet is asked about the recorded ``workflow_run_id``:

   * "no such workflow run" (REST 404, or no id was ever recorded) → **failed** now with that
     cause; a 404 for a run younger than :data:`LOOKUP_GRACE_SECONDS` is not trusted (Hatchet's
     read side fills asynchronously);
   * a terminal verdict (completed/failed/cancelled) → **failed** for a sync run; for an
     insertion batch it is **not conclusive** (the recorded id is only the first workflow of a
     bulk trigger) and the run is left running;
   * queued/running → left running;
   * the orchestrator cannot be asked (unreachable, no token) → **failed** only after
     ``KI_RUN_ABANDONED_HOURS`` of silence (longer than the longest allowed task), with the
     recorded cause; before that it is left running.

   Before asking, **resumed** (the conveyor; decision "Hatchet DAG shape and pacing"): a batch
   whose conveyor stopped (a member released but never triggered, or members waiting while its
   window has a free slot: the DAG that should have released them ended without doing so, e.g.
   its worker died between its commit and the trigger and Hatchet gave up on the task) gets those
   members triggered (``trigger.advance_conveyor``; the idempotency keys make a member its
   releaser triggered meanwhile collide instead of starting twice).
4. **resumed** (ki's addition for engine gotcha "lost task assignment", docs/hatchet-engine.md):
   an insertion batch left running although it is silent, with none of its rows claimed and no
   retry pending, is stalled in the engine (measured after an engine restart: a task assigned to a
   worker that never received it, or a DAG whose next task was never created). Its DAGs that
   Hatchet reports running are superseded (``recovery.supersede_stalled``: a replacement
   DAG per document, the stalled one cancelled); the run stays running and completes normally.

Long before the silence threshold, ``ki worker``'s timer also runs the early trigger check
(:func:`ki.workflows.recovery.confirm_triggers`, every ``KI_HATCHET_TRIGGER_CHECK_SECONDS``): acknowledged
DAGs that never showed a sign of life are looked up by the run ids the engine returned, and the ones it does
not know are triggered again; so are slots whose trigger was never acknowledged and is overdue.

A failed run keeps its rows and counters (never deleted) and its ``error`` says why; its batch
is no longer active, so the next launch reserves its unfinished documents again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from ki.domain.context import PipelineContext
from ki.orchestration.run_sweep import sweep_local_runs
from ki.store import batches, runs
from ki.store.conveyor import conveyor_states
from ki.workflows.client import hatchet_client

log = logging.getLogger(__name__)

#: A 404 for a run row younger than this is "not yet visible", not "absent" (seconds).
LOOKUP_GRACE_SECONDS = 120.0

Answer = Literal["absent", "terminal", "active", "unreachable"]
VerdictKind = Literal["alive", "completed", "failed", "left_running", "resumed"]
Lookup = Callable[[str], tuple[Answer, str]]
Resume = Callable[..., int]


@dataclass(frozen=True)
class SweepVerdict:
    """What the sweeper concluded about one run.

    Attributes:
        run_id, kind: the run.
        verdict: alive (silent too briefly to examine), completed, failed, left_running, resumed.
        reason: why, in words (the ``error`` written on a failed run).
        silent_seconds: the run's silence when examined.
    """

    run_id: int
    kind: str
    verdict: VerdictKind
    reason: str
    silent_seconds: float


def hatchet_lookup(workflow_run_id: str) -> tuple[Answer, str]:
    """Ask Hatchet about a workflow run: (answer, detail). Never raises.

    absent: REST 404 ("no such workflow run"); terminal: COMPLETED/FAILED/CANCELLED; active:
    QUEUED/RUNNING; unreachable: anything else (connection refused, timeout, no token).
    """
    try:
        from hatchet_sdk import V1TaskStatus
        from hatchet_sdk.clients.rest.exceptions import NotFoundException


        client = hatchet_client(once=True)
        try:
            status = client.runs.get_status(workflow_run_id)
        except NotFoundException:
            return "absent", f"Hatchet has no workflow run {workflow_run_id}"
    except Exception as exc:  # noqa: BLE001 - every other failure means "cannot ask"
        return "unreachable", f"{type(exc).__name__}: {str(exc)[:300]}"
    name = getattr(status, "value", str(status))
    if status in (V1TaskStatus.COMPLETED, V1TaskStatus.FAILED, V1TaskStatus.CANCELLED):
        return "terminal", name
    return "active", name


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _supersede(ctx: PipelineContext, run_id: int, *, since: datetime) -> int:
    # imported here: ``ki status`` sweeps opportunistically and must not pay for the trigger's imports
    from ki.workflows.recovery import supersede_stalled

    return supersede_stalled(ctx, run_id, since=since)


def _advance(ctx: PipelineContext, run_id: int) -> int:
    from ki.workflows.trigger import advance_conveyor  # see _supersede

    return advance_conveyor(ctx, run_id, released_by=None, every_releaser=True)


def _stalled(st: batches.BatchState) -> bool:
    """Nothing of the batch is claimed and no retry is pending, yet documents are unfinished."""
    now = datetime.now(UTC)
    return (st.kind != runs.KIND_SYNC and st.unfinished_members > 0 and st.running_rows == 0
            and (st.next_retry_at is None or st.next_retry_at <= now))


def sweep_runs(ctx: PipelineContext, *, run_ids: Sequence[int] | None = None,
               lookup: Lookup | None = None, resume: Resume | None = None,
               advance: Callable[[PipelineContext, int], int] | None = None) -> list[SweepVerdict]:
    """Examine the active ``hatchet`` runs (or ``run_ids``) and resolve the stranded ones.

    Args:
        run_ids: only these runs (still only if active); default every active hatchet run.
        lookup: how to ask the orchestrator (default :func:`hatchet_lookup`).
        resume: how to supersede a stalled batch's DAGs (default ``supersede_stalled``).
        advance: how to restart a stopped conveyor (default ``advance_conveyor``).
    Returns: one :class:`SweepVerdict` per active run examined, in id order.
    """
    lookup = lookup or hatchet_lookup
    resume = resume or _supersede
    advance = advance or _advance
    settings = ctx.settings
    with ctx.db.engine.connect() as conn:
        ids = list(run_ids) if run_ids is not None else runs.active_run_ids(conn, provider="hatchet")
        states = [s for s in batches.batch_states(conn, ids)
                  if s.status in runs.ACTIVE_RUN_STATUSES and s.provider == "hatchet"]
        belts = conveyor_states(conn, [s.run_id for s in states if s.kind != runs.KIND_SYNC])
    out: list[SweepVerdict] = []
    for st in states:
        silent = st.seconds_silent
        if silent < settings.run_silent_minutes * 60:
            out.append(SweepVerdict(st.run_id, st.kind, "alive", f"active {_minutes(silent)} ago", silent))
            continue
        if st.kind != runs.KIND_SYNC and st.non_terminal_objects == 0:
            with ctx.db.engine.begin() as conn:
                status = batches.complete_if_terminal(conn, st.run_id)
            if status is not None:
                out.append(SweepVerdict(st.run_id, st.kind, "completed" if status == "completed" else "failed",
                                        "every document of the batch is terminal", silent))
                continue
        belt = belts.get(st.run_id)
        if belt is not None and belt.stopped:
            try:
                n = advance(ctx, st.run_id)
            except Exception as exc:  # noqa: BLE001 - report; the next sweep tries again
                log.warning("restarting the conveyor of run %s failed: %s", st.run_id, exc)
                n = 0
            if n:
                out.append(SweepVerdict(st.run_id, st.kind, "resumed",
                                        f"conveyor stopped for {_minutes(silent)} ({belt.stranded} member(s) released "
                                        f"but never triggered, {belt.waiting} waiting, {belt.in_flight} of "
                                        f"{belt.window} in flight): triggered {n} document DAG(s)", silent))
                continue
        verdict, answer = _ask(st, lookup, silent, settings.run_abandoned_hours)
        if verdict.verdict == "left_running" and answer in ("active", "terminal") and _stalled(st):
            try:
                n = resume(ctx, st.run_id, since=st.started_at - timedelta(minutes=5))
            except Exception as exc:  # noqa: BLE001 - report; the next sweep tries again
                log.warning("superseding stalled DAGs of run %s failed: %s", st.run_id, exc)
                n = 0
            if n:
                verdict = SweepVerdict(st.run_id, st.kind, "resumed",
                                       f"stalled for {_minutes(silent)} with nothing claimed while Hatchet reports "
                                       f"it running: superseded {n} document DAG(s)", silent)
        if verdict.verdict == "failed":
            with ctx.db.engine.begin() as conn:
                if not batches.fail_run(conn, st.run_id, verdict.reason):
                    continue  # finished meanwhile
            log.warning("sweeper failed run %s: %s", st.run_id, verdict.reason)
        out.append(verdict)
    return out


def _ask(st: batches.BatchState, lookup: Lookup, silent: float, abandoned_hours: float
         ) -> tuple[SweepVerdict, Answer | None]:
    """The orchestrator's verdict on an examined run: (verdict, what the orchestrator answered)."""
    what = "sync run" if st.kind == runs.KIND_SYNC else "batch"
    if not st.workflow_run_id:
        return SweepVerdict(st.run_id, st.kind, "failed",
                            f"sweeper: no workflow run was ever recorded for this {what} (silent "
                            f"{_minutes(silent)}); nothing will advance it", silent), None
    answer, detail = lookup(st.workflow_run_id)
    return _verdict(st, answer, detail, silent, abandoned_hours, what), answer


def _verdict(st: batches.BatchState, answer: Answer, detail: str, silent: float, abandoned_hours: float,
             what: str) -> SweepVerdict:
    age = (datetime.now(UTC) - st.started_at).total_seconds()
    if answer == "absent" and age < LOOKUP_GRACE_SECONDS:
        return SweepVerdict(st.run_id, st.kind, "left_running", f"{detail}, but the run is only {age:.0f} s old",
                            silent)
    if answer == "absent":
        return SweepVerdict(st.run_id, st.kind, "failed",
                            f"sweeper: no such workflow run: {detail} (the orchestrator forgot this {what}; silent "
                            f"{_minutes(silent)}, {st.non_terminal_objects} document(s) unfinished)", silent)
    if answer == "terminal" and st.kind == runs.KIND_SYNC:
        return SweepVerdict(st.run_id, st.kind, "failed",
                            f"sweeper: workflow run {st.workflow_run_id} ended {detail} without finishing the sync "
                            f"run (silent {_minutes(silent)})", silent)
    if answer == "unreachable":
        if silent >= abandoned_hours * 3600:
            return SweepVerdict(st.run_id, st.kind, "failed",
                                f"sweeper: abandoned after {_minutes(silent)} of silence (KI_RUN_ABANDONED_HOURS="
                                f"{abandoned_hours:g}); the orchestrator could not be asked: {detail}", silent)
        return SweepVerdict(st.run_id, st.kind, "left_running",
                            f"orchestrator unreachable ({detail}); silent {_minutes(silent)}, fails after "
                            f"{abandoned_hours:g} h", silent)
    if answer == "terminal":
        return SweepVerdict(st.run_id, st.kind, "left_running",
                            f"first workflow run {st.workflow_run_id} is {detail}; for an insertion batch only "
                            f"absence is conclusive", silent)
    return SweepVerdict(st.run_id, st.kind, "left_running", f"workflow run {st.workflow_run_id} is {detail}", silent)


_last_opportunistic = [0.0]
_opportunistic_lock = threading.Lock()


def sweep_if_due(ctx: PipelineContext) -> list[SweepVerdict]:
    """Opportunistic sweep from a status read: local runs whose process is gone every time
    (:func:`ki.orchestration.run_sweep.sweep_local_runs`, cheap, no orchestrator asked); the
    Hatchet runs at most once per ``KI_RUN_SWEEP_SECONDS`` per process, only when the provider is
    ``hatchet``; never raising. Returns the Hatchet verdicts (empty when skipped)."""
    sweep_local_runs(ctx)
    every = ctx.settings.run_sweep_seconds
    if not every or ctx.config.components.orchestrator_provider != "hatchet":
        return []
    with _opportunistic_lock:
        if time.monotonic() - _last_opportunistic[0] < every and _last_opportunistic[0]:
            return []
        _last_opportunistic[0] = time.monotonic()
    try:
        return sweep_runs(ctx)
    except Exception as exc:  # noqa: BLE001 - a status read must not fail because of the sweep
        log.warning("opportunistic sweep failed: %s", exc)
        return []


class SweeperThread(threading.Thread):
    """``ki worker``'s timer: :func:`sweep_runs` every ``KI_RUN_SWEEP_SECONDS``, and the early trigger check
    (:func:`ki.workflows.recovery.confirm_triggers`) every ``KI_HATCHET_TRIGGER_CHECK_SECONDS`` (0 disables
    either; :attr:`interval` is the shorter non-zero one, 0 when both are off).

    Several workers sweeping at once is harmless: every resolution is a conditional update of an
    active run under its advisory lock, and a re-trigger collides on its idempotency key.
    """

    def __init__(self, ctx: PipelineContext, interval_seconds: float | None = None,
                 check_seconds: float | None = None):
        super().__init__(name="ki-run-sweeper", daemon=True)
        self.ctx = ctx
        self.sweep_every = ctx.settings.run_sweep_seconds if interval_seconds is None else interval_seconds
        self.check_every = ctx.settings.hatchet_trigger_check_seconds if check_seconds is None else check_seconds
        self.interval = min([x for x in (self.sweep_every, self.check_every) if x] or [0])
        self.stop_event = threading.Event()
        self.verdicts: list[SweepVerdict] = []

    def run(self) -> None:
        last_sweep = last_check = time.monotonic()
        while self.interval and not self.stop_event.wait(self.interval):
            now = time.monotonic()
            if self.check_every and now - last_check >= self.check_every - 0.01:
                last_check = now
                try:
                    from ki.workflows.recovery import confirm_triggers  # see _supersede

                    confirm_triggers(self.ctx)
                except Exception as exc:  # noqa: BLE001 - keep the timer alive through a database blip
                    log.warning("early trigger check failed: %s", exc)
            if self.sweep_every and now - last_sweep >= self.sweep_every - 0.01:
                last_sweep = now
                try:
                    self.verdicts = sweep_runs(self.ctx)
                except Exception as exc:  # noqa: BLE001 - keep the timer alive through a database blip
                    log.warning("run sweep failed: %s", exc)

    def stop(self) -> None:
        self.stop_event.set()
