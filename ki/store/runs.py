"""The run ledger (``pipeline_runs``): a run's creation, progress and end, sync runs, and the reads
the console serves (paged runs, active runs, throughput; spec: "The console page").

The local provider writes its counters directly (:func:`create_run`, :func:`write_progress`,
:func:`finish_run`); an orchestrated batch's counters are aggregated from its members
(:mod:`ki.store.batches`). Every function takes a connection the caller owns.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.engine import Connection

ACTIVE_RUN_STATUSES = ("queued", "running")
KIND_INSERTION = "insertion"
KIND_ACCESS_REFRESH = "access_refresh"
KIND_SYNC = "sync"
LABEL_ACCESS_REFRESH = "Access refresh"


def active_run_ids(conn: Connection, *, provider: str | None = None) -> list[int]:
    """Ids of the ``queued``/``running`` runs (of ``provider`` when given), oldest first."""
    sql = "SELECT id FROM pipeline_runs WHERE status IN ('queued', 'running')"
    params: dict = {}
    if provider:
        sql += " AND provider = :p"
        params["p"] = provider
    return [int(i) for i in conn.execute(text(sql + " ORDER BY id"), params).scalars()]


# --- a run's row: creation, counters, end (both providers) ------------------------------------------


CREATE_RUN_SQL = text("""
INSERT INTO pipeline_runs (kind, label, provider, status, source_id, trigger, worker)
VALUES (:kind, :label, :provider, :status, :sid, :trigger, :worker) RETURNING id
""")


def create_run(conn: Connection, *, kind: str, label: str, provider: str, status: str, source_id: int | None,
               trigger: str, worker: str | None = None) -> int:
    """Insert a run row (``worker``: the process running a local run, ``host:pid:start``). Returns its id.

    Raises: sqlalchemy.exc.IntegrityError for a second unfinished sync of a source
        (``uq_pipeline_runs_active_sync``)."""
    return int(conn.execute(CREATE_RUN_SQL, {"kind": kind, "label": label, "provider": provider, "status": status,
                                             "sid": source_id, "trigger": trigger,
                                             "worker": worker}).scalar_one())


WRITE_PROGRESS_SQL = text("""
UPDATE pipeline_runs SET processed = :p, done = :d, skipped = :s, retried = :r, quarantined = :qn, updated_at = now()
WHERE id = :id""")

FINISH_COUNTED_SQL = text("""
UPDATE pipeline_runs SET status = :st, processed = :p, done = :d, skipped = :s, retried = :r, quarantined = :qn,
    error = :e, finished_at = now(), updated_at = now() WHERE id = :id""")


def _counts(counts: Any) -> dict[str, int]:
    return {"p": counts.processed, "d": counts.done, "s": counts.skipped, "r": counts.retried,
            "qn": counts.quarantined}


def write_progress(conn: Connection, run_id: int, counts: Any) -> None:
    """Write a local run's counters (anything with ``processed``, ``done``, ``skipped``, ``retried``,
    ``quarantined``) to its row."""
    conn.execute(WRITE_PROGRESS_SQL, {**_counts(counts), "id": run_id})


def finish_run(conn: Connection, run_id: int, counts: Any, status: str, error: str | None) -> None:
    """End a local run: its final counters, ``status`` (``completed``/``failed``) and ``error``."""
    conn.execute(FINISH_COUNTED_SQL, {**_counts(counts), "st": status, "e": error, "id": run_id})


SET_WORKFLOW_RUN_SQL = text("UPDATE pipeline_runs SET workflow_run_id = :w, updated_at = now() WHERE id = :id")


def set_workflow_run(conn: Connection, run_id: int, workflow_run_id: str) -> None:
    """Record the orchestrator's workflow run id of a run (a sync run's single workflow)."""
    conn.execute(SET_WORKFLOW_RUN_SQL, {"w": workflow_run_id, "id": run_id})


# --- sync runs ------------------------------------------------------------------------------------------

START_SYNC_SQL = text("UPDATE pipeline_runs SET status = 'running', updated_at = now() WHERE id = :id "
                      "AND status IN ('queued', 'running') RETURNING id")
COMPLETE_SYNC_SQL = text("""
UPDATE pipeline_runs SET status = 'completed', processed = :n, done = :c, insertion_run_id = :ins,
    finished_at = now(), updated_at = now()
