"""Source objects: the ``blob`` row of an object's bytes and the hash its ``source_object`` row points at, its
path relative to its source root, and the files the model stages show beside it.

Spec: insertion-pipeline.md "Fetch" (a Blob row keyed by content hash; ``source_object.content_hash`` set),
"Parse (convert)" (an embedded object's bytes are stored when its container is converted), "Classify" and
"Relate" (what each is given: the container of an embedded file, identical files, named messages, attachments).
The bytes themselves are :class:`ki.store.blobs.BlobStore`'s; these statements only record them. Every function
takes a connection the caller owns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.engine import Connection

from ki.store.claims import OBJECT_COLUMNS

#: An object's path relative to its source root, in SQL over ``source_object so JOIN source s``.
REL_PATH = "substr(so.path, length(rtrim(s.root, '/')) + 2)"

RECORD_BLOB_SQL = text("INSERT INTO blob (content_hash, size) VALUES (:h, :s) ON CONFLICT (content_hash) DO NOTHING")
SET_CONTENT_SQL = text("UPDATE source_object SET content_hash = :h, size = :s, updated_at = now() WHERE id = :id")


def record_blob(conn: Connection, content_hash: str, size: int) -> None:
    """Record stored bytes (``content_hash``: SHA-256 hex, ``size``: bytes); a known hash is left as it is."""
    conn.execute(RECORD_BLOB_SQL, {"h": content_hash, "s": size})


def set_content(conn: Connection, source_object_id: int, content_hash: str, size: int) -> None:
    """Point the object at the bytes its fetch stored (``content_hash`` must be recorded: :func:`record_blob`)."""
    conn.execute(SET_CONTENT_SQL, {"h": content_hash, "s": size, "id": source_object_id})


def relative_path(conn: Connection, source_object_id: int) -> str:
    """The object's path relative to its source root (an embedded object: its container's path + `` » name``).

    Raises: NoResultFound for an unknown object.
    """
    return conn.execute(text(f"SELECT {REL_PATH} FROM source_object so JOIN source s ON s.id = so.source_id "
                             "WHERE so.id = :id"), {"id": source_object_id}).scalar_one()


def relative_paths(conn: Connection, source_object_ids: Sequence[int]) -> dict[int, str]:
    """``{object id: path relative to its source root}`` of the known ids among ``source_object_ids`` (an
    embedded object: its container's path + `` » name``; unknown ids are left out)."""
    if not source_object_ids:
        return {}
    rows = conn.execute(text(f"SELECT so.id, {REL_PATH} AS rel FROM source_object so JOIN source s "
                             "ON s.id = so.source_id WHERE so.id = ANY(:ids)"), {"ids": list(source_object_ids)})
    return {int(r.id): r.rel for r in rows}


def structured_body(conn: Connection, source_object_id: int) -> dict[str, Any] | None:
    """The ``structured_json`` artifact of the object's current content (None: not converted yet)."""
    row = conn.execute(text("""SELECT a.body FROM source_object so JOIN artifact a
                               ON a.content_hash = so.content_hash AND a.kind = 'structured_json'
                               WHERE so.id = :p"""), {"p": source_object_id}).first()
    return None if row is None else row.body


def identical_files(conn: Connection, source_object_id: int, content_hash: str | None,
                    source_id: int) -> Sequence[Row]:
    """``rel``, ``content_hash`` of the live objects of the same project with the same bytes (≤ 200, by id)."""
    return conn.execute(text(f"""
            SELECT {REL_PATH} AS rel, so.content_hash FROM source_object so JOIN source s ON s.id = so.source_id
            WHERE so.content_hash = :h AND so.id <> :o AND so.deleted_at IS NULL
              AND s.project_id = (SELECT project_id FROM source WHERE id = :s) ORDER BY so.id LIMIT 200"""),
            {"h": content_hash, "o": source_object_id, "s": source_id}).fetchall()


def messages_of_matter(conn: Connection, source_object_id: int, matter_id: int,
                       message_ids: list[str]) -> Sequence[Row]:
    """``rel``, ``content_hash`` of the other live messages of the matter whose Message-ID is one of
    ``message_ids`` (≤ 200, by id)."""
    return conn.execute(text(f"""
            SELECT {REL_PATH} AS rel, so.content_hash FROM matter_assignment ma
            JOIN source_object so ON so.id = ma.source_object_id JOIN source s ON s.id = so.source_id
            JOIN artifact a ON a.content_hash = so.content_hash AND a.kind = 'structured_json'
            WHERE ma.matter_id = :m AND so.id <> :o AND so.deleted_at IS NULL
              AND a.body->'mail'->>'message_id' = ANY(:ids) ORDER BY so.id LIMIT 200"""),
            {"o": source_object_id, "ids": message_ids, "m": matter_id}).fetchall()


def attachments_of(conn: Connection, source_object_id: int) -> Sequence[Row]:
    """``rel``, ``content_hash`` of the object's live embedded objects, in their order in the container."""
    return conn.execute(text(f"""
            SELECT {REL_PATH} AS rel, so.content_hash FROM source_object so JOIN source s ON s.id = so.source_id
            WHERE so.parent_id = :o AND so.deleted_at IS NULL ORDER BY so.embedded_index"""),
            {"o": source_object_id}).fetchall()


def object_row(conn: Connection, source_object_id: int) -> Row | None:
    """The object's :data:`ki.store.claims.OBJECT_COLUMNS` (what a stage is given), or None when it does not exist."""
    return conn.execute(text(f"SELECT {OBJECT_COLUMNS} FROM source_object so JOIN source s ON s.id = so.source_id "
                             "WHERE so.id = :id"), {"id": source_object_id}).first()


FOLDER_ENTRIES_SQL = text("""
SELECT so.id, so.external_id, so.size, m.reference
FROM source_object so
LEFT JOIN matter_assignment ma ON ma.source_object_id = so.id
LEFT JOIN matter m ON m.id = ma.matter_id
WHERE so.source_id = :s AND so.deleted_at IS NULL AND so.parent_id IS NULL
  AND (:prefix = '' OR starts_with(so.external_id, :prefix))
ORDER BY so.external_id
""")

OBJECT_TITLES_SQL = text("""
SELECT so.id, a.body->>'title' AS title
FROM source_object so JOIN artifact a ON a.content_hash = so.content_hash AND a.kind = 'structured_json'
WHERE so.id = ANY(:ids)
""")

CLASSIFIED_SQL = text(f"""
SELECT so.id, so.source_id, so.parent_id, {REL_PATH} AS rel, m.reference
FROM matter_assignment ma JOIN matter m ON m.id = ma.matter_id
JOIN source_object so ON so.id = ma.source_object_id AND so.deleted_at IS NULL
JOIN source s ON s.id = so.source_id
WHERE s.project_id = :p
ORDER BY so.id
""")


def folder_entries(conn: Connection, source_id: int, prefix: str) -> Sequence[Row]:
    """``id``, ``external_id``, ``size``, ``reference`` (its matter's, or None) of every live top-level file of
    the source whose path starts with ``prefix`` (``""``: all), by path."""
    return conn.execute(FOLDER_ENTRIES_SQL, {"s": source_id, "prefix": prefix}).fetchall()


def object_titles(conn: Connection, source_object_ids: list[int]) -> dict[int, str | None]:
    """object id → the title its conversion found (converted objects only)."""
    return {r.id: r.title for r in conn.execute(OBJECT_TITLES_SQL, {"ids": source_object_ids})}


def classified_objects(conn: Connection, project_id: int) -> Sequence[Row]:
    """``id``, ``source_id``, ``parent_id``, ``rel``, ``reference`` of every live classified object of the
    project, by id."""
    return conn.execute(CLASSIFIED_SQL, {"p": project_id}).fetchall()


def assigned_matter(conn: Connection, source_object_id: int) -> Row | None:
    """``id``, ``reference``, ``imported``, ``placeholder``, ``folder``, ``client_name`` of the matter Classify
    assigned the object to, or None."""
    return conn.execute(text("""
            SELECT m.id, m.reference, m.imported, m.placeholder, m.folder, m.client_name
            FROM matter_assignment ma JOIN matter m ON m.id = ma.matter_id WHERE ma.source_object_id = :so
        """), {"so": source_object_id}).first()
