"""The batch conveyor of a Hatchet batch: which members' DAGs are released, in flight, waiting or stranded.

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider; ``KI_HATCHET_DOCUMENT_CONCURRENCY``)
and the decision "Hatchet DAG shape and pacing" (DESIGN.md): the document concurrency is enforced
by the batch ledger, not by a workflow-level concurrency key (measured on engine v0.105.0, that key
doubles the engine's CPU per document). Migration ``0018_conveyor``.

A batch (``pipeline_runs`` + its ``pipeline_run_object`` members, :mod:`ki.store.batches`) records its
document workflow and its *window* (``workflow_name``, ``document_window``: fixed when the batch is
triggered, so a run in flight keeps its DAG shape and its pace). A member is

* **waiting** — not released yet (``released_at`` NULL): no DAG exists for it;
* **in flight** — released and not finished: its DAG was (or is being) triggered;
* **stranded** — released, unfinished, and no ``workflow_run_id`` recorded: its releaser is
  triggering it right now, or died before recording the id (the releaser's replay, or the
  sweeper, triggers it again: the stable idempotency key makes a second trigger collide).

:func:`release` is the one step of the conveyor: under the per-run advisory lock it releases
waiting members (lowest object id first) into the free slots of the window, and returns what its
caller must trigger. Callers: the batch's trigger (the first window), each DAG's final task or
failure hook (the next members, ``released_by`` = the finished member), a convert task that
adopted attachments, and the sweeper (a conveyor that stopped). The trigger RPC happens after the
caller commits: no network call while the lock is held.

Every function takes a connection the caller owns; the lock is held until it commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.store.batches import lock_run
from ki.store.runs import ACTIVE_RUN_STATUSES

SET_SHAPE_SQL = text("""
UPDATE pipeline_runs SET workflow_name = :w, document_window = :n, window_limit = :n, window_min = :n,
    updated_at = now() WHERE id = :r
""")


def set_shape(conn: Connection, run_id: int, workflow_name: str, window: int) -> None:
    """Record the batch's document workflow and its window (DAGs in flight at once, ≥ 1; also the ceiling the
    window regrows to after the engine pushed back, :mod:`ki.store.pushback`)."""
    conn.execute(SET_SHAPE_SQL, {"w": workflow_name, "n": max(1, int(window)), "r": run_id})


@dataclass(frozen=True)
class Shape:
    """A batch's document workflow name and window (None for a run triggered before ``0018_conveyor``)."""

    workflow_name: str | None
    window: int | None


def shape(conn: Connection, run_id: int) -> Shape:
    """The :class:`Shape` recorded on run ``run_id`` (``Shape(None, None)`` when the run is unknown)."""
    row = conn.execute(text("SELECT workflow_name, document_window FROM pipeline_runs WHERE id = :r"),
                       {"r": run_id}).first()
    return Shape(row.workflow_name, row.document_window) if row is not None else Shape(None, None)


def active_workflow_names(conn: Connection) -> set[str]:
    """The document workflows of the active ``hatchet`` batches (a worker must serve each of them)."""
    rows = conn.execute(text("SELECT DISTINCT workflow_name FROM pipeline_runs WHERE provider = 'hatchet' "
                             "AND status = ANY(:st) AND workflow_name IS NOT NULL"),
                        {"st": list(ACTIVE_RUN_STATUSES)})
    return {r[0] for r in rows}


# -- name: release --
# Waiting members into the window's free slots, lowest object id first, only while the run is active.
RELEASE_SQL = text("""
WITH free AS (
    SELECT greatest(coalesce((SELECT document_window FROM pipeline_runs WHERE id = :r), :window)
                    - (SELECT count(*) FROM pipeline_run_object
                               WHERE run_id = :r AND released_at IS NOT NULL AND finished_at IS NULL), 0) AS n
), nxt AS (
    SELECT m.source_object_id FROM pipeline_run_object m
    WHERE m.run_id = :r AND m.released_at IS NULL AND m.finished_at IS NULL
      AND EXISTS (SELECT 1 FROM pipeline_runs r WHERE r.id = :r AND r.status IN ('queued', 'running'))
    ORDER BY m.source_object_id
    LIMIT (SELECT n FROM free)
)
UPDATE pipeline_run_object m SET released_at = now(), released_by = CAST(:by AS bigint)
FROM nxt WHERE m.run_id = :r AND m.source_object_id = nxt.source_object_id
""")

