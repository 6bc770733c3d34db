"""``launch_insertion``: the single entry every trigger goes through.

Spec: insertion-pipeline.md "Orchestration": creates the pipeline_runs ledger
row and hands it to the configured provider. ``local`` runs
``PipelineRunner.run_until_idle()`` in this process; ``hatchet`` is not in this
release and fails closed with a clear message. The run row records the scalar
counters (processed, done, skipped, retried, quarantined).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import text

from ki.errors import OrchestratorUnavailable
from ki.orchestration.context import PipelineContext
from ki.orchestration.runner import PipelineRunner, RunCounters, RunnerStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSummary:
    """The finished run: its id, final status and counters."""

    run_id: int
    status: str
    counters: RunCounters
    error: str | None = None


def _create_run(ctx: PipelineContext, *, trigger: str, source_id: int | None, label: str) -> int:
    with ctx.db.engine.begin() as conn:
        return int(conn.execute(
            text("""INSERT INTO pipeline_runs (kind, label, provider, status, source_id, trigger)
                    VALUES ('insertion', :label, :provider, 'running', :sid, :trigger) RETURNING id"""),
            {"label": label, "provider": ctx.config.components.orchestrator_provider, "sid": source_id,
             "trigger": trigger},
        ).scalar_one())


def _finish_run(ctx: PipelineContext, run_id: int, counters: RunCounters, status: str, error: str | None) -> None:
    with ctx.db.engine.begin() as conn:
        conn.execute(
            text("""UPDATE pipeline_runs SET status = :st, processed = :p, done = :d, skipped = :s, retried = :r,
                    quarantined = :qn, error = :e, finished_at = now(), updated_at = now() WHERE id = :id"""),
            {"st": status, "p": counters.processed, "d": counters.done, "s": counters.skipped,
             "r": counters.retried, "qn": counters.quarantined, "e": error, "id": run_id},
        )


def _write_progress(ctx: PipelineContext, run_id: int, counters: RunCounters) -> None:
    with ctx.db.engine.begin() as conn:
        conn.execute(
            text("""UPDATE pipeline_runs SET processed = :p, done = :d, skipped = :s, retried = :r,
                    quarantined = :qn, updated_at = now() WHERE id = :id"""),
            {"p": counters.processed, "d": counters.done, "s": counters.skipped, "r": counters.retried,
             "qn": counters.quarantined, "id": run_id},
        )


def launch_insertion(
    ctx: PipelineContext,
    *,
    trigger: str = "cli",
    source_id: int | None = None,
    label: str = "Insertion",
    workers: int | None = None,
    wait_for_retries_seconds: float | None = None,
    on_tick: Callable[[RunnerStatus], None] | None = None,
) -> RunSummary:
    """Create the pipeline_runs row and run it with the configured provider.

    Args:
        trigger: who started it (``cli``, ``quarantine_retry``, ``api``...).
        source_id: the source the run was started for (None: all pending work).
        workers: local pool size (default ``KI_WORKERS``).
        wait_for_retries_seconds: wait for retries due within this bound
            (default ``KI_INSERT_WAIT_RETRY_SECONDS``).
        on_tick: progress callback (local provider).
    Returns: the RunSummary (status ``completed`` or ``failed``).
    Raises:
        OrchestratorUnavailable: the provider is ``hatchet`` (not in this release).
    """
    ctx.reload_config()
    provider = ctx.config.components.orchestrator_provider
    if provider == "hatchet":
        raise OrchestratorUnavailable(
            "components.orchestrator_provider is 'hatchet', but this release of ki has no Hatchet provider yet; "
            "set it to 'local' (KI_COMPONENTS__ORCHESTRATOR_PROVIDER=local) to run in-process"
        )
    if provider != "local":  # the config validator refuses this too: fail closed
        raise OrchestratorUnavailable(f"unknown orchestrator provider {provider!r}")
    run_id = _create_run(ctx, trigger=trigger, source_id=source_id, label=label)
    wait = ctx.settings.insert_wait_retry_seconds if wait_for_retries_seconds is None else wait_for_retries_seconds
    last_flush = [0.0]

    def tick(status: RunnerStatus) -> None:
        import time

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
