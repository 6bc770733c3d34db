"""Source rows as the operator manages them: listing with their counts, finding, overlap, removal.

``ki source list|remove|rescan``. The per-source counts read
``processing_state`` (quarantined rows) and ``pipeline_runs`` (the last run's outcome), which is why
this lives in ``ki/store/``. A removed source keeps its rows (history) with ``source.removed_at`` set
and every document tombstoned; registering its folder again clears ``removed_at``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.engine import Connection


@dataclass(frozen=True)
class SourceRow:
    """One source with what ``ki source list`` shows.

    Attributes:
        id / kind / root: the source.
        files: live top-level files (embedded documents not counted).
        documents: live objects, embedded ones included.
        quarantined: live objects with a quarantined stage.
        missing: live files absent from the last scan(s), awaiting deletion confirmation.
        last_scan_at: when it was last scanned (None: never).
        last_run_id / last_run_status / last_run_finished_at: its newest insertion run (None: none yet).
        removed_at: set when ``ki source remove`` removed it.
    """

    id: int
    kind: str
    root: str
    files: int
    documents: int
    quarantined: int
    missing: int
    last_scan_at: datetime | None
    last_run_id: int | None
    last_run_status: str | None
    last_run_finished_at: datetime | None
    removed_at: datetime | None


_SOURCES_SQL = """
SELECT s.id, s.kind, s.root, s.last_scan_at, s.removed_at,
       (SELECT count(*) FROM source_object so
         WHERE so.source_id = s.id AND so.deleted_at IS NULL AND so.parent_id IS NULL) AS files,
       (SELECT count(*) FROM source_object so WHERE so.source_id = s.id AND so.deleted_at IS NULL) AS documents,
       (SELECT count(*) FROM source_object so
         WHERE so.source_id = s.id AND so.deleted_at IS NULL AND so.parent_id IS NULL AND so.missing_scans > 0)
         AS missing,
       (SELECT count(DISTINCT ps.source_object_id) FROM processing_state ps
          JOIN source_object so ON so.id = ps.source_object_id
         WHERE so.source_id = s.id AND so.deleted_at IS NULL AND ps.status = 'quarantined') AS quarantined,
       r.id AS last_run_id, r.status AS last_run_status, r.finished_at AS last_run_finished_at
FROM source s
LEFT JOIN LATERAL (SELECT id, status, finished_at FROM pipeline_runs pr
                   WHERE pr.source_id = s.id ORDER BY pr.id DESC LIMIT 1) r ON true
WHERE (:removed OR s.removed_at IS NULL) {where}
ORDER BY s.id
"""


def _rows(conn: Connection, where: str = "", params: dict | None = None, *, removed: bool = True) -> list[SourceRow]:
    result = conn.execute(text(_SOURCES_SQL.format(where=where)), {"removed": removed, **(params or {})})
    return [SourceRow(id=r.id, kind=r.kind, root=r.root, files=r.files, documents=r.documents,
                      quarantined=r.quarantined, missing=r.missing, last_scan_at=r.last_scan_at,
                      last_run_id=r.last_run_id, last_run_status=r.last_run_status,
                      last_run_finished_at=r.last_run_finished_at, removed_at=r.removed_at)
            for r in result]


def list_sources(conn: Connection, *, include_removed: bool = False) -> list[SourceRow]:
    """Every source (removed ones only with ``include_removed``), by id."""
    return _rows(conn, removed=include_removed)


def source_by_id(conn: Connection, source_id: int) -> SourceRow | None:
    """The source with this id (removed or not), or None."""
    found = _rows(conn, "AND s.id = :id", {"id": source_id})
    return found[0] if found else None


def source_by_root(conn: Connection, kind: str, root: str) -> SourceRow | None:
    """The source of ``kind`` registered for exactly ``root`` (removed or not), or None."""
    found = _rows(conn, "AND s.kind = :kind AND s.root = :root", {"kind": kind, "root": root})
    return found[0] if found else None


def overlapping_sources(conn: Connection, kind: str, root: str) -> list[SourceRow]:
    """Live sources of ``kind`` whose root contains ``root`` or lies inside it (not ``root`` itself).

    ``root`` is an absolute path without a trailing slash; containment is by path components
    (``/a/b`` contains ``/a/b/c``, not ``/a/bc``)."""
    return _rows(conn, "AND s.kind = :kind AND s.root <> :root AND (starts_with(:root, s.root || '/') "
                       "OR starts_with(s.root, :root || '/') OR s.root = '/' OR :root = '/')",
                 {"kind": kind, "root": root.rstrip("/") or "/"}, removed=False)


def live_top_objects(conn: Connection, source_id: int) -> list[int]:
    """Ids of the source's live top-level objects (files)."""
    return [r.id for r in conn.execute(
        text("SELECT id FROM source_object WHERE source_id = :sid AND parent_id IS NULL AND deleted_at IS NULL "
             "ORDER BY id"), {"sid": source_id})]


