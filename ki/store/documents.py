"""Document and DocumentVersion rows: the per-document relate lock, attach, fold, order, and the version pointers.

Spec: insertion-pipeline.md "Relate" (Document and DocumentVersion rows, supersedes edges, redline_against
pointers; "an entity abandoned by a duplicate/new-version decision is folded into its survivor rather than left
behind as an empty document"). The version rules (keys, labels, which version is final) are
:mod:`ki.domain.relate.documents`'; these are its statements. Every function takes a connection inside the
materialization's transaction; none commits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.engine import Connection

from ki.store.locks import lock_key


def try_lock_document(conn: Connection, document_id: int) -> bool:
    """Try the document's transaction-level relate lock (``relate-document``) without waiting; True when taken
    (held until the caller commits), False when another transaction holds it."""
    return bool(conn.execute(text("SELECT pg_try_advisory_xact_lock(:k)"),
                             {"k": lock_key("relate-document", str(document_id))}).scalar_one())


def documents_of(conn: Connection, oids: set[int]) -> dict[int, int]:
    """object id → document id, for the objects that have a version row."""
    if not oids:
        return {}
    rows = conn.execute(text("SELECT source_object_id, document_id FROM document_version "
                             "WHERE source_object_id = ANY(:o)"), {"o": sorted(oids)})
    return {r.source_object_id: r.document_id for r in rows}


def object_with_body(conn: Connection, oid: int) -> Row | None:
    """``id``, ``external_id``, ``mtime_ns``, ``content_hash``, ``parent_id`` of the object and ``body``, its
    ``structured_json`` artifact (None when not converted); None for an unknown object."""
    return conn.execute(text("""SELECT so.id, so.external_id, so.mtime_ns, so.content_hash, so.parent_id, a.body
                               FROM source_object so LEFT JOIN artifact a
                               ON a.content_hash = so.content_hash AND a.kind = 'structured_json'
                               WHERE so.id = :o"""), {"o": oid}).first()


def create_document(conn: Connection, *, matter_id: int | None, title: str | None) -> int:
    """A new, empty document; returns its id."""
    return int(conn.execute(text("INSERT INTO document (matter_id, title) VALUES (:m, :t) RETURNING id"),
                            {"m": matter_id, "t": title}).scalar_one())


def upsert_version(conn: Connection, *, oid: int, document_id: int, content_hash: str | None,
                   facts: dict[str, Any], duplicate_of: int | None = None, redline_against: int | None = None,
                   provenance: dict[str, Any] | None = None, keep_links: bool = False) -> None:
    """Write the object's version row (``facts``: ``version_key``, ``version_label``, ``rendition``). ``keep_links``
    keeps an existing row's duplicate/redline pointers and provenance (used when a row is created on behalf of
    another file's decision)."""
    conn.execute(text(f"""
        INSERT INTO document_version (document_id, source_object_id, content_hash, version_key, version_label,
                                      rendition, duplicate_of, redline_against, provenance)
        VALUES (:d, :o, :h, :k, :l, :r, :dup, :red, CAST(:p AS jsonb))
        ON CONFLICT (source_object_id) DO UPDATE
        SET document_id = EXCLUDED.document_id, content_hash = EXCLUDED.content_hash,
            version_key = EXCLUDED.version_key, version_label = EXCLUDED.version_label,
            rendition = EXCLUDED.rendition,
            {"" if keep_links else "duplicate_of = EXCLUDED.duplicate_of, redline_against = EXCLUDED.redline_against,"}
            provenance = CASE WHEN :keep THEN document_version.provenance ELSE EXCLUDED.provenance END,
            updated_at = now()"""),
        {"d": document_id, "o": oid, "h": content_hash, "k": facts["version_key"], "l": facts["version_label"],
         "r": facts["rendition"], "dup": duplicate_of, "red": redline_against, "keep": keep_links,
         "p": json.dumps(provenance or {}, default=str)})


def fold(conn: Connection, abandoned: int, survivor: int) -> None:
    """Move every version of ``abandoned`` into ``survivor`` and delete the empty document."""
    if abandoned == survivor:
        return
    conn.execute(text("UPDATE document_version SET document_id = :s, updated_at = now() WHERE document_id = :a"),
                 {"s": survivor, "a": abandoned})
    conn.execute(text("DELETE FROM document WHERE id = :a"), {"a": abandoned})


