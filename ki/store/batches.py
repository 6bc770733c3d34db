"""The batch ledger of orchestrated runs (``pipeline_run_object``) and its aggregation into the run row.

A Hatchet batch's reservation, members, progress aggregation and completion, and the reads of the
sweeper and of ``ki insert`` while it waits. The run row itself (creation, local counters, sync runs,
the console's reads) is :mod:`ki.store.runs`.

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider): ``trigger_insertion`` reserves,
under a global advisory lock, every non-deleted object with a non-terminal stage row that is not
already owned by another active batch; batch progress is aggregated into the run row under a
per-run advisory lock; the final task forces the last refresh so a run reaches ``completed``.
A batch made only of ``access_only_reindex`` index rows is an "Access refresh" run.

Table: ``pipeline_run_object`` (migration ``0007_batches``: one row per reserved document, with its
workflow run id and, once its DAG ended, ``finished_at``/``outcome``). A batch is *active* while its
run is ``queued`` or ``running``. Every function takes a connection the caller owns.

Counters of a batch (the same names as the local provider's, read from the durable rows of the
batch's documents that this run claimed, ``processing_state.run_id = run``):
done / skipped (handler or configuration skips, not ``waiting``) / quarantined; retried = the
failed attempts (a ``failed`` row's attempts, otherwise attempts − 1); processed = their sum.
Aggregating from rows (not incrementing per task) makes a replayed task harmless. A switched-off
stage's row that a completion recorded ``disabled_by_configuration`` on the way (never claimed, so
it carries no run id) counts as skipped for the run during which it was recorded, as the local
runner counts it (``ExecutionResult.passed``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.core.taxonomies import ACCESS_ONLY_REINDEX, DISABLED_BY_CONFIGURATION, WAITING_FOR_PREVIOUS_STAGE
from ki.store.runs import KIND_ACCESS_REFRESH, LABEL_ACCESS_REFRESH

#: pg_advisory_xact_lock key serialising batch reservations (all of ki's launchers).
RESERVE_LOCK_KEY = 0x6B69_0007
#: First half of the two-int advisory lock taken per run while its progress is aggregated.
RUN_LOCK_NS = 0x6B69_0008
#: A non-forced progress refresh is skipped when the run row was refreshed this recently (s).
PROGRESS_REFRESH_SECONDS = 2.0
#: Outcome of a member whose DAG failed in the orchestrator (its rows stay as they are).
OUTCOME_ORCHESTRATION_FAILED = "orchestration_failed"

_NON_TERMINAL = "('pending', 'running', 'failed')"
#: ``has_access_only_marker`` in SQL (the marker in ``last_error`` or ``last_error.details``).
_ACCESS_MARKER_SQL = f"""(coalesce((ps.last_error->>'{ACCESS_ONLY_REINDEX}')::boolean, false)
    OR coalesce((ps.last_error->'details'->>'{ACCESS_ONLY_REINDEX}')::boolean, false))"""


@dataclass(frozen=True)
class Reservation:
    """What :func:`reserve_batch` reserved.

    Attributes:
        run_id: the batch's pipeline_runs id.
        object_ids: the reserved documents, ascending.
        access_only: every non-terminal row of every reserved document is an ``index`` row carrying
            the ``access_only_reindex`` marker (the run is labelled "Access refresh").
    """

    run_id: int
    object_ids: tuple[int, ...]
    access_only: bool


# -- name: reserve_batch --
# Under the global lock: every non-deleted object with a pending/running/failed row that no other
# active batch owns becomes a member of this run.
RESERVE_SQL = text(f"""
INSERT INTO pipeline_run_object (run_id, source_object_id)
SELECT :run_id, so.id FROM source_object so
WHERE so.deleted_at IS NULL
  AND EXISTS (SELECT 1 FROM processing_state ps WHERE ps.source_object_id = so.id AND ps.status IN {_NON_TERMINAL})
  AND NOT EXISTS (SELECT 1 FROM pipeline_run_object m JOIN pipeline_runs r ON r.id = m.run_id
                  WHERE m.source_object_id = so.id AND m.run_id <> :run_id
                    AND r.status IN ('queued', 'running'))
