"""Cold history: moving old rows to the archive tables in bounded batches, and restoring them.

Spec: work-queue.md "Indexed queue and historical work" (archival keeps public ids, provenance, usage, idempotency
lookups and failed-dependency barriers; retry restores the original work item); docs/design-decisions.md "Cold
history". Tables: migration ``0025_cold_history`` (:mod:`ki.store.models_archive`).

Each ``move_*`` function moves at most ``limit`` rows older than ``cutoff`` in **one statement** (``DELETE …
RETURNING`` feeding ``INSERT`` into the archive), so a process killed during a batch leaves every row either
live or archived, never both nor neither. What moves, and what stays:

* finished runs (not ``queued``/``running``) and their members, except a run another run still names as its
  hand-off (``insertion_run_id``; the naming run moves first, the named one in a later batch);
* attempt history entries, except those of rows now ``failed`` or ``quarantined`` (the evidence of the failures
  ``/v1/work-items?status=failed`` and its signature groups show);
* audit entries;
* the state rows (with their attempts) of objects tombstoned before ``cutoff`` that owe no work (no ``pending``,
  ``running`` or ``failed`` row): their console buckets are added to ``archive_bucket_counts`` in the same
  statement, so :func:`ki.store.status.bucket_counts` stays exact.

Never moved: ``source_object`` (public paths and provenance), ``model_usage`` (spend), blobs and artifacts.
:func:`restore_rows` moves a work item (or an object's rows) back with its public id and attempts.
"""

from __future__ import annotations

import functools
import json
import uuid
from datetime import datetime

from sqlalchemy import TextClause, text
from sqlalchemy.engine import Connection

from ki.core.taxonomies import STAGE_BUCKET_SQL

_ACTIVE = "('queued', 'running')"
#: processing_state's columns a restore writes (generated ones are computed again).

# -- name: move_runs --
MOVE_RUNS_SQL = text(f"""
WITH pick AS (
    SELECT r.id FROM pipeline_runs r
    WHERE r.status NOT IN {_ACTIVE} AND r.finished_at < :cutoff
      AND NOT EXISTS (SELECT 1 FROM pipeline_runs o WHERE o.insertion_run_id = r.id)
    ORDER BY r.id LIMIT :n FOR UPDATE SKIP LOCKED
), members AS (
    DELETE FROM pipeline_run_object m USING pick WHERE m.run_id = pick.id RETURNING m.*
), members_in AS (
    INSERT INTO pipeline_run_object_archive SELECT * FROM members RETURNING 1
), gone AS (
    DELETE FROM pipeline_runs r USING pick WHERE r.id = pick.id RETURNING r.*
), runs_in AS (
    INSERT INTO pipeline_runs_archive SELECT * FROM gone RETURNING 1
)
SELECT (SELECT count(*) FROM runs_in) AS runs, (SELECT count(*) FROM members_in) AS members
""")

def _moving(table: str, pick: str) -> str:
    """One batch of ``table``: the rows ``pick`` selects (ids, locked) leave it for ``<table>_archive``; counts them."""
    return f"""
WITH pick AS ({pick}
), gone AS (
    DELETE FROM {table} t USING pick WHERE t.id = pick.id RETURNING t.*
), moved AS (
    INSERT INTO {table}_archive SELECT * FROM gone RETURNING 1
)
SELECT count(*) FROM moved
"""


# -- name: move_attempts --
MOVE_ATTEMPTS_SQL = text(_moving("work_item_attempt", """
    SELECT a.id FROM work_item_attempt a
    WHERE a.finished_at < :cutoff
      AND NOT EXISTS (SELECT 1 FROM processing_state ps WHERE ps.id = a.processing_state_id
                        AND ps.status IN ('failed', 'quarantined'))
    ORDER BY a.id LIMIT :n FOR UPDATE SKIP LOCKED"""))

# -- name: move_audit --
MOVE_AUDIT_SQL = text(_moving("audit_log", """
    SELECT id FROM audit_log WHERE at < :cutoff ORDER BY at, id LIMIT :n FOR UPDATE SKIP LOCKED"""))

# -- name: move_tombstoned --
# The attempts leave first in the same statement (processing_state's delete trigger would drop them otherwise).
MOVE_TOMBSTONED_SQL = text(f"""
WITH objs AS (
    SELECT so.id FROM source_object so
    WHERE so.deleted_at < :cutoff
      AND EXISTS (SELECT 1 FROM processing_state ps WHERE ps.source_object_id = so.id)
      AND NOT EXISTS (SELECT 1 FROM processing_state ps WHERE ps.source_object_id = so.id
                        AND ps.status IN ('pending', 'running', 'failed'))
    ORDER BY so.id LIMIT :n
), picked AS (
    SELECT ps.id FROM processing_state ps JOIN objs ON objs.id = ps.source_object_id FOR UPDATE OF ps SKIP LOCKED
), att AS (
    DELETE FROM work_item_attempt a USING picked WHERE a.processing_state_id = picked.id RETURNING a.*
), att_in AS (
    INSERT INTO work_item_attempt_archive SELECT * FROM att RETURNING 1
), st AS (
    DELETE FROM processing_state ps USING picked WHERE ps.id = picked.id RETURNING ps.*
), st_in AS (
    INSERT INTO processing_state_archive SELECT * FROM st RETURNING stage, status, reason
), counted AS (
    INSERT INTO archive_bucket_counts (stage, bucket, n)
    SELECT stage, {STAGE_BUCKET_SQL}, count(*) FROM st_in GROUP BY 1, 2
    ON CONFLICT (stage, bucket) DO UPDATE SET n = archive_bucket_counts.n + EXCLUDED.n
    RETURNING 1
)
SELECT (SELECT count(*) FROM st_in) AS rows, (SELECT count(*) FROM att_in) AS attempts,
       (SELECT count(*) FROM counted) AS groups
""")


