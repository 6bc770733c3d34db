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

from sqlalchemy import create_engine
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool

from ki.adapters.breaker import BREAKERS, Pause
from ki.core.errors import RunAborted
from ki.core.liveness import dead_here
from ki.core.startup import FIRST_ROW, TIMELINE
from ki.domain.context import PipelineContext
from ki.orchestration.budget import BudgetGate
from ki.orchestration.execute import ExecutionResult, execute_claim
from ki.orchestration.heartbeat import ClaimKeeper
from ki.orchestration.pausing import ClaimGate
from ki.orchestration.prepare import PrepareReport, recover_stale_claims, run_prepare_steps
from ki.store import claims as q
from ki.store.cancel import cancel_requested
from ki.store.claims import Claim
from ki.store.lanes import LaneSchedule, model_workers
from ki.store.stale_claims import ClaimHolder, claim_holders
from ki.store.status import idle_snapshot

log = logging.getLogger(__name__)

#: How often the coordinator reads whether its run was asked to cancel (s).
CANCEL_CHECK_SECONDS = 0.5


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
        """Count one execution, and the switched-off stages its commit recorded skipped on the way."""
        self.processed += 1 + result.passed
        self.skipped += result.passed
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
    #: while waiting for rows other processes hold: who holds them (``ClaimHolder``: worker, rows,
    #: seconds since its oldest heartbeat); the timeout after which a silent holder is presumed dead
    holders: list[ClaimHolder] = field(default_factory=list)
    claim_timeout_seconds: float = 0.0
    #: the open circuit breakers (:mod:`ki.adapters.breaker`): the stages needing them are not claimed
    paused: list[Pause] = field(default_factory=list)


