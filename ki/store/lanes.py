"""Claim lanes: which lane a claim probes first, and how much each lane owes.

DESIGN.md "Lanes"; spec work-queue.md "Lease-Based Claiming" (1. Poll: runnable items by priority
within claim lanes). A ``processing_state`` row records why it is owed (``lane``, migration
0020_lanes; ``ki.core.taxonomies.CLAIM_LANES``), set by the statement that makes it owed: a scan's seeding
and requeue of changed bytes (``backfill`` for a source's first full scan and for a bulk arrival of more
than ``pipeline.lanes.live_max_files`` documents, ``live`` otherwise),
the prepare steps' requeues (``rerun``), an operator's release (``retry``); a stage unlocked by its
predecessor takes the predecessor's lane, so a document keeps its lane through the stages.

The claim (:func:`ki.store.claims.claim_next` with ``lanes``) takes an eligible row of the first lane,
in the order a :class:`LaneSchedule` gives, that has one: of that lane's latest stage that has one
(depth-first, :func:`probe_order`; docs/design-decisions.md "Depth-first claim order"), oldest first
within the stage. The schedule is a smooth weighted
round robin: while every lane has work, each lane gets ``weight / sum(weights)`` of the claims (none
starves: ``backfill`` keeps its share under a flood of live changes); an empty lane's turn falls to the
next lane in priority order, so no claim is wasted.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.core.taxonomies import CLAIM_LANES, DEFAULT_LANE_WEIGHTS, MODEL_STAGES, PIPELINE_STAGE_ORDER


class LaneSchedule:
    """Smooth weighted round robin over :data:`ki.core.taxonomies.CLAIM_LANES` (thread-safe).

    Args:
        weights: lane → positive integer weight (missing lanes take :data:`DEFAULT_LANE_WEIGHTS`).

    Raises:
        ValueError: an unknown lane or a weight below 1.
    """

    def __init__(self, weights: Mapping[str, int] | None = None):
        merged = {**DEFAULT_LANE_WEIGHTS, **(weights or {})}
        unknown = set(merged) - set(CLAIM_LANES)
        if unknown or any(int(w) < 1 for w in merged.values()):
            raise ValueError(f"lane weights must be integers >= 1 for lanes {list(CLAIM_LANES)}, got {merged}")
        self.weights = {lane: int(merged[lane]) for lane in CLAIM_LANES}
        self._total = sum(self.weights.values())
        self._current = dict.fromkeys(CLAIM_LANES, 0)
        self._lock = threading.Lock()

    def next_order(self) -> tuple[str, ...]:
        """The lane order of the next claim: the lane whose turn it is, then the others in priority order."""
        with self._lock:
            for lane, weight in self.weights.items():
                self._current[lane] += weight
            turn = max(CLAIM_LANES, key=lambda lane: self._current[lane])  # ties: the earlier (higher) lane
            self._current[turn] -= self._total
        return (turn, *(lane for lane in CLAIM_LANES if lane != turn))


#: Stages latest first: the order a lane's stages are probed in (depth-first).
LATEST_FIRST: tuple[str, ...] = tuple(reversed(PIPELINE_STAGE_ORDER))


def probe_order(lanes: Sequence[str], paused: Sequence[str] = (), *,
                model_only: bool = False) -> tuple[list[str], list[str]]:
    """The (lane, stage) pairs a lane claim probes, in order, as two parallel lists.

    Each lane of ``lanes`` in turn, and within it every stage not in ``paused`` latest first
    (:data:`LATEST_FIRST`; only :data:`ki.core.taxonomies.MODEL_STAGES` with ``model_only``):
    docs/design-decisions.md "Depth-first claim order".
    """
    stages = [s for s in LATEST_FIRST if s not in paused and (not model_only or s in MODEL_STAGES)]
    return [lane for lane in lanes for _ in stages], [stage for _ in lanes for stage in stages]


def model_workers(workers: int, configured: int | None) -> int:
    """How many of ``workers`` are reserved for the model stages (they claim model-stage rows first).

    ``configured`` (``pipeline.lanes.model_workers``) when set, else a quarter of the pool rounded up;
    never more than ``workers - 1`` when ``workers > 1`` (the general queue keeps a worker), 0 for one worker.
    """
    if workers <= 1:
        return 0
    wanted = configured if configured is not None else -(-workers // 4)
    return max(0, min(int(wanted), workers - 1))


# -- name: lane_counts --
# Rows owed per lane (pending, or failed awaiting a retry) and running per lane (ki status).
LANE_COUNTS_SQL = text("""
SELECT lane, count(*) FILTER (WHERE status IN ('pending', 'failed')) AS owed,
       count(*) FILTER (WHERE status = 'running') AS running
FROM processing_state WHERE status IN ('pending', 'failed', 'running') GROUP BY lane
""")


def lane_counts(conn: Connection) -> dict[str, dict[str, int]]:
    """``{lane: {"owed": n, "running": n}}`` for every lane of :data:`CLAIM_LANES` (zeros included)."""
    out = {lane: {"owed": 0, "running": 0} for lane in CLAIM_LANES}
    for row in conn.execute(LANE_COUNTS_SQL):
        if row.lane in out:
            out[row.lane] = {"owed": int(row.owed), "running": int(row.running)}
    return out


# -- name: lane_of --
LANE_OF_SQL = text("SELECT lane FROM processing_state WHERE source_object_id = :id AND stage = :stage")


def lane_of(conn: Connection, source_object_id: int, stage: str) -> str | None:
    """The lane of the object's ``stage`` row (None when it has none): embedded children take their
    container's lane."""
    return conn.execute(LANE_OF_SQL, {"id": source_object_id, "stage": stage}).scalar()