def mark_removed(conn: Connection, source_id: int) -> None:
    """Set ``removed_at`` (the caller tombstones the documents in the same transaction)."""
    conn.execute(text("UPDATE source SET removed_at = now() WHERE id = :id"), {"id": source_id})


def restore_source(conn: Connection, source_id: int) -> bool:
    """Clear ``removed_at`` (the folder was registered again). Returns True when it was removed."""
    return conn.execute(text("UPDATE source SET removed_at = NULL WHERE id = :id AND removed_at IS NOT NULL"),
                        {"id": source_id}).rowcount > 0


# Live files of a source absent from the last scan(s), by how many scans in a row missed them.
MISSING_STREAKS_SQL = text("""
SELECT missing_scans AS streak, count(*) AS n FROM source_object
WHERE source_id = :sid AND parent_id IS NULL AND deleted_at IS NULL AND missing_scans > 0
GROUP BY missing_scans ORDER BY missing_scans DESC
""")


def missing_streaks(conn: Connection, source_id: int) -> dict[int, int]:
    """``{scans missed in a row: live files}`` of a source: the files awaiting deletion confirmation
    (DESIGN.md "Deletion confirmations"; a file is tombstoned when its streak reaches
    ``pipeline.deletion_confirmations``). Highest streak first; empty when nothing is missing."""
    return {int(r.streak): int(r.n) for r in conn.execute(MISSING_STREAKS_SQL, {"sid": source_id})}


def object_sources(conn: Connection, object_ids: list[int]) -> dict[int, int]:
    """Source object id → its source's id, for the ids that exist."""
    if not object_ids:
        return {}
    rows = conn.execute(text("SELECT id, source_id FROM source_object WHERE id = ANY(CAST(:ids AS bigint[]))"),
                        {"ids": sorted(set(object_ids))}).fetchall()
    return {int(r.id): int(r.source_id) for r in rows}


def source_configs(conn: Connection, source_ids: list[int]) -> dict[int, dict]:
    """Source id → its ``config`` (grants, permission model)."""
    rows = conn.execute(text("SELECT id, config FROM source WHERE id = ANY(CAST(:ids AS bigint[]))"),
                        {"ids": sorted(set(source_ids))}).fetchall()
    return {int(r.id): dict(r.config or {}) for r in rows}


def set_source_config_key(conn: Connection, source_id: int, key: str, value: object) -> None:
    """Set one key of a source's ``config`` (e.g. ``permissions``)."""
    conn.execute(text("UPDATE source SET config = coalesce(config, '{}'::jsonb) || "
                      "jsonb_build_object(CAST(:k AS text), CAST(:v AS jsonb)) WHERE id = :id"),
                 {"k": key, "v": json.dumps(value), "id": source_id})


def open_documents(conn: Connection, source_id: int) -> tuple[int, int]:
    """(indexed live documents of ``source_id`` every principal may see — ``*`` allowed, not denied —,
    indexed live documents), from the permission projection their chunks carry."""
    row = conn.execute(text("""
        SELECT count(DISTINCT c.source_object_id) FILTER (WHERE '*' = ANY(c.allowed_principals)
                                                          AND NOT '*' = ANY(c.denied_principals)) AS open,
               count(DISTINCT c.source_object_id) AS indexed
        FROM chunk c JOIN source_object so ON so.id = c.source_object_id
        WHERE so.source_id = :sid AND so.deleted_at IS NULL"""), {"sid": source_id}).one()
    return int(row.open), int(row.indexed)


def project_of_source(conn: Connection, source_id: int) -> int:
    """The project a source belongs to (its ``project_id``; raises NoResultFound for an unknown source)."""
    return int(conn.execute(text("SELECT project_id FROM source WHERE id = :s"), {"s": source_id}).scalar_one())
