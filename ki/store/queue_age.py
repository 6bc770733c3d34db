"""How long runnable work has waited, and why the rest waits: the reads behind the queue metrics and ``ki status``.

A row is runnable when it is ``pending``, or ``failed`` with its retry due (``ki.store.claims.ELIGIBLE_SQL``);
it has been runnable since its ``updated_at`` (pending: the statement that made it owed wrote it) or its
``next_retry_at`` (failed: the retry fell due then). Every read here is bounded at any estate size: the oldest
pending row of each (lane, stage) pair is one descent of ``ix_processing_state_lane_stage``; failed rows and
rows parked for a reason are few and found through ``ix_processing_state_stage_status``. How many rows are
pending, or wait on the stage before, is the bucket count's (``ki.store.status.bucket_counts``), not read again.
Spec: work-queue.md "Lease-Based Claiming" (runnable items); prior-art §8 ("telling stuck apart from waiting in
line").
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.core.taxonomies import CLAIM_LANES, PIPELINE_STAGE_ORDER

#: Reasons a row waits with besides its place in the stage order and a retry not yet due (``last_error.reason``
#: of a pending, failed or skipped row): a file the share will not let ki read.
WAIT_REASONS = ("source_unreadable",)

# -- name: oldest_pending --
# The oldest pending row of each (lane, stage) pair: one index descent per pair (``x BETWEEN p.x AND p.x``
# keeps the planner on the pair's index range, as the claim's probe does: ki.store.claims._PAIR_PROBE).
OLDEST_PENDING_SQL = text("""
SELECT p.stage, p.lane, extract(epoch FROM now() - c.updated_at) AS age
FROM unnest(CAST(:lanes AS text[]), CAST(:stages AS text[])) AS p(lane, stage)
CROSS JOIN LATERAL (
    SELECT updated_at FROM processing_state
    WHERE lane BETWEEN p.lane AND p.lane AND stage BETWEEN p.stage AND p.stage AND status = 'pending'
    ORDER BY lane, stage, updated_at LIMIT 1) c
""")

# -- name: failed_due --
# Failed rows whose retry is due (runnable): how many and since when, per stage and lane.
FAILED_DUE_SQL = text("""
SELECT stage, lane, count(*) AS n, extract(epoch FROM now() - min(greatest(updated_at, next_retry_at))) AS age
FROM processing_state
WHERE stage = ANY(:stages) AND status = 'failed' AND next_retry_at <= now()
GROUP BY stage, lane
""")

# -- name: waiting_rows --
# Rows owed but not runnable now, besides those waiting on the stage before: a retry not yet due (run_after)
# or a recorded wait reason (WAIT_REASONS).
WAITING_ROWS_SQL = text("""
SELECT stage, CASE WHEN status = 'failed' AND (reason IS NULL OR reason <> ALL(:reasons))
                   THEN 'run_after' ELSE reason END AS why,
       count(*) AS n, extract(epoch FROM now() - min(updated_at)) AS age
FROM processing_state
WHERE stage = ANY(:stages)
  AND ((status = 'failed' AND next_retry_at > now())
       OR (status IN ('pending', 'failed', 'skipped') AND reason = ANY(:reasons)))
GROUP BY 1, 2
""")


@dataclass(frozen=True)
class QueueAge:
    """The oldest runnable row of one (stage, lane): its age in seconds (≥ 0)."""

    stage: str
    lane: str
    oldest_seconds: float


@dataclass(frozen=True)
class Waiting:
    """Rows of one stage waiting for one reason: how many, and the oldest one's age in seconds (None: not read)."""

    stage: str
    reason: str
    rows: int
    oldest_seconds: float | None


def oldest_runnable(conn: Connection) -> tuple[list[QueueAge], dict[str, int]]:
    """``(the oldest runnable row's age per (stage, lane) that has one, failed rows due per stage)``.

    Runnable rows per stage are the bucket count's ``pending`` plus the second value."""
    pairs = [(lane, stage) for lane in CLAIM_LANES for stage in PIPELINE_STAGE_ORDER]
    ages: dict[tuple[str, str], float] = {}
    for r in conn.execute(OLDEST_PENDING_SQL, {"lanes": [p[0] for p in pairs], "stages": [p[1] for p in pairs]}):
        ages[(r.stage, r.lane)] = max(0.0, float(r.age or 0.0))
    due: dict[str, int] = {}
    for r in conn.execute(FAILED_DUE_SQL, {"stages": list(PIPELINE_STAGE_ORDER)}):
        key = (r.stage, r.lane)
        ages[key] = max(ages.get(key, 0.0), max(0.0, float(r.age or 0.0)))
        due[r.stage] = due.get(r.stage, 0) + int(r.n)
    return [QueueAge(s, lane, age) for (s, lane), age in sorted(ages.items())], due


def waiting_rows(conn: Connection, buckets: dict[str, dict[str, int]]) -> list[Waiting]:
    """Every (stage, reason) with rows owed but not runnable now: ``waiting_for_previous_stage`` from
    ``buckets`` (the bucket counts' ``waiting``), the rest read (:data:`WAITING_ROWS_SQL`)."""
    out = [Waiting(stage, "waiting_for_previous_stage", n, None)
           for stage, b in buckets.items() if (n := b.get("waiting", 0))]
    rows = conn.execute(WAITING_ROWS_SQL, {"reasons": list(WAIT_REASONS), "stages": list(PIPELINE_STAGE_ORDER)})
    out += [Waiting(r.stage, r.why, int(r.n), max(0.0, float(r.age or 0.0))) for r in rows]
    return sorted(out, key=lambda w: (w.stage, w.reason))