def drop_if_empty(conn: Connection, document_id: int | None) -> None:
    """Delete a document that no version points to any more."""
    if document_id is not None:
        conn.execute(text("DELETE FROM document d WHERE d.id = :d AND NOT EXISTS "
                          "(SELECT 1 FROM document_version v WHERE v.document_id = d.id)"), {"d": document_id})


def version_rows(conn: Connection, document_id: int) -> Sequence[Row]:
    """``oid``, ``version_key``, ``version_label``, ``duplicate_of``, ``path``, ``title`` (its artifact's) and
    ``matter_id`` (its assignment's) of every version of the document."""
    return conn.execute(text("""SELECT v.source_object_id AS oid, v.version_key, v.version_label, v.duplicate_of,
                                       so.path, a.body->>'title' AS title, ma.matter_id
                                FROM document_version v JOIN source_object so ON so.id = v.source_object_id
                                LEFT JOIN artifact a ON a.content_hash = so.content_hash AND a.kind = 'structured_json'
                                LEFT JOIN matter_assignment ma ON ma.source_object_id = so.id
                                WHERE v.document_id = :d"""), {"d": document_id}).fetchall()


def set_version_order(conn: Connection, orders: Iterable[tuple[int, int | None, int | None, bool]]) -> None:
    """Write ``(object id, version_order, supersedes, is_final)`` on each version row, in one executemany."""
    updates = [{"o": o, "n": n, "s": s, "f": f} for o, n, s, f in orders]
    if updates:
        conn.execute(text("""UPDATE document_version SET version_order = :n, supersedes = :s, is_final = :f,
                             updated_at = now() WHERE source_object_id = :o"""), updates)


def set_document_head(conn: Connection, document_id: int, *, title: str | None, matter_id: int | None) -> None:
    """Set the document's title and matter where given and different (None keeps the recorded one)."""
    conn.execute(text("""UPDATE document SET title = coalesce(:t, title), matter_id = coalesce(:m, matter_id),
                         updated_at = now()
                         WHERE id = :d AND (title, matter_id) IS DISTINCT FROM (coalesce(:t, title),
                                                                               coalesce(:m, matter_id))"""),
                 {"t": title, "m": matter_id, "d": document_id})


def duplicate_root(conn: Connection, oid: int) -> int | None:
    """The object the version row of ``oid`` names as its original (None: none, or no version row)."""
    return conn.execute(text("SELECT duplicate_of FROM document_version WHERE source_object_id = :o"),
                        {"o": oid}).scalar()


def clear_duplicate_of(conn: Connection, oid: int, target: int) -> None:
    """Clear the duplicate pointer of ``oid``'s version row when it names ``target`` (a file that now declares
    itself a duplicate of ``oid``: the pointer may not run both ways)."""
    conn.execute(text("UPDATE document_version SET duplicate_of = NULL WHERE source_object_id = :t "
                      "AND duplicate_of = :o"), {"t": oid, "o": target})


def recorded_identity(conn: Connection, oid: int) -> str | None:
    """The identity (``new``, ``version``, ``duplicate``) the object's version row was written for, if any."""
    return conn.execute(text("SELECT provenance->>'identity' FROM document_version WHERE source_object_id = :o"),
                        {"o": oid}).scalar()


def other_versions(conn: Connection, document_id: int, oid: int) -> int:
    """How many version rows of the document belong to objects other than ``oid``."""
    return int(conn.execute(text("SELECT count(*) FROM document_version WHERE document_id = :d "
                                 "AND source_object_id <> :o"), {"d": document_id, "o": oid}).scalar_one())


def set_duplicate_of(conn: Connection, oid: int, original: int) -> None:
    """Point ``oid``'s version row at ``original`` as the file it duplicates."""
    conn.execute(text("UPDATE document_version SET duplicate_of = :t WHERE source_object_id = :o"),
                 {"t": original, "o": oid})


def set_redline_against(conn: Connection, oid: int, base: int) -> None:
    """Point ``oid``'s version row at ``base`` as the version its redline compares against."""
    conn.execute(text("UPDATE document_version SET redline_against = :t WHERE source_object_id = :o"),
                 {"t": base, "o": oid})
