"""An object and the objects embedded in it: a container's child rows, and the tombstone or rename of a tree.

Spec: insertion-pipeline.md "Parse (convert)" (each attachment or embedded document is a source object of its
own, in its container's source) and "Fetch" (a rename inside the root keeps the document; a tombstoned
container takes its embedded objects with it). The reconciliation rules are :mod:`ki.adapters.sources.children`'s.
Every function takes a connection the caller owns.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Row, text
from sqlalchemy.engine import Connection


def child_rows(conn: Connection, parent_id: int) -> Sequence[Row]:
    """``id``, ``external_id``, ``scanned_hash``, ``content_hash``, ``deleted_at`` of every child of the object
    (tombstoned ones included)."""
    return conn.execute(text("SELECT id, external_id, scanned_hash, content_hash, deleted_at FROM source_object "
                             "WHERE parent_id = :p"), {"p": parent_id}).fetchall()


def insert_child(conn: Connection, *, source_id: int, external_id: str, path: str, size: int,
                 scanned_hash: str | None, parent_id: int, embedded_index: int, mtime_ns: int | None) -> int | None:
    """Register an embedded object; its id, or None when the source already has that external id."""
    return conn.execute(
        text("""INSERT INTO source_object (source_id, external_id, path, size, scanned_hash, parent_id,
                                           embedded_index, mtime_ns)
                VALUES (:sid, :eid, :path, :size, :h, :p, :i, :mtime)
                ON CONFLICT (source_id, external_id) DO NOTHING RETURNING id"""),
        {"sid": source_id, "eid": external_id, "path": path, "size": size, "h": scanned_hash, "p": parent_id,
         "i": embedded_index, "mtime": mtime_ns},
    ).scalar()


def refresh_child(conn: Connection, source_object_id: int, *, scanned_hash: str | None, size: int) -> None:
    """A child whose bytes changed (or that came back): its new hash and size, live again."""
    conn.execute(text("UPDATE source_object SET scanned_hash = :h, size = :s, deleted_at = NULL, "
                      "updated_at = now() WHERE id = :id"), {"h": scanned_hash, "s": size, "id": source_object_id})


TOMBSTONE_TREE_SQL = text("""
WITH RECURSIVE tree(id) AS (
    SELECT CAST(:id AS bigint)
    UNION ALL
    SELECT so.id FROM source_object so JOIN tree t ON so.parent_id = t.id
)
UPDATE source_object SET deleted_at = now(), updated_at = now()
WHERE id IN (SELECT id FROM tree) AND deleted_at IS NULL
RETURNING id
""")


def tombstone_rows(conn: Connection, source_object_id: int) -> list[int]:
    """Tombstone an object and every object embedded in it (recursively); the ids tombstoned now."""
    return [r.id for r in conn.execute(TOMBSTONE_TREE_SQL, {"id": source_object_id})]


RENAME_TREE_SQL = text("""
WITH RECURSIVE tree(id) AS (
    SELECT CAST(:id AS bigint)
    UNION ALL
    SELECT so.id FROM source_object so JOIN tree t ON so.parent_id = t.id
), old AS (SELECT external_id AS eid, path FROM source_object WHERE id = :id)
UPDATE source_object so
SET external_id = :eid || substr(so.external_id, length(old.eid) + 1),
    path = :path || substr(so.path, length(old.path) + 1),
    external_id_raw = CASE WHEN so.id = :id THEN :raw ELSE so.external_id_raw END,
    size = CASE WHEN so.id = :id THEN :size ELSE so.size END,
    mtime_ns = CASE WHEN so.id = :id THEN :mtime ELSE so.mtime_ns END,
    missing_scans = 0, missing_since = NULL, updated_at = now()
FROM old
WHERE so.id IN (SELECT id FROM tree)
""")


def rename_tree(conn: Connection, source_object_id: int, external_id: str, raw: bytes | None, path: str, *,
                size: int, mtime_ns: int) -> None:
    """Move an object to a new external id / path (a rename inside its root), with its size and
    mtime as listed; every object embedded in it keeps its suffix under the new prefix."""
    conn.execute(RENAME_TREE_SQL, {"id": source_object_id, "eid": external_id, "raw": raw, "path": path,
                                   "size": size, "mtime": mtime_ns})
