"""Files the share will not let ki read: parked waiting with reason ``source_unreadable``.

Spec insertion-pipeline.md "Retry policy and quarantine" (a source fault is never the file's) and
DESIGN.md "Outages are not the file's fault"; the decision is in docs/design-decisions.md ("A file ki
may not read waits for its permissions to change"). A fetch that meets a permission fault
(:class:`ki.core.errors.SourceReadDenied`) parks its row — ``skipped`` with reason ``source_unreadable``, the
console bucket ``waiting`` — with the file's mode, owner and inode change time (``details``); it is not
retried by every run. A scan that sees that file's mode, owner or ACL change (its ``st_ctime_ns``
moves with each of them), or finds it readable, releases it: pending, a fresh attempt budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.core.taxonomies import PIPELINE_STAGE_ORDER, SOURCE_UNREADABLE

# -- name: parked_unreadable --
# The fetch rows of a source (or every source) parked as unreadable, with their file and evidence.
PARKED_SQL = text(f"""
SELECT ps.id, so.id AS source_object_id, so.source_id, so.external_id, so.external_id_raw, so.path,
       ps.last_error->'details' AS details, ps.updated_at
FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
WHERE ps.stage = '{PIPELINE_STAGE_ORDER[0]}' AND ps.status = 'skipped' AND ps.reason = '{SOURCE_UNREADABLE}'
  AND so.deleted_at IS NULL AND (CAST(:sid AS bigint) IS NULL OR so.source_id = :sid)
ORDER BY so.source_id, so.path
LIMIT :limit
""")

# -- name: release_unreadable --
# Release parked rows: pending again with a fresh budget (their permissions changed).
RELEASE_SQL = text(f"""
UPDATE processing_state SET status = 'pending', attempts = 0, last_error = NULL, next_retry_at = NULL,
    updated_at = now()
WHERE id = ANY(CAST(:ids AS bigint[])) AND status = 'skipped' AND reason = '{SOURCE_UNREADABLE}'
""")

# -- name: count_unreadable --
# Parked unreadable files per source.
COUNT_SQL = text(f"""
SELECT so.source_id, count(*) AS n
FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
WHERE ps.stage = '{PIPELINE_STAGE_ORDER[0]}' AND ps.status = 'skipped' AND ps.reason = '{SOURCE_UNREADABLE}'
  AND so.deleted_at IS NULL
GROUP BY so.source_id
""")


@dataclass(frozen=True)
class ParkedFile:
    """A file parked as unreadable: its fetch row, object, source, names, path and the evidence recorded
    when it was parked (``details``: ``mode`` (octal text), ``uid``, ``gid``, ``ctime_ns``)."""

    row_id: int
    source_object_id: int
    source_id: int
    external_id: str
    external_id_raw: bytes | None
    path: str
    details: dict[str, Any]


def parked_unreadable(conn: Connection, source_id: int | None = None, *, limit: int = 10_000) -> list[ParkedFile]:
    """The files parked as unreadable (of ``source_id``, or of every source), by source and path."""
    return [ParkedFile(int(r.id), int(r.source_object_id), int(r.source_id), r.external_id,
                       bytes(r.external_id_raw) if r.external_id_raw is not None else None, r.path,
                       dict(r.details or {}))
            for r in conn.execute(PARKED_SQL, {"sid": source_id, "limit": limit})]


def release_unreadable(conn: Connection, row_ids: list[int]) -> int:
    """Release the parked rows among ``row_ids`` (pending, fresh budget); returns how many."""
    if not row_ids:
        return 0
    return conn.execute(RELEASE_SQL, {"ids": row_ids}).rowcount


def unreadable_counts(conn: Connection) -> dict[int, int]:
    """source id → files of it parked as unreadable."""
    return {int(r.source_id): int(r.n) for r in conn.execute(COUNT_SQL)}