ORDER BY so.id
ON CONFLICT DO NOTHING
RETURNING source_object_id
""")

ACCESS_ONLY_SQL = text(f"""
SELECT coalesce(bool_and(ps.stage = 'index' AND {_ACCESS_MARKER_SQL}), false)
FROM pipeline_run_object m JOIN processing_state ps ON ps.source_object_id = m.source_object_id
WHERE m.run_id = :run_id AND ps.status IN {_NON_TERMINAL}
""")


def reserve_batch(conn: Connection, run_id: int) -> Reservation:
    """Reserve this run's batch under :data:`RESERVE_LOCK_KEY` (held until the caller commits).

    Also marks the run ``running`` and, for an access-only batch, relabels it ``access_refresh`` /
    "Access refresh". Concurrent callers serialise on the lock, so a document is a member of at
    most one active batch: two launches never start a second DAG for the same document.
    """
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": RESERVE_LOCK_KEY})
    ids = sorted(int(r[0]) for r in conn.execute(RESERVE_SQL, {"run_id": run_id}))
    access_only = bool(ids) and bool(conn.execute(ACCESS_ONLY_SQL, {"run_id": run_id}).scalar())
    if access_only:
        conn.execute(text("UPDATE pipeline_runs SET kind = :k, label = :l, status = 'running', updated_at = now() "
                          "WHERE id = :id"), {"k": KIND_ACCESS_REFRESH, "l": LABEL_ACCESS_REFRESH, "id": run_id})
    else:
        conn.execute(text("UPDATE pipeline_runs SET status = 'running', updated_at = now() WHERE id = :id"),
                     {"id": run_id})
    return Reservation(run_id, tuple(ids), access_only)


# -- name: adopt_children --
# Embedded objects a stage registered (mail attachments, mbox messages: convert) join their
# container's batch unless another active batch owns them already.
ADOPT_CHILDREN_SQL = text(f"""
INSERT INTO pipeline_run_object (run_id, source_object_id)
SELECT :run_id, so.id FROM source_object so
WHERE so.parent_id = :parent AND so.deleted_at IS NULL
  AND EXISTS (SELECT 1 FROM processing_state ps WHERE ps.source_object_id = so.id AND ps.status IN {_NON_TERMINAL})
  AND NOT EXISTS (SELECT 1 FROM pipeline_run_object m JOIN pipeline_runs r ON r.id = m.run_id
                  WHERE m.source_object_id = so.id AND r.status IN ('queued', 'running'))
