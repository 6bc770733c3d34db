"""A run's cancellation: the request on its row, the read of it, and the end ``cancelled``.

Spec: work-queue.md "Work Item Lifecycle" (``Runnable --> Cancelled``) applied to a whole run; DESIGN.md
and ``docs/design-decisions.md`` "Cancelling a run". A request (:func:`request_cancel`, by ``ki run cancel``
or ``POST /api/runs/{id}/cancel``) writes ``cancel_requested_at`` / ``cancelled_by`` (migration
``0023_run_cancel``) on an active run. The executor of the run reads it (:func:`cancel_requested`): the
local runner stops claiming and lets its claims in hand finish, then ends the run ``cancelled`` with its
counters (:func:`finish_cancelled`); a Hatchet batch is ended at once (:func:`end_batch_cancelled`: its
waiting members never get a DAG, its in-flight members' DAGs are cancelled by the caller, and its tasks
claim nothing more once they read the request).

Rows are never rewritten here: a row the run never claimed keeps the state it had; a row it finished stays
finished; a row it holds finishes or, if its process dies or hangs, is recovered by the stale-claim rule.
Every function takes a connection the caller owns.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.store.batches import AGGREGATE_SQL, lock_run

STATUS_CANCELLED = "cancelled"
#: Outcome of a batch member whose DAG the cancellation ended (or never started).
OUTCOME_CANCELLED = "cancelled"


@dataclass(frozen=True)
class CancelRequest:
    """What :func:`request_cancel` found.

    Attributes:
        run_id: the run asked for.
        found: the run exists.
        status: its status after the request (an active run stays ``queued``/``running`` until its
            executor ends it; a finished run keeps its final status).
        provider / kind / worker: from the run row (``worker``: the local process running it).
        requested: the request is recorded (now or by an earlier call); False for a finished run.
    """

    run_id: int
    found: bool
    status: str | None = None
    provider: str | None = None
    kind: str | None = None
    worker: str | None = None
    requested: bool = False


REQUEST_SQL = text("""
UPDATE pipeline_runs
SET cancel_requested_at = coalesce(cancel_requested_at, now()), cancelled_by = coalesce(cancelled_by, :actor),
    updated_at = now()
WHERE id = :id AND status IN ('queued', 'running')
RETURNING status, provider, kind, worker
""")


def request_cancel(conn: Connection, run_id: int, *, actor: str) -> CancelRequest:
    """Record a cancellation request on active run ``run_id`` (idempotent: the first request's time and actor
    are kept). A finished or unknown run is left as it is (``requested`` False)."""
    row = conn.execute(REQUEST_SQL, {"id": run_id, "actor": actor}).first()
    if row is not None:
        return CancelRequest(run_id, True, row.status, row.provider, row.kind, row.worker, True)
    row = conn.execute(text("SELECT status, provider, kind, worker FROM pipeline_runs WHERE id = :id"),
                       {"id": run_id}).first()
    if row is None:
        return CancelRequest(run_id, False)
    return CancelRequest(run_id, True, row.status, row.provider, row.kind, row.worker, False)


CANCEL_REQUESTED_SQL = text("SELECT cancel_requested_at IS NOT NULL FROM pipeline_runs WHERE id = :id")


def cancel_requested(conn: Connection, run_id: int | None) -> bool:
    """True when run ``run_id`` was asked to cancel (False for None or an unknown run). One indexed read."""
    if run_id is None:
        return False
    return bool(conn.execute(CANCEL_REQUESTED_SQL, {"id": run_id}).scalar())


FINISH_CANCELLED_SQL = text("""
UPDATE pipeline_runs SET status = 'cancelled', processed = :p, done = :d, skipped = :s, retried = :r,
    quarantined = :qn, error = :e, finished_at = now(), updated_at = now()
WHERE id = :id AND status IN ('queued', 'running')
""")


def finish_cancelled(conn: Connection, run_id: int, counts: object, note: str) -> None:
    """End a local run ``cancelled`` with its counters (``processed``, ``done``, ``skipped``, ``retried``,
    ``quarantined`` attributes of ``counts``) and ``note`` (who cancelled, what was left) as its error text."""
    c = counts
    conn.execute(FINISH_CANCELLED_SQL, {"p": c.processed, "d": c.done, "s": c.skipped,  # type: ignore[attr-defined]
                                        "r": c.retried, "qn": c.quarantined,  # type: ignore[attr-defined]
                                        "e": note[:2000], "id": run_id})


END_MEMBERS_SQL = text("""
UPDATE pipeline_run_object SET finished_at = now(), outcome = :o
WHERE run_id = :r AND finished_at IS NULL
RETURNING source_object_id, workflow_run_id, released_at IS NOT NULL AS released
""")


@dataclass(frozen=True)
class BatchCancelled:
    """A batch ended by :func:`end_batch_cancelled`: ``ended`` (False: it was no longer active),
    ``waiting`` (members that never got a DAG) and ``in_flight`` (``(object id, workflow run id)`` of the
    members whose DAG the caller must cancel in the orchestrator)."""

    ended: bool
    waiting: int = 0
    in_flight: tuple[tuple[int, str], ...] = ()


def end_batch_cancelled(conn: Connection, run_id: int, note: str) -> BatchCancelled:
    """Under the per-run lock: end an active (Hatchet) batch ``cancelled``: every unfinished member is finished
    with outcome ``cancelled`` (so the conveyor releases nothing more), the counters are aggregated from the
    rows the run claimed, the run row ends ``cancelled`` with ``note``. Returns the :class:`BatchCancelled`."""
    lock_run(conn, run_id)
    active = conn.execute(text("SELECT 1 FROM pipeline_runs WHERE id = :r AND status IN ('queued', 'running')"),
                          {"r": run_id}).first()
    if active is None:
        return BatchCancelled(False)
    members = conn.execute(END_MEMBERS_SQL, {"r": run_id, "o": OUTCOME_CANCELLED}).fetchall()
    conn.execute(AGGREGATE_SQL, {"run_id": run_id})
    conn.execute(text("UPDATE pipeline_runs SET status = 'cancelled', error = :e, finished_at = now(), "
                      "updated_at = now() WHERE id = :r"), {"e": note[:2000], "r": run_id})
    in_flight = tuple((int(m.source_object_id), str(m.workflow_run_id)) for m in members if m.workflow_run_id)
    return BatchCancelled(True, sum(1 for m in members if not m.released), in_flight)


RUN_CLAIMS_SQL = text("""
SELECT count(*) FROM processing_state WHERE run_id = :r AND status = 'running'
""")


def running_rows_of(conn: Connection, run_id: int) -> int:
    """How many rows the run still holds (``running`` with its run id)."""
    return int(conn.execute(RUN_CLAIMS_SQL, {"r": run_id}).scalar_one())


def cancelled_by(conn: Connection, run_id: int) -> str | None:
    """Who asked run ``run_id`` to cancel (None: nobody, or an unknown run)."""
    return conn.execute(text("SELECT cancelled_by FROM pipeline_runs WHERE id = :id"), {"id": run_id}).scalar()


def owed_rows(conn: Connection) -> int:
    """Rows any run still owes work on: ``pending``, ``running`` or ``failed`` (awaiting retry)."""
    return int(conn.execute(text("SELECT count(*) FROM processing_state "
                                 "WHERE status IN ('pending', 'running', 'failed')")).scalar_one())
