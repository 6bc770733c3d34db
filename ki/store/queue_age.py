"""How long runnable work has waited: the oldest runnable row per stage and lane.

What the metrics scrape (``ki_queue_oldest_runnable_age_seconds``) and ``ki status`` (oldest waiting age per
stage) read. A row is runnable when it is ``pending``, or ``failed`` with its retry due
(``ki.store.claims.ELIGIBLE_SQL``); it has been runnable since its ``updated_at`` (pending: the statement
that made it owed wrote it) or its ``next_retry_at`` (failed: the retry fell due then), whichever is later.
Spec: work-queue.md "Lease-Based Claiming" (runnable items), prior-art §8 ("telling stuck apart from
waiting in line").
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection

# -- name: oldest_runnable --
# One row per (stage, lane) holding runnable rows: their count and the oldest one's age in seconds. Reads
# the partial index ix_processing_state_lane (lane, updated_at WHERE status IN ('pending', 'failed')).
OLDEST_RUNNABLE_SQL = text("""
SELECT stage, lane, count(*) AS n,
       extract(epoch FROM now() - min(CASE WHEN status = 'failed' THEN greatest(updated_at, next_retry_at)
                                          ELSE updated_at END)) AS age
FROM processing_state
WHERE status IN ('pending', 'failed') AND (status = 'pending' OR next_retry_at <= now())
GROUP BY stage, lane
""")


@dataclass(frozen=True)
class QueueAge:
    """Runnable rows of one (stage, lane): how many, and the oldest one's age in seconds (≥ 0)."""

    stage: str
    lane: str
    runnable: int
    oldest_seconds: float


def oldest_runnable(conn: Connection) -> list[QueueAge]:
    """Every (stage, lane) with runnable rows, as :class:`QueueAge` (stage and lane order)."""
    rows = conn.execute(OLDEST_RUNNABLE_SQL).fetchall()
    return sorted((QueueAge(r.stage, r.lane, int(r.n), max(0.0, float(r.age or 0.0))) for r in rows),
                  key=lambda a: (a.stage, a.lane))


#: Reasons a row waits with besides its place in the stage order and a retry not yet due (``last_error.reason``
#: of a pending, failed or skipped row): a spending cap, a file the share will not let ki read.
WAIT_REASONS = ("budget", "source_unreadable")

# -- name: waiting_rows --
# Rows that are owed but not runnable now, by stage and why: waiting on the stage before
# (waiting_for_previous_stage), a retry not yet due (run_after), or a recorded wait reason (WAIT_REASONS).
WAITING_ROWS_SQL = text("""
SELECT stage, CASE WHEN status = 'failed' AND next_retry_at > now() AND (reason IS NULL OR reason <> ALL(:reasons))
                   THEN 'run_after' ELSE reason END AS why,
       count(*) AS n, extract(epoch FROM now() - min(updated_at)) AS age
FROM processing_state
WHERE (status = 'skipped' AND reason = 'waiting_for_previous_stage')
   OR (status = 'failed' AND next_retry_at > now())
   OR (status IN ('pending', 'failed', 'skipped') AND reason = ANY(:reasons))
GROUP BY 1, 2
""")


@dataclass(frozen=True)
class Waiting:
    """Rows of one stage waiting for one reason: how many, and the oldest one's age in seconds."""

    stage: str
    reason: str
    rows: int
    oldest_seconds: float


def waiting_rows(conn: Connection) -> list[Waiting]:
    """Every (stage, reason) with rows owed but not runnable now (see :data:`WAITING_ROWS_SQL`)."""
    rows = conn.execute(WAITING_ROWS_SQL, {"reasons": list(WAIT_REASONS)}).fetchall()
    return sorted((Waiting(r.stage, r.why, int(r.n), max(0.0, float(r.age or 0.0))) for r in rows),
                  key=lambda w: (w.stage, w.reason))
