"""Reads of the run ledger (``pipeline_runs``) the console serves: paged runs, active runs, throughput.

Spec: insertion-pipeline.md "The console page" (GET /api/runs: recent processing runs; GET
/api/status: active runs with progress) and "Orchestration" (the run row records the scalar
counters processed, done, skipped, retried, quarantined).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.engine import Connection

#: Statuses of a run that has not finished.
ACTIVE_STATUSES = ("queued", "running")

_COLUMNS = """id, kind, label, provider, status, source_id, trigger, processed, done, skipped, retried,
quarantined, error, started_at, finished_at, updated_at"""


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
                        {"st": list(ACTIVE_STATUSES)}).fetchall()
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