WHERE id = :id AND status IN ('queued', 'running')
""")
FAIL_SYNC_SQL = text("""
UPDATE pipeline_runs SET status = 'failed', error = :e, finished_at = now(), updated_at = now()
WHERE id = :id AND status IN ('queued', 'running')
""")


def start_sync(conn: Connection, run_id: int) -> bool:
    """A queued sync run starts (``running``). Returns False when the run already ended (a replayed task
    must not scan and hand off a second time)."""
    return conn.execute(START_SYNC_SQL, {"id": run_id}).first() is not None


def complete_sync(conn: Connection, run_id: int, *, listed: int, changed: int,
                  insertion_run_id: int | None = None) -> None:
    """An active sync run completed: ``processed`` = files listed, ``done`` = files new or changed,
    ``insertion_run_id`` = the insertion run it handed off to (None: no hand-off), in one statement."""
    conn.execute(COMPLETE_SYNC_SQL, {"n": listed, "c": changed, "ins": insertion_run_id, "id": run_id})


def fail_sync(conn: Connection, run_id: int, error: str) -> None:
    """An active sync run failed with ``error`` (≤ 2,000 chars kept)."""
    conn.execute(FAIL_SYNC_SQL, {"e": error[:2000], "id": run_id})


# --- the reads the console serves -----------------------------------------------------------------------

_COLUMNS = """id, kind, label, provider, status, source_id, trigger, processed, done, skipped, retried,
quarantined, error, started_at, finished_at, updated_at, insertion_run_id, cancel_requested_at, cancelled_by"""


class RunRow(BaseModel):
    """One ``pipeline_runs`` row (times UTC; counters are stage executions)."""

    id: int
    kind: str
    label: str
    provider: str
    status: str
    source_id: int | None
    trigger: str
    processed: int
    done: int
    skipped: int
    retried: int
    quarantined: int
    error: str | None
    started_at: datetime
    finished_at: datetime | None
    updated_at: datetime
    insertion_run_id: int | None = None  # a sync run's hand-off (None: it handed off nothing)
    cancel_requested_at: datetime | None = None  # a cancellation asked for, by cancelled_by (ki.store.cancel)
    cancelled_by: str | None = None

    @classmethod
    def from_row(cls, r) -> RunRow:
        return cls.model_validate(dict(r._mapping))


def runs_page(conn: Connection, *, kinds: list[str] | None = None, status: str | None = None,
              limit: int = 20, offset: int = 0) -> tuple[list[RunRow], int]:
    """Runs newest first, optionally only ``kinds`` / one ``status``, paged; returns (rows, total)."""
    where = ["TRUE"]
    if kinds:
        where.append("kind = ANY(:kinds)")
    if status:
        where.append("status = :status")
    cond = " AND ".join(where)
    params = {"kinds": kinds, "status": status, "limit": limit, "offset": offset}
    total = int(conn.execute(text(f"SELECT count(*) FROM pipeline_runs WHERE {cond}"), params).scalar_one())
    rows = conn.execute(text(f"SELECT {_COLUMNS} FROM pipeline_runs WHERE {cond} ORDER BY id DESC "
                             "LIMIT :limit OFFSET :offset"), params).fetchall()
    return [RunRow.from_row(r) for r in rows], total


def active_runs(conn: Connection) -> list[RunRow]:
    """Runs still ``queued`` or ``running``, oldest first."""
    rows = conn.execute(text(f"SELECT {_COLUMNS} FROM pipeline_runs WHERE status = ANY(:st) ORDER BY id"),
                        {"st": list(ACTIVE_RUN_STATUSES)}).fetchall()
    return [RunRow.from_row(r) for r in rows]


def get_run(conn: Connection, run_id: int) -> RunRow | None:
    """One run, or None."""
    row = conn.execute(text(f"SELECT {_COLUMNS} FROM pipeline_runs WHERE id = :id"), {"id": run_id}).first()
    return RunRow.from_row(row) if row is not None else None


RECENT_RATE_SQL = text("""
SELECT coalesce(sum(processed), 0) AS processed,
       coalesce(sum(extract(epoch FROM finished_at - started_at)), 0) AS seconds
FROM (SELECT processed, started_at, finished_at FROM pipeline_runs
      WHERE kind = 'insertion' AND status = 'completed' AND finished_at IS NOT NULL AND processed > 0
      ORDER BY id DESC LIMIT :n) recent
""")


def recent_rate(conn: Connection, *, runs: int = 5) -> float | None:
    """Stage executions per second over the last ``runs`` completed insertion runs (None: no history)."""
    row = conn.execute(RECENT_RATE_SQL, {"n": runs}).one()
    seconds = float(row.seconds or 0)
    return float(row.processed) / seconds if seconds > 0 and row.processed else None


# -- name: local_active_runs --
# Active runs of the local provider with the process running them and their silence (s).
LOCAL_ACTIVE_SQL = text("""
SELECT id, worker, extract(epoch FROM now() - updated_at) AS silent_seconds
FROM pipeline_runs WHERE provider = 'local' AND status IN ('queued', 'running') ORDER BY id
""")


def local_active_runs(conn: Connection) -> list[tuple[int, str | None, float]]:
    """``(run id, worker, seconds since its row was last written)`` of every active local run."""
    return [(int(r.id), r.worker, float(r.silent_seconds or 0.0)) for r in conn.execute(LOCAL_ACTIVE_SQL)]
