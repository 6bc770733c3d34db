"""``PipelineRunner``: the in-process (``local``) provider.

Spec: insertion-pipeline.md "In-process provider (local)": prepare steps, then
claim-execute with a bounded pool until no eligible row remains. Stale claims are
recovered at the start and periodically during the run, so a row left by a
killed worker is finished in the same run. The runner also waits for retries
that fall due within ``wait_for_retries_seconds`` and says what it waits for.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import text

from ki.errors import RunAborted
from ki.orchestration.context import PipelineContext
from ki.orchestration.execute import ExecutionResult, execute_claim
from ki.orchestration.heartbeat import ClaimKeeper
from ki.orchestration.prepare import PrepareReport, recover_stale_claims, run_prepare_steps
from ki.store import claims as q

log = logging.getLogger(__name__)

ELIGIBLE_EXISTS_SQL = text("""
SELECT EXISTS (SELECT 1 FROM processing_state
               WHERE status = 'pending' OR (status = 'failed' AND next_retry_at <= now()))
""")


@dataclass
class RunCounters:
    """Scalar counters of a run (spec: processed, done, skipped, retried, quarantined)."""

    processed: int = 0
    done: int = 0
    skipped: int = 0
    retried: int = 0
    quarantined: int = 0
    claim_lost: int = 0
    per_stage_seconds: dict[str, list[float]] = field(default_factory=dict)

    def add(self, result: ExecutionResult, seconds: float) -> None:
        self.processed += 1
        if result.kind == "done":
            self.done += 1
        elif result.kind == "skipped":
            self.skipped += 1
        elif result.kind == "retry":
            self.retried += 1
        elif result.kind == "quarantined":
            self.quarantined += 1
        elif result.kind == "claim_lost":
            self.claim_lost += 1
        self.per_stage_seconds.setdefault(result.stage, []).append(seconds)


@dataclass
class RunnerStatus:
    """What the coordinator sees at a tick (for progress displays)."""

    counters: RunCounters
    active: int
    waiting_for_retry: tuple[datetime, int] | None = None
    waiting_for_running: int = 0


class PipelineRunner:
    """Claim-execute loop over a bounded thread pool.

    Args:
        ctx: the pipeline context.
        run_id: the pipeline_runs row the claims are attributed to.
        workers: pool size (default ``KI_WORKERS``).
        wait_for_retries_seconds: total time the run may spend idle, waiting only for failed rows to
            fall due (0: don't wait). A retry due later than the budget left ends the run; its row
            stays ``failed`` with its ``next_retry_at`` for the next run.
        on_tick: called from the calling thread about every ``tick_seconds`` with a RunnerStatus.
    """

    def __init__(
        self,
        ctx: PipelineContext,
        *,
        run_id: int | None = None,
        workers: int | None = None,
        wait_for_retries_seconds: float = 0.0,
        on_tick: Callable[[RunnerStatus], None] | None = None,
        tick_seconds: float = 0.25,
    ):
        self.ctx = ctx
        self.run_id = run_id
        self.workers = workers or ctx.settings.workers
        self.wait_for_retries_seconds = wait_for_retries_seconds
        self.on_tick = on_tick
        self.tick_seconds = tick_seconds
        self.counters = RunCounters()
        self.prepare_report: PrepareReport | None = None
        self._lock = threading.Lock()
        self._active = 0
        self._stop = threading.Event()
        self._errors: list[BaseException] = []
        self._abort: RunAborted | None = None
        self._retry_wait_spent = 0.0  # seconds spent idle, waiting only for retries to fall due
        timeout = ctx.config.pipeline.claim_timeout_seconds
        self._stale_every = max(0.5, min(60.0, timeout / 3))
        self.keeper = ClaimKeeper(ctx.db, interval_seconds=max(0.2, min(30.0, timeout / 3)))

    def _worker(self) -> None:
        idle_sleep = 0.01
        while not self._stop.is_set():
            try:
                with self.ctx.db.engine.begin() as conn:
                    claims = q.claim_next(conn, worker=self.ctx.worker_id, run_id=self.run_id)
            except Exception as exc:  # noqa: BLE001 - database outage: back off, the coordinator decides
                log.warning("claim failed (%s); retrying", exc)
                self._stop.wait(1.0)
                continue
            if not claims:
                self._stop.wait(idle_sleep)
                idle_sleep = min(idle_sleep * 2, 0.2)
                continue
            idle_sleep = 0.01
            for claim in claims:
                with self._lock:
                    self._active += 1
                started = time.perf_counter()
                try:
                    result = execute_claim(self.ctx, claim, keeper=self.keeper)
                except RunAborted as exc:
                    self._abort = exc
                    self._stop.set()
                    return  # the finally clause below still releases the active slot
                except Exception as exc:  # noqa: BLE001 - the row stays running; stale recovery retries it
                    log.exception("recording the outcome of %s/%s failed", claim.stage, claim.source_object_id)
                    self._errors.append(exc)
                    result = ExecutionResult("retry", claim.stage, claim.source_object_id, type(exc).__name__)
                finally:
                    with self._lock:
                        self._active -= 1
                with self._lock:
                    self.counters.add(result, time.perf_counter() - started)

    def _idle_verdict(self) -> RunnerStatus | None:
        """None when there is nothing left to do; else the status to report while waiting."""
        with self._lock:
            active = self._active
        status = RunnerStatus(self.counters, active)
        if active:
            return status
        with self.ctx.db.engine.connect() as conn:
            if conn.execute(ELIGIBLE_EXISTS_SQL).scalar_one():
                return status
            running = q.count_running(conn)
            due, n_failed = q.next_retry_due(conn)
        if running:
            status.waiting_for_running = running
            return status
        if n_failed and due is not None and self.wait_for_retries_seconds > 0:
            wait = (due - datetime.now(UTC)).total_seconds()
            budget_left = self.wait_for_retries_seconds - self._retry_wait_spent
            if wait <= budget_left:
                status.waiting_for_retry = (due, n_failed)
                return status
        return None

    def run_until_idle(self) -> RunCounters:
        """Run prepare steps, then execute until idle. Returns the run's counters.

        Raises:
            RunAborted: a stage hit a configuration error; the run stopped (rows left pending).
        """
        self.prepare_report = run_prepare_steps(self.ctx)
        self.keeper.start()
        threads = [threading.Thread(target=self._worker, name=f"ki-worker-{i}", daemon=True)
                   for i in range(self.workers)]
        for t in threads:
            t.start()
        last_stale = time.monotonic()
        quiet_ticks = 0
        try:
            while True:
                time.sleep(self.tick_seconds)
                if time.monotonic() - last_stale >= self._stale_every:
                    recover_stale_claims(self.ctx)
                    last_stale = time.monotonic()
                status = self._idle_verdict()
                if status is not None and status.waiting_for_retry is not None:
                    self._retry_wait_spent += self.tick_seconds
                if self.on_tick is not None:
                    self.on_tick(status or RunnerStatus(self.counters, 0))
                # two consecutive idle verdicts: a worker may have been between claim and execute
                quiet_ticks = quiet_ticks + 1 if status is None else 0
                if quiet_ticks >= 2 or self._abort is not None:
                    break
        finally:
            self._stop.set()
            for t in threads:
                t.join(timeout=max(30.0, self.ctx.config.pipeline.claim_timeout_seconds))
            self.keeper.stop()
        if self._abort is not None:
            raise self._abort
        return self.counters
