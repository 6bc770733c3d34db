"""``launch_insertion``, ``launch_sync``, ``wait_for_run``: the one entry of every trigger, above both providers.

Spec: insertion-pipeline.md "Orchestration": creates the pipeline_runs ledger
row and hands it to the configured provider. ``local`` runs
``PipelineRunner.run_until_idle()`` in this process; ``hatchet`` reserves the
batch and bulk-triggers one DAG per document (:mod:`ki.workflows.trigger`),
then returns at once or, with ``wait=True`` (``ki insert``), polls the rows
until the run ends (:func:`wait_for_run`). The run row records the scalar
counters (processed, done, skipped, retried, quarantined). A sync run
(:func:`launch_sync`) scans a source (in this process for ``local``, in the
``ki-sync`` Hatchet task for ``hatchet``) and hands off to an insertion run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy.exc import IntegrityError

from ki.adapters.sources.scan import ScanReport, ScanScope
from ki.adapters.sources.sync import HandOff, run_sync_body
from ki.core.errors import OrchestratorUnavailable, SyncAlreadyRunning
from ki.core.startup import TIMELINE
from ki.domain.context import PipelineContext
from ki.orchestration.cancel import end_local_cancelled
from ki.orchestration.prepare import run_prepare_steps
from ki.orchestration.run_sweep import sweep_local_runs
from ki.orchestration.runner import PipelineRunner, RunCounters, RunnerStatus
from ki.store import batches, runs, sync_lock
from ki.workflows.client import hatchet_client
from ki.workflows.sweeper import sweep_runs
from ki.workflows.trigger import trigger_insertion, trigger_sync

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSummary:
    """The finished run: its id, final status and counters."""

    run_id: int
    status: str
    counters: RunCounters
    error: str | None = None


def _create_run(ctx: PipelineContext, *, trigger: str, source_id: int | None, label: str,
                status: str = "running") -> int:
    with ctx.db.engine.begin() as conn:
        provider = ctx.config.components.orchestrator_provider
        return runs.create_run(conn, kind=runs.KIND_INSERTION, label=label, status=status, source_id=source_id,
                               provider=provider, trigger=trigger,
                               worker=ctx.worker_id if provider == "local" else None)


def _finish_run(ctx: PipelineContext, run_id: int, counters: RunCounters, status: str, error: str | None) -> None:
    with ctx.db.engine.begin() as conn:
        runs.finish_run(conn, run_id, counters, status, error)


def _write_progress(ctx: PipelineContext, run_id: int, counters: RunCounters) -> None:
    with ctx.db.engine.begin() as conn:
        runs.write_progress(conn, run_id, counters)


def launch_insertion(
    ctx: PipelineContext,
    *,
    trigger: str = "cli",
    source_id: int | None = None,
    label: str = "Insertion",
    workers: int | None = None,
    wait_for_retries_seconds: float | None = None,
    on_tick: Callable[[RunnerStatus], None] | None = None,
    wait: bool = False,
    on_started: Callable[[int], None] | None = None,
    released_object: int | None = None,
) -> RunSummary:
    """Create the pipeline_runs row and run it with the configured provider.

    Args:
        trigger: who started it (``cli``, ``quarantine_retry``, ``api``...).
        source_id: the source the run was started for (None: all pending work).
        workers: local pool size (default ``KI_WORKERS``).
        wait_for_retries_seconds: wait for retries due within this bound
            (default ``KI_INSERT_WAIT_RETRY_SECONDS``).
        on_tick: progress callback (local provider; hatchet provider while waiting).
        wait: hatchet provider: poll the rows until the run ends (``ki insert``); otherwise return
            as soon as the batch is triggered (status ``running``). The local provider always waits.
        on_started: called with the run id once the pipeline_runs row exists (the console returns
            the run of a local launch it runs in a background thread).
        released_object: a quarantine retry (``ki quarantine retry``) of this object: the run's prepare
            steps run as for every run; then only the work the retry released — the object's rows and its
            embedded documents' — is run (local; other sources' pending work is left to their runs), and
            the call returns when that work is finished (hatchet: the batch is triggered and the call waits
            for the object's tree; the status is the run's at that moment, maybe ``running``). Its
            counters then count that object's executions.
    Returns: the RunSummary (status ``completed``, ``failed`` or ``cancelled`` — ``ki run cancel`` stopped it,
        :mod:`ki.orchestration.cancel`; ``running`` for an unawaited hatchet run).
    Raises:
        OrchestratorUnavailable: the provider is ``hatchet`` and no engine is configured (nothing
            is written), or the engine refused the trigger (the run row is failed with the cause).
    """
    ctx.reload_config()
    provider = ctx.config.components.orchestrator_provider
    retry_wait = (ctx.settings.insert_wait_retry_seconds if wait_for_retries_seconds is None
                  else wait_for_retries_seconds)
    if provider == "hatchet":
        summary = _launch_hatchet(ctx, trigger=trigger, source_id=source_id, label=label, on_tick=on_tick,
                                  wait=wait and released_object is None, on_started=on_started)
        if released_object is None:
            return summary
        return _await_released(ctx, summary.run_id, released_object, wait=retry_wait)
    if provider != "local":  # the config validator refuses this too: fail closed
        raise OrchestratorUnavailable(f"unknown orchestrator provider {provider!r}")
    sweep_local_runs(ctx)  # runs of ended processes fail with their cause; this run adopts their work
    run_id = _create_run(ctx, trigger=trigger, source_id=source_id, label=label)
    TIMELINE.mark("run row")
    if on_started is not None:
        on_started(run_id)
    if released_object is not None:
        run_prepare_steps(ctx)  # as every run's: a retry must not skip them
        return _run_released(ctx, run_id, released_object, wait=retry_wait)
    wait = retry_wait
    last_flush = [0.0]

    def tick(status: RunnerStatus) -> None:
        now = time.monotonic()
        if now - last_flush[0] >= 1.0:
            _write_progress(ctx, run_id, status.counters)
            last_flush[0] = now
        if on_tick is not None:
            on_tick(status)

    runner = PipelineRunner(ctx, run_id=run_id, workers=workers, wait_for_retries_seconds=wait, on_tick=tick)
    try:
        counters = runner.run_until_idle()
    except Exception as exc:
        log.exception("insertion run %s failed", run_id)
        _finish_run(ctx, run_id, runner.counters, "failed", f"{type(exc).__name__}: {exc}")
        return RunSummary(run_id, "failed", runner.counters, f"{type(exc).__name__}: {exc}")
    if runner.cancelled:
        note = end_local_cancelled(ctx, run_id, counters)
        return RunSummary(run_id, "cancelled", counters, note)
    _finish_run(ctx, run_id, counters, "completed", None)
    return RunSummary(run_id, "completed", counters)


def hand_off_to_insertion(ctx: PipelineContext, source_id: int, on_started: Callable[[int], None]) -> int:
    """A sync task's hand-off on the Hatchet worker: launch an insertion run of the source (trigger ``sync``),
    calling ``on_started(run id)`` once its row exists. Returns the run's id (spec: insertion-pipeline.md
    "Orchestration": a sync run hands off to an insertion run)."""
    return launch_insertion(ctx, trigger="sync", source_id=source_id, on_started=on_started).run_id


def _await_released(ctx: PipelineContext, run_id: int, source_object_id: int, *, wait: float,
                    poll_seconds: float = 0.5) -> RunSummary:
    """Hatchet: the batch was triggered (the engine runs every pending row); return once the released
    object's tree is finished (or only retries beyond ``wait`` s are left), with the run's status then."""
    deadline = time.monotonic() + wait
    while not (work := _object_work(ctx, source_object_id)).finished:
        if not work.eligible and not work.running and time.monotonic() > deadline:
            break
        time.sleep(poll_seconds)
    status, counters, error = run_counters(ctx, run_id)
    return RunSummary(run_id, status, counters, error)


def _object_work(ctx: PipelineContext, source_object_id: int):
    from ki.store.status import object_work

    with ctx.db.engine.connect() as conn:
        return object_work(conn, source_object_id)


def _run_released(ctx: PipelineContext, run_id: int, source_object_id: int, *, wait: float,
                  poll_seconds: float = 0.5) -> RunSummary:
    """Local: run the released object's tree — its rows and its embedded documents' — stage by stage through
    :func:`ki.orchestration.execute.run_stage_for_object`, until it is finished (a row another process
    holds is waited for, a retry due within ``wait`` s too; a later one is left for the next run)."""
    from datetime import UTC, datetime

    from ki.orchestration.execute import run_stage_for_object
    from ki.orchestration.heartbeat import ClaimKeeper

    deadline = time.monotonic() + wait
    counters = RunCounters()
    keeper = ClaimKeeper(ctx.db, interval_seconds=max(0.2, min(30.0, ctx.config.pipeline.claim_timeout_seconds / 3)))
    keeper.start()
    try:
        while not (work := _object_work(ctx, source_object_id)).finished:
            if work.eligible:
                for oid, stage in work.eligible:
                    started = time.perf_counter()
                    result = run_stage_for_object(ctx, stage, oid, run_id=run_id, keeper=keeper)
                    if result.kind != "not_claimed":
                        counters.add(result, time.perf_counter() - started)
                _write_progress(ctx, run_id, counters)
                continue
            if not work.running:  # only retries are left: wait for one due within the budget
                due_in = (work.due - datetime.now(UTC)).total_seconds() if work.due else float("inf")
                if time.monotonic() + due_in > deadline:
                    break
            time.sleep(poll_seconds)
    except Exception as exc:
        log.exception("retry run %s failed", run_id)
        _finish_run(ctx, run_id, counters, "failed", f"{type(exc).__name__}: {exc}")
        return RunSummary(run_id, "failed", counters, f"{type(exc).__name__}: {exc}")
    finally:
        keeper.stop()
    _finish_run(ctx, run_id, counters, "completed", None)
    return RunSummary(run_id, "completed", counters)


def _launch_hatchet(ctx: PipelineContext, *, trigger: str, source_id: int | None, label: str,
                    on_tick: Callable[[RunnerStatus], None] | None, wait: bool,
                    on_started: Callable[[int], None] | None = None) -> RunSummary:
    """The hatchet provider: fail closed without a client, else create the row (``queued``),
    trigger the batch, and optionally wait for it (spec: "Hatchet provider")."""
    hatchet_client()  # no token → OrchestratorUnavailable before anything is written
    run_id = _create_run(ctx, trigger=trigger, source_id=source_id, label=label, status="queued")
    if on_started is not None:
        on_started(run_id)
    trigger_insertion(ctx, run_id)
    if wait:
        status, counters, error = wait_for_run(ctx, run_id, on_tick=on_tick)
    else:
        status, counters, error = run_counters(ctx, run_id)
    return RunSummary(run_id, status, counters, error)


def run_counters(ctx: PipelineContext, run_id: int) -> tuple[str, RunCounters, str | None]:
    """(status, RunCounters, error) of a run row."""
    with ctx.db.engine.connect() as conn:
        r = runs.get_run(conn, run_id)
    if r is None:
        raise LookupError(f"pipeline run {run_id} does not exist")
    return r.status, RunCounters(processed=r.processed, done=r.done, skipped=r.skipped, retried=r.retried,
                                 quarantined=r.quarantined), r.error


def wait_for_run(ctx: PipelineContext, run_id: int, *, on_tick: Callable[[RunnerStatus], None] | None = None,
                 poll_seconds: float = 0.5, timeout_seconds: float | None = None
                 ) -> tuple[str, RunCounters, str | None]:
    """Poll the run row until it is no longer active, calling ``on_tick(RunnerStatus)`` each poll.

    The status carries the run row's counters, the batch's claimed rows (``active``) and, when
    only retries are outstanding, the earliest one due (``waiting_for_retry``). Every
    ``KI_RUN_SWEEP_SECONDS`` the run is offered to the sweeper (it examines only a silent run).
    Returns (status, RunCounters, error); on ``timeout_seconds`` the status is still ``running``.
    """
    deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
    sweep_every = ctx.settings.run_sweep_seconds
    last_sweep = time.monotonic()
    states: list[batches.BatchState] = []
    last_states = 0.0
    while True:
        status, counters, error = run_counters(ctx, run_id)
        if on_tick is not None:
            if time.monotonic() - last_states >= 2.0:  # the batch aggregate reads every row of the batch
                with ctx.db.engine.connect() as conn:
                    states = batches.batch_states(conn, [run_id])
                last_states = time.monotonic()
            tick = RunnerStatus(counters, states[0].running_rows if states else 0)
            if states and states[0].next_retry_at is not None and not states[0].running_rows:
                tick.waiting_for_retry = (states[0].next_retry_at, 1)
            on_tick(tick)
        if status not in runs.ACTIVE_RUN_STATUSES:
            return status, counters, error
        if deadline is not None and time.monotonic() > deadline:
            return status, counters, error
        if sweep_every and time.monotonic() - last_sweep >= sweep_every:
            last_sweep = time.monotonic()
            try:
                sweep_runs(ctx, run_ids=[run_id])
            except Exception as exc:  # noqa: BLE001 - the sweep is opportunistic
                log.warning("sweep of run %s failed: %s", run_id, exc)
        time.sleep(poll_seconds)


@dataclass(frozen=True)
class SyncSummary:
    """A sync run as far as it went.

    Attributes:
        run_id: the sync run; status: ``completed``, ``failed`` or (hatchet, unawaited) ``queued``/``running``.
        report: the scan's ScanReport (local provider; None for hatchet, whose worker scanned).
        insertion_run_id: the insertion run it handed off to (None: no hand-off).
        insertion: that run's RunSummary when this call ran or awaited it.
        error: the cause of a failed sync; cause: the exception (local provider).
    """

    run_id: int
    status: str
    report: ScanReport | None = None
    insertion_run_id: int | None = None
    insertion: RunSummary | None = None
    error: str | None = None
    cause: BaseException | None = field(default=None, repr=False, compare=False)


#: A sync's scope travels in the ki-sync workflow's input (Hatchet bounds payloads): beyond this many paths
#: the worker scans the whole source (still deferring young files), beyond this many deferred names only
#: the young-file rule defers.
MAX_SCOPE_PATHS = 500


def _bounded(scope: ScanScope | None) -> ScanScope | None:
    if scope is None:
        return None
    paths = scope.paths if scope.paths is None or len(scope.paths) <= MAX_SCOPE_PATHS else None
    defer = scope.defer if len(scope.defer) <= MAX_SCOPE_PATHS else frozenset()
    gone = scope.gone if paths is not None else ()  # a whole-source scan: every deletion waits for confirmations
    return ScanScope(paths=paths, defer=defer, defer_younger_than=scope.defer_younger_than, gone=gone,
                     delete_at_once_max=scope.delete_at_once_max)


def _create_sync_run(ctx: PipelineContext, source_id: int, *, trigger: str, provider: str, status: str) -> int:
    try:
        with ctx.db.engine.begin() as conn:
            return runs.create_run(conn, kind=runs.KIND_SYNC, label="Sync", provider=provider, status=status,
                                   source_id=source_id, trigger=trigger,
                                   worker=ctx.worker_id if provider == "local" else None)
    except IntegrityError as exc:
        if getattr(getattr(exc.orig, "diag", None), "constraint_name", None) != "uq_pipeline_runs_active_sync":
            raise
        with ctx.db.engine.connect() as conn:
            raise SyncAlreadyRunning(source_id, sync_lock.active_sync(conn, source_id)) from exc


def launch_sync(
    ctx: PipelineContext,
    source_id: int,
    *,
    trigger: str = "api",
    wait: bool = False,
    hand_off: HandOff | None = None,
    scope: ScanScope | None = None,
    workers: int | None = None,
    wait_for_retries_seconds: float | None = None,
    on_scanned: Callable[[ScanReport], None] | None = None,
    on_tick: Callable[[RunnerStatus], None] | None = None,
    insert: bool = False,
    on_started: Callable[[int], None] | None = None,
) -> SyncSummary:
    """Sync one source as a ``sync`` run with the configured provider.

    ``local``: scan in this process (:func:`ki.adapters.sources.sync.run_sync_body`); when the scan brought
    something new and ``pipeline.auto_insert_after_sync`` is on, hand off to :func:`launch_insertion`
    (run to idle here, unless ``hand_off`` replaces it, as the watcher's does) and record its id on the
    sync run. ``hatchet``: create the run ``queued`` and trigger the ``ki-sync`` workflow, whose task does
    the same; with ``wait=True`` poll the sync run, then the insertion run it handed off to.

    Args:
        trigger: who started it (``cli``, ``api``, ``watch``...).
        hand_off: local provider: replaces the default hand-off (``(ctx, source_id, on_started) -> run id``).
        scope: what the scan looks at (the watcher's settled files; see ScanScope); hatchet: sent in the
            workflow's input, bounded by :data:`MAX_SCOPE_PATHS`.
        workers / wait_for_retries_seconds / on_tick: passed to the insertion run (see launch_insertion).
        on_scanned: local provider: called with the ScanReport before the hand-off starts.
        on_started: called with the sync run's id once its row exists (the console answers with it).
        insert: hand off even when nothing changed and auto-insert is off (``ki insert``; hatchet: an
            insertion run of this source follows a sync that handed off nothing).
    Returns: the :class:`SyncSummary`.
    Raises:
        SyncAlreadyRunning: the source already has an unfinished sync run (nothing is written).
        OrchestratorUnavailable: hatchet provider without a client (nothing written) or the engine
            refused the trigger (the sync run is failed with the cause).
    """
    ctx.reload_config()
    provider = ctx.config.components.orchestrator_provider
    if provider == "hatchet":
        hatchet_client()  # no token → OrchestratorUnavailable before anything is written
        run_id = _create_sync_run(ctx, source_id, trigger=trigger, provider="hatchet", status="queued")
        if on_started is not None:
            on_started(run_id)
        trigger_sync(ctx, run_id, source_id, _bounded(scope))
        if not wait:
            return SyncSummary(run_id, "queued")
        status, _, error = wait_for_run(ctx, run_id)
        with ctx.db.engine.connect() as conn:
            row = runs.get_run(conn, run_id)
        insertion_run_id = row.insertion_run_id if row is not None else None
        insertion = None
        if insertion_run_id is not None:
            ins_status, counters, ins_error = wait_for_run(ctx, insertion_run_id, on_tick=on_tick)
            insertion = RunSummary(insertion_run_id, ins_status, counters, ins_error)
        elif insert and status == "completed":  # nothing new, yet ki insert finishes what is owed
            insertion = _launch_hatchet(ctx, trigger=trigger, source_id=source_id, label="Insertion",
                                        on_tick=on_tick, wait=True)
        return SyncSummary(run_id, status, None, insertion_run_id, insertion, error)
    if provider != "local":
        raise OrchestratorUnavailable(f"unknown orchestrator provider {provider!r}")
    lock = _SyncLock(ctx, source_id)  # refuses while a live process syncs it; fails a dead process's run
    try:
        run_id = _create_sync_run(ctx, source_id, trigger=trigger, provider="local", status="running")
        if on_started is not None:
            on_started(run_id)
        ran: list[RunSummary] = []

        def default_hand_off(ctx: PipelineContext, sid: int, on_started: Callable[[int], None]) -> int:
            summary = launch_insertion(ctx, trigger="sync", source_id=sid, workers=workers, on_tick=on_tick,
                                       wait_for_retries_seconds=wait_for_retries_seconds, on_started=on_started)
            ran.append(summary)
            return summary.run_id

        def hand_off_then_unlock(ctx: PipelineContext, sid: int, on_started: Callable[[int], None]) -> int | None:
            def started(insertion_run_id: int) -> None:
                on_started(insertion_run_id)  # completes the sync run: the next sync may start
                lock.release()

            return (hand_off or default_hand_off)(ctx, sid, started)

        result = run_sync_body(ctx, run_id, source_id, hand_off=hand_off_then_unlock, scope=scope,
                               on_scanned=on_scanned, insert=insert)
    finally:
        lock.release()
    return SyncSummary(run_id, result.status, result.report, result.insertion_run_id, ran[0] if ran else None,
                       result.error, result.cause)


class _SyncLock:
    """The source's sync lock (:func:`ki.store.sync_lock.try_lock_sync`) on a connection of its own, held while
    this process runs a local sync of the source. Taking it proves that no live process runs one, so an
    unfinished local sync run left behind (its process was killed, or its database stopped) is failed
    first instead of blocking every later sync.

    Raises (on construction): SyncAlreadyRunning when another live process holds the lock.
    """

    def __init__(self, ctx: PipelineContext, source_id: int):
        self.source_id = source_id
        self.conn = ctx.db.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            got = sync_lock.try_lock_sync(self.conn, source_id)
            if got:
                orphaned = sync_lock.fail_orphaned_syncs(self.conn, source_id, "the process running this sync ended "
                                                    "before it finished (killed, or its database stopped)")
                if orphaned:
                    log.warning("sync run(s) %s of source %s were left unfinished by a process that ended: failed",
                                orphaned, source_id)
            else:
                active = sync_lock.active_sync(self.conn, source_id)
        except BaseException:
            self.conn.close()
            raise
        if not got:
            self.conn.close()
            self.conn = None
            raise SyncAlreadyRunning(source_id, active)

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self.conn is None:
            return
        conn, self.conn = self.conn, None
        try:
            sync_lock.unlock_sync(conn, self.source_id)
        except Exception as exc:  # noqa: BLE001 - closing the connection releases it anyway
            log.warning("releasing the sync lock of source %s: %s", self.source_id, exc)
        finally:
            conn.close()
