"""``launch_insertion``, ``launch_sync``, ``wait_for_run``: the one entry of every trigger, above both providers.

Spec: insertion-pipeline.md "Orchestration": creates the pipeline_runs ledger
row and hands it to the configured provider. ``local`` runs
``PipelineRunner.run_until_idle()`` in this process; ``hatchet`` reserves the
batch and bulk-triggers one DAG per document (:mod:`ki.workflows.trigger`),
then returns at once or, with ``wait=True`` (``ki insert``), polls the rows
until the run ends (:func:`wait_for_run`). The run row records the scalar
counters (processed, done, skipped, retried, quarantined). A sync run
(:func:`launch_sync`) scans a source in a Hatchet task and hands off to an
insertion run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ki.context import PipelineContext
from ki.errors import OrchestratorUnavailable
from ki.orchestration.run_sweep import sweep_local_runs
from ki.orchestration.runner import PipelineRunner, RunCounters, RunnerStatus
from ki.store import runs
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
    Returns: the RunSummary (status ``completed`` or ``failed``; ``running`` for an unawaited hatchet run).
    Raises:
        OrchestratorUnavailable: the provider is ``hatchet`` and no engine is configured (nothing
            is written), or the engine refused the trigger (the run row is failed with the cause).
    """
    ctx.reload_config()
    provider = ctx.config.components.orchestrator_provider
    if provider == "hatchet":
        return _launch_hatchet(ctx, trigger=trigger, source_id=source_id, label=label, on_tick=on_tick, wait=wait,
                               on_started=on_started)
    if provider != "local":  # the config validator refuses this too: fail closed
        raise OrchestratorUnavailable(f"unknown orchestrator provider {provider!r}")
    sweep_local_runs(ctx)  # runs of ended processes fail with their cause; this run adopts their work
    run_id = _create_run(ctx, trigger=trigger, source_id=source_id, label=label)
    if on_started is not None:
        on_started(run_id)
    wait = ctx.settings.insert_wait_retry_seconds if wait_for_retries_seconds is None else wait_for_retries_seconds
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
    states: list[runs.BatchState] = []
    last_states = 0.0
    while True:
        status, counters, error = run_counters(ctx, run_id)
        if on_tick is not None:
            if time.monotonic() - last_states >= 2.0:  # the batch aggregate reads every row of the batch
                with ctx.db.engine.connect() as conn:
                    states = runs.batch_states(conn, [run_id])
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


def launch_sync(ctx: PipelineContext, source_id: int, *, trigger: str = "api") -> int:
    """Create a ``sync`` run for ``source_id`` and trigger the ``ki-sync`` workflow. Returns the run id.

    Raises:
        OrchestratorUnavailable: no client or the engine refused (the run is failed with the cause).
        sqlalchemy.exc.IntegrityError: the source already has an unfinished sync run
            (``uq_pipeline_runs_active_sync``).
    """
    with ctx.db.engine.begin() as conn:
        run_id = runs.create_run(conn, kind=runs.KIND_SYNC, label="Sync", provider="hatchet", status="queued",
                                 source_id=source_id, trigger=trigger)
    trigger_sync(ctx, run_id, source_id)
    return run_id
