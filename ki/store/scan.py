"""What a scan of a local source writes: the source row, the known top-level objects, new objects, and the
per-file size, time and missing-streak bookkeeping.

Spec: insertion-pipeline.md "Processing states" (a scan seeds one row per stage) and
``pipeline.deletion_confirmations``; DESIGN.md "Deletion confirmations" (counted per file). What counts as new,
changed, renamed or missing is :mod:`ki.adapters.sources.scan`'s rule; these are its statements. Every function
takes a connection the caller owns; none commits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.engine import Connection


def register_local(conn: Connection, root: str, config: dict[str, Any] | None) -> int:
    """Get or create the default project's ``local`` source at ``root`` (an absolute path; ``config`` stored as
    JSON on creation); returns its id."""
    row = conn.execute(
        text("""
        INSERT INTO source (project_id, kind, root, config)
        VALUES ((SELECT id FROM project WHERE name = 'default'), 'local', :root, CAST(:cfg AS jsonb))
        ON CONFLICT (kind, root) DO UPDATE SET root = EXCLUDED.root
        RETURNING id
        """),
        {"root": root, "cfg": json.dumps(config or {})},
    ).one()
    return int(row.id)


def source_row(conn: Connection, source_id: int) -> Row:
    """``id``, ``kind``, ``root``, ``config``, ``last_scan_count``, ``last_scan_at`` of the source.

    Raises: NoResultFound for an unknown source.
    """
    return conn.execute(text("SELECT id, kind, root, config, last_scan_count, last_scan_at FROM source "
                             "WHERE id = :id"), {"id": source_id}).one()


def top_level_objects(conn: Connection, source_id: int) -> Sequence[Row]:
    """``id``, ``external_id``, ``external_id_raw``, ``size``, ``mtime_ns``, ``content_hash``, ``deleted_at``,
    ``missing_scans`` of every top-level object of the source (tombstoned ones included)."""
    return conn.execute(
        text("SELECT id, external_id, external_id_raw, size, mtime_ns, content_hash, deleted_at, "
             "missing_scans FROM source_object WHERE source_id = :sid AND parent_id IS NULL"),
        {"sid": source_id},
    ).fetchall()


_INSERT_OBJECTS_SQL = text("""
INSERT INTO source_object (source_id, external_id, external_id_raw, path, size, mtime_ns)
SELECT :sid, t.eid, t.raw, :root || '/' || t.eid, t.size, t.mtime
FROM unnest(CAST(:eids AS text[]), CAST(:raws AS bytea[]), CAST(:sizes AS bigint[]), CAST(:mtimes AS bigint[]))
     AS t(eid, raw, size, mtime)
ON CONFLICT (source_id, external_id) DO NOTHING
RETURNING id
""")


def insert_objects(conn: Connection, source_id: int, root: str,
                   files: Sequence[tuple[str, bytes | None, int, int]]) -> list[int]:
    """Insert top-level objects ``(external_id, external_id_raw, size, mtime_ns)`` under ``root`` (no trailing
    slash) in one statement; returns the ids of those inserted (an external id the source has is skipped)."""
    rows = conn.execute(_INSERT_OBJECTS_SQL, {
        "sid": source_id, "root": root, "eids": [f[0] for f in files], "raws": [f[1] for f in files],
        "sizes": [f[2] for f in files], "mtimes": [f[3] for f in files]}).fetchall()
    return [r.id for r in rows]


def mark_seen(conn: Connection, oid: int, *, size: int, mtime_ns: int, scanned_hash: str | None) -> None:
    """Record a listed object's size, time and (when read) the hash of its bytes; it is live and not missing."""
    conn.execute(
        text("UPDATE source_object SET size = :s, mtime_ns = :m, scanned_hash = coalesce(:h, scanned_hash), "
             "deleted_at = NULL, missing_scans = 0, missing_since = NULL, updated_at = now() WHERE id = :id"),
        {"s": size, "m": mtime_ns, "h": scanned_hash, "id": oid},
    )


def reset_missing(conn: Connection, oids: Sequence[int]) -> None:
    """Clear the missing streak of the listed objects that had one."""
    conn.execute(
        text("UPDATE source_object SET missing_scans = 0, missing_since = NULL "
             "WHERE id = ANY(CAST(:ids AS bigint[])) AND (missing_scans <> 0 OR missing_since IS NOT NULL)"),
        {"ids": list(oids)},
    )


def set_missing(conn: Connection, oid: int, streak: int) -> None:
    """Record how many scans in a row missed the object (``missing_since`` set on the first)."""
    conn.execute(text("UPDATE source_object SET missing_scans = :n, missing_since = coalesce(missing_since, "
                      "now()) WHERE id = :id"), {"n": streak, "id": oid})


def record_full_scan(conn: Connection, source_id: int, listed: int) -> None:
    """Record a whole-source scan: its time and how many files it listed."""
    conn.execute(text("UPDATE source SET last_scan_at = now(), last_scan_count = :n WHERE id = :id"),
                 {"n": listed, "id": source_id})