# Released, unfinished, no workflow run recorded: by this releaser (NULL = the first window or the
# sweeper), or by anyone (:every).
TO_TRIGGER_SQL = text("""
SELECT source_object_id FROM pipeline_run_object
WHERE run_id = :r AND released_at IS NOT NULL AND finished_at IS NULL AND workflow_run_id IS NULL
  AND (CAST(:every AS boolean) OR released_by IS NOT DISTINCT FROM CAST(:by AS bigint))
ORDER BY source_object_id
""")


def release(conn: Connection, run_id: int, *, released_by: int | None, default_window: int,
            every_releaser: bool = False) -> list[int]:
    """Release waiting members of run ``run_id`` into the free slots of its window (the run's
    ``document_window``; ``default_window`` for a run that recorded none); return the members the
    caller must trigger, ascending.

    Takes the per-run advisory lock (``lock_run``), so two DAGs ending at once never release into
    the same slot. Returned: every unfinished member without a recorded workflow run that
    ``released_by`` released — now, or in an earlier attempt of the same releaser that died before
    recording the ids (so a replayed final task re-triggers exactly its own successors, which the
    stable idempotency key turns into the existing DAG, and never a member twice).
    ``every_releaser=True`` (the sweeper): the stranded members of every releaser.
    Nothing is released once the run is no longer active.
    """
    lock_run(conn, run_id)
    params = {"r": run_id, "window": max(1, int(default_window)), "by": released_by}
    conn.execute(RELEASE_SQL, params)
    return [int(r[0]) for r in conn.execute(TO_TRIGGER_SQL, {**params, "every": every_releaser})]


# -- name: reopen_finished --
# Finished members that hold a row re-opened by a later classification (lane ``rerun``, pending): back to
# waiting, one more re-opening counted (their next DAG's idempotency key), only while the run is active. Driven from
# the few pending rerun rows (ix_processing_state_lane), not from every finished member: each DAG's end runs it.
REOPEN_SQL = text("""
UPDATE pipeline_run_object m
SET finished_at = NULL, outcome = NULL, released_at = NULL, released_by = NULL, workflow_run_id = NULL,
    reopens = m.reopens + 1
FROM (SELECT DISTINCT source_object_id FROM processing_state WHERE status = 'pending' AND lane = 'rerun') ps
WHERE m.run_id = :r AND m.source_object_id = ps.source_object_id AND m.finished_at IS NOT NULL
  AND EXISTS (SELECT 1 FROM pipeline_runs r WHERE r.id = :r AND r.status IN ('queued', 'running'))
RETURNING m.source_object_id
""")


def reopen_finished(conn: Connection, run_id: int) -> list[int]:
    """Put back on the conveyor the finished members of run ``run_id`` that a later classification
    re-opened (a pending row in lane ``rerun``: ``ki.domain.relate.basis`` re-runs a relate whose basis changed);
    returns their object ids, ascending.

    Order independence on the Hatchet provider: a document's DAG can end before another document's
    classification re-opens its relate; without this the run completed with that row pending. Called by
    each DAG's final task before it records its own end (under the per-run lock), so the run is not
    finalised while such a member is owed a DAG; :func:`release` then releases it like any waiting member,
    and its DAG's idempotency key carries ``reopens`` (:func:`attempt_keys`)."""
    lock_run(conn, run_id)
    return sorted(int(r[0]) for r in conn.execute(REOPEN_SQL, {"r": run_id}))


def attempt_keys(conn: Connection, run_id: int, oids: Sequence[int]) -> dict[int, str]:
    """The ``attempt`` part of each member's DAG idempotency key: ``""`` for its first DAG, ``reopen<n>``
    after its ``n``-th re-opening (:func:`reopen_finished`) — new per re-opening, the same for a replay."""
    rows = conn.execute(text("SELECT source_object_id, reopens FROM pipeline_run_object "
                             "WHERE run_id = :r AND source_object_id = ANY(CAST(:o AS bigint[]))"),
                        {"r": run_id, "o": [int(o) for o in oids]})
    keys = {int(r.source_object_id): (f"reopen{r.reopens}" if r.reopens else "") for r in rows}
    return {int(o): keys.get(int(o), "") for o in oids}