def move_runs(conn: Connection, cutoff: datetime, limit: int) -> tuple[int, int]:
    """Move up to ``limit`` finished runs older than ``cutoff`` and their members; returns (runs, members)."""
    row = conn.execute(MOVE_RUNS_SQL, {"cutoff": cutoff, "n": limit}).one()
    return int(row.runs), int(row.members)


def move_attempts(conn: Connection, cutoff: datetime, limit: int) -> int:
    """Move up to ``limit`` attempt entries finished before ``cutoff``; returns how many moved."""
    return int(conn.execute(MOVE_ATTEMPTS_SQL, {"cutoff": cutoff, "n": limit}).scalar_one())


def move_audit(conn: Connection, cutoff: datetime, limit: int) -> int:
    """Move up to ``limit`` audit entries written before ``cutoff``; returns how many moved."""
    return int(conn.execute(MOVE_AUDIT_SQL, {"cutoff": cutoff, "n": limit}).scalar_one())


def move_tombstoned(conn: Connection, cutoff: datetime, limit: int) -> tuple[int, int]:
    """Move the state rows (and attempts) of up to ``limit`` objects tombstoned before ``cutoff`` that owe no
    work; returns (rows, attempts)."""
    row = conn.execute(MOVE_TOMBSTONED_SQL, {"cutoff": cutoff, "n": limit}).one()
    return int(row.rows), int(row.attempts)


# -- name: restore_rows --
# Archived state rows back to processing_state (same id, same public work_item_id), their buckets taken off the
# archived counts, their attempts back to the history.
RESTORE_SQL = f"""
WITH st AS (
    DELETE FROM processing_state_archive a WHERE {{where}} RETURNING a.*
), back AS (
    INSERT INTO processing_state ({{columns}}) SELECT {{columns}} FROM st RETURNING id
), uncounted AS (
    UPDATE archive_bucket_counts c SET n = c.n - g.n
    FROM (SELECT stage, {STAGE_BUCKET_SQL} AS bucket, count(*) AS n FROM st GROUP BY 1, 2) g
    WHERE c.stage = g.stage AND c.bucket = g.bucket RETURNING 1
), att AS (
    DELETE FROM work_item_attempt_archive w USING st WHERE w.processing_state_id = st.id RETURNING w.*
), att_back AS (
    INSERT INTO work_item_attempt SELECT * FROM att RETURNING 1
)
SELECT (SELECT count(*) FROM back) AS rows, (SELECT count(*) FROM att_back) AS attempts,
       (SELECT count(*) FROM uncounted) AS groups
"""
_RESTORE_WHERE = {
    "item": "a.source_object_id = (SELECT source_object_id FROM processing_state_archive WHERE work_item_id = :wid)",
    "objects": "a.source_object_id = ANY(CAST(:ids AS bigint[]))",
}


@functools.cache
def _restore_sql(which: str) -> TextClause:
    """RESTORE_SQL for ``which`` of :data:`_RESTORE_WHERE`, with processing_state's stored columns. The ORM models
    load here, on the first restore, not at import (``ki status`` imports this module and never restores)."""
    from ki.store.models import ProcessingState

    columns = ", ".join(c.name for c in ProcessingState.__table__.columns if c.computed is None)
    return text(RESTORE_SQL.format(where=_RESTORE_WHERE[which], columns=columns))


def restore_work_item(conn: Connection, work_item_id: uuid.UUID) -> int:
    """Restore the archived object of work item ``work_item_id`` — all its state rows, so its stages stay whole —
    with their attempts; returns the rows restored (0: the item is not archived)."""
    return int(conn.execute(_restore_sql("item"), {"wid": work_item_id}).one().rows)


def restore_objects(conn: Connection, source_object_ids: list[int]) -> int:
    """Restore the archived state rows of these objects (a tombstoned file listed again); returns rows restored."""
    if not source_object_ids:
        return 0
    return int(conn.execute(_restore_sql("objects"), {"ids": sorted(set(source_object_ids))}).one().rows)


ARCHIVED_COUNTS_SQL = text("SELECT stage, bucket, n FROM archive_bucket_counts WHERE n <> 0")


def archived_bucket_counts(conn: Connection) -> list[tuple[str, str, int]]:
    """``(stage, bucket, n)`` of the archived state rows (counted as they moved; a few rows at most)."""
    return [(r.stage, r.bucket, int(r.n)) for r in conn.execute(ARCHIVED_COUNTS_SQL)]


def start_log(conn: Connection, older_than_days: int, trigger: str) -> int:
    """Open an ``archive_log`` row for a pass; returns its id."""
    return int(conn.execute(text("INSERT INTO archive_log (older_than_days, trigger) VALUES (:d, :t) RETURNING id"),
                            {"d": older_than_days, "t": trigger}).scalar_one())


def finish_log(conn: Connection, log_id: int, moved: dict[str, int]) -> None:
    """Close the pass's ``archive_log`` row with what it moved."""
    conn.execute(text("UPDATE archive_log SET finished_at = now(), moved = CAST(:m AS jsonb) WHERE id = :id"),
                 {"m": json.dumps(moved), "id": log_id})


def last_finished_pass(conn: Connection) -> datetime | None:
    """When the last archival pass finished (None: never)."""
    return conn.execute(text("SELECT max(finished_at) FROM archive_log")).scalar()