ORDER BY so.id
ON CONFLICT DO NOTHING
""")

UNTRIGGERED_CHILDREN_SQL = text("""
SELECT m.source_object_id FROM pipeline_run_object m JOIN source_object so ON so.id = m.source_object_id
WHERE m.run_id = :run_id AND so.parent_id = :parent AND m.workflow_run_id IS NULL AND m.finished_at IS NULL
ORDER BY 1
""")


def adopt_children(conn: Connection, run_id: int, parent_id: int) -> list[int]:
    """Make the unfinished child objects of ``parent_id`` members of run ``run_id`` (under the
    reservation lock) and return the children of this run that have no workflow run yet.

    A batch is reserved before its containers are converted, so without this the attachments a
    convert registers would wait for the next launch (the local provider runs them in the same
    run because it loops until idle). Idempotent: a retried task returns the members it has not
    triggered yet.
    """
    if conn.execute(text("SELECT NOT EXISTS (SELECT 1 FROM source_object WHERE parent_id = :p)"),
                    {"p": parent_id}).scalar():
        return []
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": RESERVE_LOCK_KEY})
    conn.execute(ADOPT_CHILDREN_SQL, {"run_id": run_id, "parent": parent_id})
    return [int(r[0]) for r in conn.execute(UNTRIGGERED_CHILDREN_SQL, {"run_id": run_id, "parent": parent_id})]


RECORD_RUN_IDS_SQL = text("""
UPDATE pipeline_run_object m SET workflow_run_id = v.wid, acknowledged_at = now(), verified_at = NULL
FROM unnest(CAST(:oids AS bigint[]), CAST(:wids AS text[])) AS v(oid, wid)
WHERE m.run_id = :run_id AND m.source_object_id = v.oid
""")


def record_workflow_runs(conn: Connection, run_id: int, pairs: Iterable[tuple[int, str]],
                         *, first: str | None = None) -> None:
    """Store each document's workflow run id; the run row keeps the first one known
    (``workflow_run_id``: the first pair's, else ``first``)."""
    pairs = [(int(o), str(w)) for o, w in pairs if w]
    if pairs:
        conn.execute(RECORD_RUN_IDS_SQL, {"run_id": run_id, "oids": [p[0] for p in pairs],
                                          "wids": [p[1] for p in pairs]})
    first = pairs[0][1] if pairs else first
    if first:
        conn.execute(text("UPDATE pipeline_runs SET workflow_run_id = coalesce(workflow_run_id, :w), "
                          "updated_at = now() WHERE id = :id"), {"w": first, "id": run_id})


AGGREGATE_SQL = text(f"""
WITH agg AS (
    SELECT count(*) FILTER (WHERE ps.status = 'done') AS done,
           count(*) FILTER (WHERE ps.status = 'skipped'
                            AND ps.reason IS DISTINCT FROM '{WAITING_FOR_PREVIOUS_STAGE}') AS skipped,
           count(*) FILTER (WHERE ps.status = 'quarantined') AS quarantined,
           coalesce(sum(CASE WHEN ps.status = 'failed' THEN ps.attempts
                             ELSE greatest(ps.attempts - 1, 0) END), 0) AS retried
    FROM pipeline_run_object m
    JOIN pipeline_runs r ON r.id = m.run_id
    JOIN processing_state ps ON ps.source_object_id = m.source_object_id
     AND (ps.run_id = m.run_id
          OR (ps.status = 'skipped' AND ps.reason = '{DISABLED_BY_CONFIGURATION}' AND ps.updated_at >= r.started_at))
    WHERE m.run_id = :run_id
)
UPDATE pipeline_runs r
SET done = agg.done, skipped = agg.skipped, quarantined = agg.quarantined, retried = agg.retried,
    processed = agg.done + agg.skipped + agg.quarantined + agg.retried, updated_at = now()
FROM agg WHERE r.id = :run_id
RETURNING r.status
""")


def _run_lock(conn: Connection, run_id: int, *, wait: bool) -> bool:
    sql = "SELECT pg_advisory_xact_lock(:ns, :k)" if wait else "SELECT pg_try_advisory_xact_lock(:ns, :k)"
    got = conn.execute(text(sql), {"ns": RUN_LOCK_NS, "k": int(run_id) % 2_147_483_647}).scalar()
    return True if wait else bool(got)


def lock_run(conn: Connection, run_id: int) -> None:
    """Take the per-run advisory lock (waiting; held until the caller commits; re-entrant within one
    transaction). Serialises a batch's progress aggregation, member ends and conveyor releases."""
    _run_lock(conn, run_id, wait=True)


def refresh_progress(conn: Connection, run_id: int, *, force: bool = False) -> bool:
    """Aggregate the batch's counters into its run row under the per-run advisory lock.

    Non-forced: skipped (False) when another process holds the lock or the row was refreshed
    within :data:`PROGRESS_REFRESH_SECONDS` (the aggregate reads every row of the batch, so
    refreshing after each of 350,000 tasks would cost O(n²)). Forced: waits for the lock.
    Returns True when the row was updated.
    """
    if not _run_lock(conn, run_id, wait=force):
        return False
    if not force:
        recent = conn.execute(
            text("SELECT updated_at > now() - make_interval(secs => :s) FROM pipeline_runs WHERE id = :id"),
            {"s": PROGRESS_REFRESH_SECONDS, "id": run_id}).scalar()
        if recent:
            return False
    return conn.execute(AGGREGATE_SQL, {"run_id": run_id}).first() is not None


DOCUMENT_OUTCOME_SQL = text(f"""
SELECT CASE
    WHEN bool_or(ps.status = 'quarantined') THEN 'quarantined'
    WHEN bool_or(ps.status IN {_NON_TERMINAL}) THEN 'unfinished'
    WHEN bool_or(ps.status = 'done') THEN 'done'
    ELSE 'skipped' END
FROM processing_state ps WHERE ps.source_object_id = :oid
""")


def document_outcome(conn: Connection, source_object_id: int) -> str:
    """``quarantined`` / ``unfinished`` / ``done`` / ``skipped`` from the object's rows."""
    return conn.execute(DOCUMENT_OUTCOME_SQL, {"oid": source_object_id}).scalar() or "skipped"


FINISH_RUN_SQL = text("""
UPDATE pipeline_runs
SET status = :status, error = coalesce(:error, error), finished_at = now(), updated_at = now()
WHERE id = :run_id AND status IN ('queued', 'running')
RETURNING id
""")


def _finalize_if_done(conn: Connection, run_id: int) -> str | None:
    """With the run lock held: complete (or fail) the run when no member is unfinished."""
    unfinished = conn.execute(
        text("SELECT EXISTS (SELECT 1 FROM pipeline_run_object WHERE run_id = :r AND finished_at IS NULL)"),
        {"r": run_id}).scalar_one()
    if unfinished:
        return None
    conn.execute(AGGREGATE_SQL, {"run_id": run_id})
    failed = conn.execute(
        text("SELECT count(*) FROM pipeline_run_object WHERE run_id = :r AND outcome = :o"),
        {"r": run_id, "o": OUTCOME_ORCHESTRATION_FAILED}).scalar_one()
    status = "failed" if failed else "completed"
    error = (f"{failed} document workflow(s) failed in the orchestrator; their rows stay as they are and the next "
             f"run picks them up") if failed else None
    done = conn.execute(FINISH_RUN_SQL, {"status": status, "error": error, "run_id": run_id}).first()
    return status if done else None


def finish_member(conn: Connection, run_id: int, source_object_id: int, outcome: str, *, error: str | None = None,
                  before_finalize: Callable[[Connection, int], object] | None = None) -> str | None:
    """Record that a document's DAG ended; finalize the run when it was the last one.

    Takes the per-run lock (waiting), so of two final tasks finishing at once exactly one sees zero unfinished
    members and forces the last aggregation. ``error`` (orchestration failures) is kept on the run row.
    ``before_finalize(conn, run_id)`` runs between the two (the final task's ``conveyor.reopen_finished``).
    Returns the run's new status (``completed``/``failed``) when this call finished the run, else None."""
    _run_lock(conn, run_id, wait=True)
    conn.execute(
        text("UPDATE pipeline_run_object SET finished_at = now(), outcome = :o "
             "WHERE run_id = :r AND source_object_id = :oid AND finished_at IS NULL"),
        {"o": outcome, "r": run_id, "oid": source_object_id})
    if before_finalize is not None:
        before_finalize(conn, run_id)
    if error:
        conn.execute(text("UPDATE pipeline_runs SET error = :e, updated_at = now() WHERE id = :r "
                          "AND status IN ('queued', 'running')"), {"e": error[:2000], "r": run_id})
    return _finalize_if_done(conn, run_id)


FINISH_TERMINAL_MEMBERS_SQL = text(f"""
UPDATE pipeline_run_object m
SET finished_at = now(),
    outcome = CASE WHEN EXISTS (SELECT 1 FROM processing_state ps WHERE ps.source_object_id = m.source_object_id
                                 AND ps.status = 'quarantined') THEN 'quarantined'
                   WHEN EXISTS (SELECT 1 FROM processing_state ps WHERE ps.source_object_id = m.source_object_id
                                 AND ps.status = 'done') THEN 'done' ELSE 'skipped' END
WHERE m.run_id = :r AND m.finished_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM processing_state ps
                  WHERE ps.source_object_id = m.source_object_id AND ps.status IN {_NON_TERMINAL})
""")


def complete_if_terminal(conn: Connection, run_id: int) -> str | None:
    """The sweeper's "all objects terminal" verdict: finish every member whose rows are all terminal
    and finalize the run through the same aggregation as the final task. Returns the new status or None."""
    _run_lock(conn, run_id, wait=True)
    conn.execute(FINISH_TERMINAL_MEMBERS_SQL, {"r": run_id})
    return _finalize_if_done(conn, run_id)


def fail_run(conn: Connection, run_id: int, error: str) -> bool:
    """Fail an active run with ``error`` (its rows are never deleted). True when it was active."""
    _run_lock(conn, run_id, wait=True)
    if conn.execute(text("SELECT 1 FROM pipeline_runs WHERE id = :r AND kind <> 'sync'"), {"r": run_id}).first():
        conn.execute(AGGREGATE_SQL, {"run_id": run_id})
    row = conn.execute(FINISH_RUN_SQL, {"status": "failed", "error": error[:2000], "run_id": run_id}).first()
    return row is not None


@dataclass(frozen=True)
class BatchState:
    """One active run as the sweeper and ``ki insert`` see it.

    Attributes:
        run_id, kind, status, provider, workflow_run_id, started_at: from the run row.
        last_activity: max(run.updated_at, newest processing_state.updated_at of the batch).
        members / unfinished_members: batch size and members whose DAG has not ended.
        non_terminal_objects: members with a pending/running/failed row.
        running_rows: rows of the batch currently claimed.
        next_retry_at: earliest retry due among the batch's failed rows.
    """

    run_id: int
    kind: str
    status: str
    provider: str
    workflow_run_id: str | None
    started_at: datetime
    last_activity: datetime
    members: int
    unfinished_members: int
    non_terminal_objects: int
    running_rows: int
    next_retry_at: datetime | None
    seconds_silent: float


BATCH_STATE_SQL = text(f"""
SELECT r.id, r.kind, r.status, r.provider, r.workflow_run_id, r.started_at,
       greatest(r.updated_at, (SELECT max(ps.updated_at) FROM pipeline_run_object m
                               JOIN processing_state ps ON ps.source_object_id = m.source_object_id
                               WHERE m.run_id = r.id)) AS last_activity,
       (SELECT count(*) FROM pipeline_run_object m WHERE m.run_id = r.id) AS members,
       (SELECT count(*) FROM pipeline_run_object m WHERE m.run_id = r.id AND m.finished_at IS NULL) AS unfinished,
       (SELECT count(DISTINCT m.source_object_id) FROM pipeline_run_object m
        JOIN processing_state ps ON ps.source_object_id = m.source_object_id
        WHERE m.run_id = r.id AND ps.status IN {_NON_TERMINAL}) AS non_terminal,
       (SELECT count(*) FROM pipeline_run_object m
        JOIN processing_state ps ON ps.source_object_id = m.source_object_id
        WHERE m.run_id = r.id AND ps.status = 'running') AS running_rows,
       (SELECT min(ps.next_retry_at) FROM pipeline_run_object m
        JOIN processing_state ps ON ps.source_object_id = m.source_object_id
        WHERE m.run_id = r.id AND ps.status = 'failed') AS next_retry_at,
       extract(epoch FROM now() - greatest(r.updated_at, (SELECT max(ps.updated_at) FROM pipeline_run_object m
                               JOIN processing_state ps ON ps.source_object_id = m.source_object_id
                               WHERE m.run_id = r.id))) AS silent
FROM pipeline_runs r WHERE r.id = ANY(CAST(:ids AS bigint[]))
ORDER BY r.id
""")


def batch_states(conn: Connection, run_ids: Sequence[int]) -> list[BatchState]:
    """The :class:`BatchState` of each run id given (sync runs have no members)."""
    if not run_ids:
        return []
    return [BatchState(int(r.id), r.kind, r.status, r.provider, r.workflow_run_id, r.started_at, r.last_activity,
                       int(r.members), int(r.unfinished), int(r.non_terminal), int(r.running_rows),
                       r.next_retry_at, float(r.silent or 0.0))
            for r in conn.execute(BATCH_STATE_SQL, {"ids": [int(i) for i in run_ids]})]


# --- batch members ----------------------------------------------------------------------------------------

MEMBER_WORKFLOW_SQL = text("""
SELECT workflow_run_id FROM pipeline_run_object WHERE run_id = :r AND source_object_id = :o
""")


def member_workflow_run(conn: Connection, run_id: int, source_object_id: int) -> str | None:
    """The workflow run id recorded for a batch member (None when none was recorded)."""
    return conn.execute(MEMBER_WORKFLOW_SQL, {"r": run_id, "o": source_object_id}).scalar()


STALLED_MEMBERS_SQL = text("""
SELECT m.source_object_id, m.workflow_run_id FROM pipeline_run_object m
WHERE m.run_id = :r AND m.finished_at IS NULL AND m.workflow_run_id = ANY(:wids)
ORDER BY m.source_object_id
""")


def unfinished_members(conn: Connection, run_id: int, workflow_run_ids: Sequence[str]) -> list[tuple[int, str]]:
    """``(source_object_id, workflow_run_id)`` of the run's unfinished members whose recorded workflow run
    is one of ``workflow_run_ids``, by object id."""
    rows = conn.execute(STALLED_MEMBERS_SQL, {"r": run_id, "wids": sorted(workflow_run_ids)})
    return [(int(r.source_object_id), str(r.workflow_run_id)) for r in rows]