# The most urgent lane of each member's owed rows (live, retry, backfill, rerun: the order of the Hatchet run
# priorities, ki.workflows.dag.LANE_PRIORITY).
MEMBER_LANES_SQL = text("""
SELECT ps.source_object_id,
       (ARRAY['live', 'retry', 'backfill', 'rerun'])[min(CASE ps.lane WHEN 'live' THEN 1 WHEN 'retry' THEN 2
                                                      WHEN 'backfill' THEN 3 ELSE 4 END)] AS lane
FROM processing_state ps
WHERE ps.source_object_id = ANY(CAST(:o AS bigint[])) AND ps.status IN ('pending', 'running', 'failed')
GROUP BY ps.source_object_id
""")


def member_lanes(conn: Connection, oids: Sequence[int]) -> dict[int, str]:
    """The most urgent lane (``live`` > ``retry`` > ``backfill`` > ``rerun``) among each object's owed rows
    (pending, running or failed); an object with none owed is absent (DESIGN.md "Lanes")."""
    if not oids:
        return {}
    return {int(r.source_object_id): str(r.lane)
            for r in conn.execute(MEMBER_LANES_SQL, {"o": [int(o) for o in oids]})}


def in_flight_members(conn: Connection, run_id: int) -> list[tuple[int, str]]:
    """``(source_object_id, workflow_run_id)`` of the run's released, unfinished members whose DAG was
    triggered (its id recorded), by object id: at most the window."""
    rows = conn.execute(text("SELECT source_object_id, workflow_run_id FROM pipeline_run_object WHERE run_id = :r "
                             "AND released_at IS NOT NULL AND finished_at IS NULL AND workflow_run_id IS NOT NULL "
                             "ORDER BY source_object_id"), {"r": run_id})
    return [(int(r.source_object_id), str(r.workflow_run_id)) for r in rows]


@dataclass(frozen=True)
class ConveyorState:
    """A batch's conveyor as the sweeper sees it.

    Attributes:
        run_id: the batch.
        window: its recorded window (None: triggered before ``0018_conveyor``).
        in_flight: released, unfinished members (their DAG exists or is being triggered).
        triggered: of those, the ones whose workflow run id is recorded.
        stranded: released, unfinished, no workflow run id (``in_flight - triggered``).
        waiting: unfinished members never released.
    """

    run_id: int
    window: int | None
    in_flight: int
    triggered: int
    waiting: int

    @property
    def stranded(self) -> int:
        return self.in_flight - self.triggered

    @property
    def stopped(self) -> bool:
        """Members are owed a DAG that nothing will trigger: a stranded member, or a waiting one
        while the window has a free slot (each DAG's end fills its slot, so in a batch the sweeper
        found silent, a free slot with members waiting means the releaser died)."""
        free = self.window is not None and self.in_flight < self.window
        return self.stranded > 0 or (self.waiting > 0 and free)


CONVEYOR_SQL = text("""
SELECT r.id, r.document_window,
       count(m.source_object_id) FILTER (WHERE m.released_at IS NOT NULL AND m.finished_at IS NULL) AS in_flight,
       count(m.source_object_id) FILTER (WHERE m.released_at IS NOT NULL AND m.finished_at IS NULL
                                          AND m.workflow_run_id IS NOT NULL) AS triggered,
       count(m.source_object_id) FILTER (WHERE m.released_at IS NULL AND m.finished_at IS NULL) AS waiting
FROM pipeline_runs r LEFT JOIN pipeline_run_object m ON m.run_id = r.id
WHERE r.id = ANY(CAST(:ids AS bigint[]))
GROUP BY r.id, r.document_window
""")


def conveyor_states(conn: Connection, run_ids: Sequence[int]) -> dict[int, ConveyorState]:
    """The :class:`ConveyorState` of each run id given (runs without members count zeros)."""
    if not run_ids:
        return {}
    rows = conn.execute(CONVEYOR_SQL, {"ids": [int(i) for i in run_ids]})
    return {int(r.id): ConveyorState(int(r.id), r.document_window, int(r.in_flight), int(r.triggered),
                                     int(r.waiting)) for r in rows}