class PipelineRunner:
    """Claim-execute loop over a bounded thread pool.

    Claims follow the lanes (DESIGN.md "Lanes"): one :class:`~ki.store.lanes.LaneSchedule` per run
    orders each claim's lanes by ``pipeline.lanes.weights``; the first
    :func:`~ki.store.lanes.model_workers` workers claim the model stages' rows before any other (spec
    work-queue.md "1. Poll": bounded capacity reserved for extraction before the general queue).

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
        self._idle_hint = threading.Event()
        self._threads: list[threading.Thread] = []
        self._abandoned: set[int | None] = set()  # idents of worker threads whose handler passed its deadline
        self._errors: list[BaseException] = []
        self._abort: RunAborted | None = None
        self._retry_wait_spent = 0.0  # seconds spent idle, waiting only for retries to fall due
        self._last_waiting: RunnerStatus | None = None  # the last status that found others holding rows
        self._progress = (0, time.monotonic())  # (counters.processed, when it last changed)
        self._holders_checked = 0.0
        self.gate = ClaimGate(ctx)  # the stages paused by open circuit breakers (ki.adapters.breaker)
        self.budget = BudgetGate(ctx, run_id=run_id)  # the model stages held by a reached spending cap
        timeout = ctx.config.pipeline.claim_timeout_seconds
        self._stale_every = max(0.5, min(60.0, timeout / 3))
        # worker threads' own connections (see _open_connection): no pool, autocommit
        self._held_engine = create_engine(ctx.db.engine.url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
        self.keeper = ClaimKeeper(ctx.db, interval_seconds=max(0.2, min(30.0, timeout / 3)))
        self.lanes = LaneSchedule(ctx.config.pipeline.lanes.weights)  # DESIGN.md "Lanes"
        #: set when the run's cancellation was read (``ki run cancel``; :mod:`ki.store.cancel`): the loop stopped
        self.cancelled = False
        self._cancel_checked = 0.0

    def _open_connection(self) -> Connection:
        """A worker thread's own AUTOCOMMIT connection, held for the run: no pool checkout, pre-ping
        or BEGIN/COMMIT per statement (a claim is one statement, an outcome is one statement). It
        is opened outside the shared pool, so handlers never wait for a connection a worker holds."""
        return self._held_engine.connect()

    @staticmethod
    def _close_connection(conn: Connection | None) -> None:
        if conn is None:
            return
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - a broken connection is simply gone
            log.debug("closing a worker connection failed", exc_info=True)

    def _worker(self, model_first: bool = False) -> None:
        idle_sleep = 0.01
        conn: Connection | None = None
        me = threading.get_ident()
        try:
            while not self._stop.is_set():
                with self._lock:  # counted before claiming, so an idle verdict never misses a claim in flight
                    self._active += 1
                try:
                    if conn is None:
                        conn = self._open_connection()
                    claims = self._claim(conn, model_first)
                    if claims:
                        idle_sleep = 0.01
                except RunAborted as exc:
                    self._abort = exc
                    self._stop.set()
                    return
                except Exception as exc:  # noqa: BLE001 - database outage: back off, the coordinator decides
                    log.warning("claiming or recording failed (%s); retrying on a new connection", exc)
                    self._close_connection(conn)
                    conn = None
                    self._stop.wait(1.0)
                    continue
                finally:
                    with self._lock:
                        abandoned = me in self._abandoned
                        if not abandoned:  # an abandoned thread was uncounted when it was abandoned
                            self._active -= 1
                if abandoned:
                    return  # its handler passed the deadline; a replacement took its place
                if not claims:
                    self._idle_hint.set()
                    self._stop.wait(idle_sleep)
                    idle_sleep = min(idle_sleep * 2, 0.2)
        finally:
            self._close_connection(conn)

    def _claim(self, conn: Connection, model_first: bool = False) -> list[Claim]:
        """Claim and execute the next row of a stage whose dependencies are not paused:
        while a dependency's breaker is open its stages are skipped, except for one probing claim at a
        time when its probe is due (:mod:`ki.orchestration.pausing`). Returns what was claimed."""
        seed = self.ctx.config.pipeline.claim_order_seed
        probe = self.gate.probe()
        if probe is not None:
            dependency, not_probing = probe
            try:
                claims = q.claim_next(conn, worker=self.ctx.worker_id, run_id=self.run_id, order_seed=seed,
                                      paused=[*not_probing, *self.budget.held()], lanes=self.lanes.next_order(),
                                      model_first=model_first)
                for claim in claims:
                    self._execute(claim, conn, model_first)
            finally:
                BREAKERS.end_probe(dependency)
            if claims:
                return claims
        claims = q.claim_next(conn, worker=self.ctx.worker_id, run_id=self.run_id, order_seed=seed,
                              paused=[*self.gate.paused(), *self.budget.held()], lanes=self.lanes.next_order(),
                              model_first=model_first)
        for claim in claims:
            self._execute(claim, conn, model_first)
        return claims

    def _abandon(self, thread: threading.Thread, model_first: bool, started: float,
                 result: ExecutionResult) -> None:
        """The keeper gave up on ``thread``'s handler at its deadline (``result``: the ``StageTimeout``
        recorded): the thread no longer counts as active, its late result is not counted, and a new
        worker takes its place (the stuck thread is left to die)."""
        with self._lock:
            if thread.ident in self._abandoned:
                return
            self._abandoned.add(thread.ident)
            self._active -= 1
            self.counters.add(result, time.perf_counter() - started)
            if self._stop.is_set():
                return
            replacement = threading.Thread(target=self._worker, args=(model_first,),
                                           name=f"{thread.name}+", daemon=True)
            self._threads.append(replacement)
        replacement.start()
        self._idle_hint.set()

    def _execute(self, claim: Claim, record_conn: Connection, model_first: bool = False) -> None:
        TIMELINE.mark("first claim", claim.stage)
        started = time.perf_counter()
        thread = threading.current_thread()
        try:
            result = execute_claim(self.ctx, claim, keeper=self.keeper, conn=record_conn,
                                   on_abandon=lambda r: self._abandon(thread, model_first, started, r))
        except RunAborted:
            raise
        except Exception as exc:  # the row stays running; stale recovery retries it
            log.exception("recording the outcome of %s/%s failed", claim.stage, claim.source_object_id)
            self._errors.append(exc)
            with self._lock:
                self.counters.add(ExecutionResult("retry", claim.stage, claim.source_object_id,
                                                  type(exc).__name__), time.perf_counter() - started)
            raise
        with self._lock:
            if thread.ident in self._abandoned:
                return  # its deadline passed: the StageTimeout was counted, this late result is refused
            self.counters.add(result, time.perf_counter() - started)
        self.budget.spent(claim.stage)
        if result.kind in ("done", "skipped", "quarantined"):
            TIMELINE.mark(FIRST_ROW, result.stage)

    def _others_holding(self, status: RunnerStatus, running: int) -> None:
        """Fill ``status`` with the other processes holding running rows (say what the
        run waits for), and recover at once the rows of any that ended on this host."""
        with self.ctx.db.engine.connect() as conn:
            holders = [h for h in claim_holders(conn) if h.worker != self.ctx.worker_id]
        if not holders:
            return
        status.waiting_for_running = min(running, sum(h.rows for h in holders))
        status.holders = holders
        status.claim_timeout_seconds = self.ctx.config.pipeline.claim_timeout_seconds
        if any(h.worker is not None and dead_here(h.worker) for h in holders):
            recover_stale_claims(self.ctx)  # a holder of this host ended: its rows are due now

    def _idle_verdict(self) -> RunnerStatus | None:
        """None when there is nothing left to do; else the status to report while waiting."""
        with self._lock:
            active = self._active
        status = RunnerStatus(self.counters, active)
        now = time.monotonic()
        if self.counters.processed != self._progress[0]:
            self._progress = (self.counters.processed, now)
        if active:
            # workers only polling for a second without progress: is the run waiting for others' claims?
            if now - self._progress[1] >= 1.0 and now - self._holders_checked >= 1.0:
                self._holders_checked = now
                with self.ctx.db.engine.connect() as conn:
                    left = idle_snapshot(conn, held=self.budget.held())
                if not left.eligible and left.running:
                    self._others_holding(status, left.running)
                self._last_waiting = status if status.holders else None
            elif self._last_waiting is not None and now - self._progress[1] >= 1.0:
                last = self._last_waiting
                status.waiting_for_running, status.holders = last.waiting_for_running, last.holders
                status.claim_timeout_seconds = last.claim_timeout_seconds
            return status
        self._last_waiting = None
        with self.ctx.db.engine.connect() as conn:
            left = idle_snapshot(conn, held=self.budget.held())
        if left.eligible:
            return status
        if left.running:
            status.waiting_for_running = left.running
            self._others_holding(status, left.running)
            return status
        if left.failed and left.due is not None and self.wait_for_retries_seconds > 0:
            wait = (left.due - datetime.now(UTC)).total_seconds()
            budget_left = self.wait_for_retries_seconds - self._retry_wait_spent
            if wait <= budget_left:
                status.waiting_for_retry = (left.due, left.failed)
                return status
        return None

    def _cancel_seen(self) -> bool:
        """About twice a second: has the run been asked to cancel (:func:`ki.store.cancel.cancel_requested`)?"""
        now = time.monotonic()
        if self.run_id is None or now - self._cancel_checked < CANCEL_CHECK_SECONDS:
            return False
        self._cancel_checked = now
        try:
            with self.ctx.db.engine.connect() as conn:
                self.cancelled = cancel_requested(conn, self.run_id)
        except Exception:  # noqa: BLE001 - a database outage is the workers' to report; read again next tick
            log.debug("reading the run's cancellation failed", exc_info=True)
        return self.cancelled

    def run_until_idle(self) -> RunCounters:
        """Run prepare steps, then execute until idle or cancelled. Returns the run's counters.

        A cancellation of the run (read about every :data:`CANCEL_CHECK_SECONDS`) stops every worker before its
        next claim; the claims in hand finish and are counted, then this returns with :attr:`cancelled` set.

        Raises:
            RunAborted: a stage hit a configuration error; the run stopped (rows left pending).
        """
        self.prepare_report = run_prepare_steps(self.ctx)
        TIMELINE.mark("prepare steps")
        self.gate.attach()
        self.keeper.start()
        reserved = model_workers(self.workers, self.ctx.config.pipeline.lanes.model_workers)
        threads = [threading.Thread(target=self._worker, args=(i < reserved,), name=f"ki-worker-{i}", daemon=True)
                   for i in range(self.workers)]
        self._threads = threads
        for t in threads:
            t.start()
        last_stale = time.monotonic()
        try:
            while True:
                # a worker that found nothing to claim wakes the coordinator early (at most every 50 ms)
                tick_started = time.monotonic()
                self._idle_hint.wait(self.tick_seconds)
                self._idle_hint.clear()
                time.sleep(0.05)
                if time.monotonic() - last_stale >= self._stale_every:
                    recover_stale_claims(self.ctx)
                    last_stale = time.monotonic()
                status = self._idle_verdict()
                if status is not None:
                    self.gate.refresh()
                    status.paused = BREAKERS.pauses()
                if status is not None and status.waiting_for_retry is not None:
                    self._retry_wait_spent += time.monotonic() - tick_started
                if self.on_tick is not None:
                    self.on_tick(status or RunnerStatus(self.counters, 0))
                # one idle verdict suffices: workers count themselves active before claiming, and
                # the verdict reads the table in one snapshot
                if status is None or self._abort is not None or self._cancel_seen():
                    break
        finally:
            with self._lock:
                self._stop.set()
                joined = [t for t in self._threads if t.ident not in self._abandoned]
            for t in joined:  # an abandoned thread is left to die (its handler hangs)
                t.join(timeout=max(30.0, self.ctx.config.pipeline.claim_timeout_seconds))
            self.keeper.stop()
            BREAKERS.attach(None)
            self._held_engine.dispose()
        if self._abort is not None:
            raise self._abort
        return self.counters
