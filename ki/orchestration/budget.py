"""Spending caps on the model stages: ``pipeline.budget.daily_usd`` and ``pipeline.budget.run_usd``.

Spec: work-queue.md "Retry with Exponential Backoff" (budget exceeded is not retried — here it is not even
attempted: the rows wait) and insertion-pipeline.md "Costs" (the usage ledger); docs/design-decisions.md
"Spending caps". The spend is read from the usage ledger (``model_usage``, :func:`ki.store.usage.spent_since`):
today's spend is everything recorded since 00:00 UTC of the injected clock's day, a run's spend everything
recorded since the run started. When a cap is reached the model stages (:data:`ki.core.taxonomies.MODEL_STAGES`) are
not claimed: their rows stay as they are (pending, awaiting retry), no attempt is spent, nothing is quarantined;
``ki status``, ``GET /api/status`` and the console show them waiting with the reason ``budget``. They are claimed
again once the day rolls over or the cap is raised (the configuration is read afresh at every check). A call
already in flight when the cap is reached finishes: the cap may be passed by the calls of the stages in hand.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.engine import Connection

from ki.config import load_config
from ki.core.taxonomies import MODEL_STAGES, PIPELINE_STAGE_ORDER
from ki.store import runs
from ki.store.status import held_rows
from ki.store.usage import spent_since

#: The reason the waiting model stages show.
REASON_BUDGET = "budget"
#: How long one process reuses a budget reading (s) while no model stage finished (:meth:`BudgetGate.spent`).
CHECK_SECONDS = 0.5
HELD_STAGES = tuple(s for s in PIPELINE_STAGE_ORDER if s in MODEL_STAGES)

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The default clock (UTC, aware)."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class BudgetState:
    """The caps and the spend against them at ``at``.

    Attributes:
        daily_usd / run_usd: the caps (None: no cap).
        spent_today_usd: spend since ``day_start`` (00:00 UTC of ``at``'s day); ``resets_at`` the next midnight.
        spent_run_usd: spend since ``run_started_at`` (None without a run).
        reached: ``daily`` or ``run`` when that cap is reached (daily first), else None.
    """

    at: datetime
    daily_usd: float | None
    run_usd: float | None
    spent_today_usd: float
    spent_run_usd: float | None
    day_start: datetime
    resets_at: datetime
    run_id: int | None = None
    reached: str | None = None

    @property
    def remaining_usd(self) -> float | None:
        """The smaller of what each cap leaves (never below 0); None when no cap applies."""
        left = []
        if self.daily_usd is not None:
            left.append(self.daily_usd - self.spent_today_usd)
        if self.run_usd is not None and self.spent_run_usd is not None:
            left.append(self.run_usd - self.spent_run_usd)
        return max(0.0, min(left)) if left else None

    @property
    def held_stages(self) -> tuple[str, ...]:
        """The stages not claimed now (the model stages while a cap is reached)."""
        return HELD_STAGES if self.reached else ()

    def describe(self) -> dict[str, Any] | None:
        """The reached cap as ``ki status --json`` and ``/api/status`` show it (None when none is reached):
        ``reason`` (``budget``), ``cap``, ``limit_usd``, ``spent_usd``, ``stages``, ``resets_at`` (daily cap) and
        a one-line ``message``."""
        if self.reached is None:
            return None
        if self.reached == "daily":
            limit, spent = self.daily_usd, self.spent_today_usd
            when = f"until {self.resets_at:%Y-%m-%d %H:%M} UTC or a higher pipeline.budget.daily_usd"
            what = "daily budget"
        else:
            limit, spent = self.run_usd, self.spent_run_usd or 0.0
            when = f"until a higher pipeline.budget.run_usd or the next run (run {self.run_id})"
            what = "run budget"
        return {"reason": REASON_BUDGET, "cap": self.reached, "limit_usd": limit, "spent_usd": round(spent, 6),
                "stages": list(HELD_STAGES), "resets_at": self.resets_at if self.reached == "daily" else None,
                "message": f"paused: {what} ${limit:.2f} reached (${spent:.2f} spent); the model stages wait {when}"}


def budget_state(conn: Connection, config: Any, *, run_id: int | None = None, run_started_at: datetime | None = None,
                 now: datetime | None = None) -> BudgetState:
    """Read the spend against ``config.pipeline.budget`` at ``now`` (default: the wall clock) for the run that started
    at ``run_started_at`` (None: no run cap applies). Only the ledger is read, and only for a cap that is set."""
    at = now or utc_now()
    caps = config.pipeline.budget
    day_start = at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    resets_at = day_start + timedelta(days=1)
    today = float(spent_since(conn, day_start)) if caps.daily_usd is not None else 0.0
    run_spent = None
    if caps.run_usd is not None and run_started_at is not None:
        run_spent = float(spent_since(conn, run_started_at))
    reached = None
    if caps.daily_usd is not None and today >= caps.daily_usd:
        reached = "daily"
    elif caps.run_usd is not None and run_spent is not None and run_spent >= caps.run_usd:
        reached = "run"
    return BudgetState(at, caps.daily_usd, caps.run_usd, today, run_spent, day_start, resets_at, run_id, reached)


def _module_clock() -> Clock:
    return globals()["utc_now"]


class BudgetGate:
    """One process's view of the caps for one run (thread-safe): :meth:`held` is what the claims skip.

    Args:
        ctx: the pipeline context (the saved configuration is read afresh at each check: a raised cap applies
            at once, without touching ``ctx.config``).
        run_id: the run the claims serve (its start bounds the run's spend; None: the daily cap only).
        clock: the time source (default :func:`utc_now`, looked up at each read: tests inject one to roll the
            day over).
    """

    def __init__(self, ctx: Any, *, run_id: int | None = None, clock: Clock | None = None) -> None:
        self.ctx = ctx
        self.run_id = run_id
        self.clock = clock
        self._lock = threading.Lock()
        self._state: BudgetState | None = None
        self._read_at = -1e9
        self._run_started_at: datetime | None = None

    def state(self, *, fresh: bool = False) -> BudgetState | None:
        """The current :class:`BudgetState`, re-read at most every :data:`CHECK_SECONDS` (``fresh``: now); None
        when no cap is set."""
        with self._lock:
            if not fresh and time.monotonic() - self._read_at < CHECK_SECONDS:
                return self._state
            self._read_at = time.monotonic()
        config = load_config(self.ctx.settings.data_dir)  # a raised cap applies at once; ctx.config is left alone
        caps = config.pipeline.budget
        if caps.daily_usd is None and caps.run_usd is None:
            state = None
        else:
            with self.ctx.db.engine.connect() as conn:
                if self._run_started_at is None and self.run_id is not None and caps.run_usd is not None:
                    row = runs.get_run(conn, self.run_id)
                    self._run_started_at = row.started_at if row is not None else None
                state = budget_state(conn, config, run_id=self.run_id, run_started_at=self._run_started_at,
                                     now=(self.clock or _module_clock())())
        with self._lock:
            self._state = state
        return state

    def spent(self, stage: str) -> None:
        """A ``stage`` execution finished: after a model stage the next :meth:`held` reads the ledger afresh (the
        spend moved), so the cap is passed only by the calls already in flight."""
        if stage in MODEL_STAGES:
            with self._lock:
                self._read_at = -1e9

    def held(self) -> tuple[str, ...]:
        """The stages not to claim now: the model stages while a cap is reached, else none."""
        state = self.state()
        return state.held_stages if state is not None else ()


def budget_wait(engine: Any, config: Any) -> dict[str, Any] | None:
    """The reached spending cap as :meth:`BudgetState.describe` gives it (the newest active run's cap too), with
    ``waiting``: the model-stage rows a claim would take now, held by it; None when no cap is reached. What
    ``ki status``, ``ki insert`` and ``GET /api/status`` show."""
    caps = config.pipeline.budget
    if caps.daily_usd is None and caps.run_usd is None:
        return None
    with engine.connect() as conn:
        active = runs.active_runs(conn)
        run = active[-1] if active else None
        state = budget_state(conn, config, run_id=run.id if run else None,
                             run_started_at=run.started_at if run else None, now=_module_clock()())
        shown = state.describe()
        if shown is not None:
            shown["waiting"] = held_rows(conn, state.held_stages)
    return shown


def remaining_for_a_run(conn: Connection, config: Any) -> float | None:
    """What a run started now may spend before a cap holds the model stages: the daily cap's rest (never below 0)
    and the run cap, whichever is smaller; None when no cap is set."""
    caps = config.pipeline.budget
    if caps.daily_usd is None and caps.run_usd is None:
        return None
    state = budget_state(conn, config, now=_module_clock()())
    left = [x for x in (state.remaining_usd, caps.run_usd) if x is not None]
    return min(left) if left else None


def estimate_against_budget(estimate_usd: float | None, remaining_usd: float | None) -> str | None:
    """One line setting a re-run's estimated cost against the budget left (None when no cap is set)."""
    if remaining_usd is None:
        return None
    if estimate_usd is None:
        return f"${remaining_usd:.2f} of the budget is left; the cost of this re-run is unknown"
    if estimate_usd > remaining_usd:
        return (f"the estimated ${estimate_usd:.2f} exceeds the ${remaining_usd:.2f} budget left: the model stages "
                "pause when it is spent and resume the next day or under a higher cap (pipeline.budget)")
    return f"the estimated ${estimate_usd:.2f} fits the ${remaining_usd:.2f} budget left"
