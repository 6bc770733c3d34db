"""Reads of ``processing_state`` the console serves: the quarantine list, one object's rows, re-run counts.

Spec: insertion-pipeline.md "Processing states and console buckets", "What quarantine records"
(GET /api/quarantine returns path, stage, attempts and the error object), "What save re-runs and
what it does not" (the "Re-run all files" count covers the done, skipped and disabled buckets).
Every function runs one statement on a connection the caller owns.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.taxonomies import STAGE_BUCKET_SQL, WAITING_FOR_PREVIOUS_STAGE


@dataclass(frozen=True)
class QuarantineRow:
    """One quarantined row: the object, its path, the stage, attempts, the error object, when."""

    source_object_id: int
    path: str
    stage: str
    attempts: int
    error: dict[str, Any]
    updated_at: datetime


def _quarantine_filter(stage: str | None, reason: str | None, error_class: str | None) -> str:
    where = ["ps.status = 'quarantined'"]
    if stage:
        where.append("ps.stage = :stage")
    if reason:
        where.append("ps.reason = :reason")
    if error_class:
        where.append("ps.last_error->>'class' = :cls")
    return " AND ".join(where)


def quarantine_page(conn: Connection, *, stage: str | None = None, reason: str | None = None,
                    error_class: str | None = None, limit: int = 50, offset: int = 0,
                    with_traceback: bool = False) -> tuple[list[QuarantineRow], int]:
    """Quarantined rows, newest first, filtered and paged; returns (rows, total matching).

    The error object omits ``traceback`` unless ``with_traceback`` (the detail view shows it).
    """
    where = _quarantine_filter(stage, reason, error_class)
    params = {"stage": stage, "reason": reason, "cls": error_class, "limit": limit, "offset": offset}
    total = int(conn.execute(text(f"SELECT count(*) FROM processing_state ps WHERE {where}"), params).scalar_one())
    error = "ps.last_error" if with_traceback else "ps.last_error - 'traceback'"
    rows = conn.execute(text(f"""
        SELECT ps.source_object_id, so.path, ps.stage, ps.attempts, {error} AS error, ps.updated_at
        FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
        WHERE {where} ORDER BY ps.updated_at DESC, ps.id DESC LIMIT :limit OFFSET :offset"""), params).fetchall()
    return [QuarantineRow(int(r.source_object_id), r.path, r.stage, int(r.attempts), dict(r.error or {}),
                          r.updated_at) for r in rows], total


QUARANTINE_FACETS_SQL = text("""
SELECT stage, coalesce(reason, '') AS reason, coalesce(last_error->>'class', '') AS cls, count(*) AS n
FROM processing_state WHERE status = 'quarantined' GROUP BY 1, 2, 3
""")


def quarantine_facets(conn: Connection) -> dict[str, dict[str, int]]:
    """Counts of quarantined rows per ``stage``, per ``reason`` and per error ``class`` (filter menus)."""
    out: dict[str, dict[str, int]] = {"stage": {}, "reason": {}, "class": {}}
    for r in conn.execute(QUARANTINE_FACETS_SQL):
        for facet, value in (("stage", r.stage), ("reason", r.reason), ("class", r.cls)):
            if value:
                out[facet][value] = out[facet].get(value, 0) + int(r.n)
    return out


@dataclass(frozen=True)
class StageRow:
    """One stage row of an object, with its bucket and the whole error object (traceback included)."""

    stage: str
    status: str
    bucket: str
    attempts: int
    producer_version: str | None
    last_error: dict[str, Any] | None
    next_retry_at: datetime | None
    updated_at: datetime


def object_rows(conn: Connection, source_object_id: int) -> tuple[str | None, list[StageRow]]:
    """An object's path (None when it does not exist) and its stage rows in no particular order."""
    path = conn.execute(text("SELECT path FROM source_object WHERE id = :id"), {"id": source_object_id}).scalar()
    rows = conn.execute(text(f"""
        SELECT stage, status, {STAGE_BUCKET_SQL} AS bucket, attempts, producer_version, last_error,
               next_retry_at, updated_at
        FROM processing_state WHERE source_object_id = :id"""), {"id": source_object_id}).fetchall()
    return path, [StageRow(r.stage, r.status, r.bucket, int(r.attempts), r.producer_version, r.last_error,
                           r.next_retry_at, r.updated_at) for r in rows]


RERUN_COUNTS_SQL = text(f"""
SELECT count(*) AS files, count(DISTINCT so.content_hash) AS contents
FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
WHERE ps.stage = :stage
  AND (ps.status = 'done' OR (ps.status = 'skipped' AND ps.reason IS DISTINCT FROM '{WAITING_FOR_PREVIOUS_STAGE}'))
""")


def rerun_counts(conn: Connection, stage: str) -> tuple[int, int]:
    """(files, distinct contents) a "Re-run all files" of ``stage`` covers: rows in the done, skipped
    and disabled buckets (the rows that recorded a version; waiting rows are not part of a re-run)."""
    row = conn.execute(RERUN_COUNTS_SQL, {"stage": stage}).one()
    return int(row.files), int(row.contents)
