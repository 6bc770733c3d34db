"""What relate's tools read: one file with its converted text, found by path or id, and the project's documents
to rank for a search.

Spec: insertion-pipeline.md "Relate: what the model is given" (``list_folder``, ``search_documents``,
``open_file``). The ranking and the paging are :mod:`ki.domain.relate.tools`'; each function runs on a short
connection the caller opens (a relate call must not hold a transaction across model I/O).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Row, text
from sqlalchemy.engine import Connection

from ki.store.objects import REL_PATH

#: The columns of one file as ``open_file`` shows it: ``id``, ``rel``, ``content_hash``, ``mtime_ns``,
#: ``parent_id``, ``size``, ``reference`` (its matter's), ``converted``, ``text``, ``title``, ``format``, ``mail``,
#: ``revisions``.
_SELECT = f"""
        SELECT so.id, {REL_PATH} AS rel, so.content_hash, so.mtime_ns, so.parent_id, so.size, m.reference,
               a.id IS NOT NULL AS converted, a.body->>'text' AS text, a.body->>'title' AS title,
               a.body->>'format' AS format, a.body->'mail' AS mail, a.body->'revisions' AS revisions
        FROM source_object so JOIN source s ON s.id = so.source_id
        LEFT JOIN artifact a ON a.content_hash = so.content_hash AND a.kind = 'structured_json'
        LEFT JOIN matter_assignment ma ON ma.source_object_id = so.id LEFT JOIN matter m ON m.id = ma.matter_id
    """


def file_at(conn: Connection, source_id: int, external_id: str) -> Row | None:
    """The live top-level file of the source at ``external_id`` (the columns of :data:`_SELECT`), or None."""
    return conn.execute(text(_SELECT + """
                    WHERE so.source_id = :s AND so.external_id = :e AND so.parent_id IS NULL
                      AND so.deleted_at IS NULL"""), {"s": source_id, "e": external_id}).first()


def embedded_file_at(conn: Connection, source_id: int, container: str, rel: str) -> Row | None:
    """The live object embedded in the source's top-level file ``container`` whose relative path is ``rel``
    (``container » name``), or None."""
    return conn.execute(text(_SELECT + f"""
                WHERE so.parent_id = (SELECT id FROM source_object WHERE source_id = :s AND external_id = :e
                                      AND parent_id IS NULL)
                  AND {REL_PATH} = :rel AND so.deleted_at IS NULL"""),
                {"s": source_id, "e": container, "rel": rel}).first()


def file_row(conn: Connection, oid: int) -> Row | None:
    """The object (the columns of :data:`_SELECT`, tombstoned or not), or None when unknown."""
    return conn.execute(text(_SELECT + " WHERE so.id = :o"), {"o": oid}).first()


def searchable_documents(conn: Connection, project_id: int, query: str, matter: str | None) -> Sequence[Row]:
    """``id``, ``rel``, ``title``, ``fmt``, ``content_hash``, ``reference`` and ``phrase`` (the text holds
    ``query``, case aside; false for an empty query) of every live converted object of the project, or of the
    matter with reference ``matter`` when given."""
    if matter is not None:  # start from the matter's assignments (indexed), not the whole project
        scope = """FROM matter m JOIN matter_assignment ma ON ma.matter_id = m.id
                   JOIN source_object so ON so.id = ma.source_object_id JOIN source s ON s.id = so.source_id
                   JOIN artifact a ON a.content_hash = so.content_hash AND a.kind = 'structured_json'
                   WHERE m.project_id = :p AND m.reference = :matter AND so.deleted_at IS NULL"""
    else:
        scope = """FROM source_object so JOIN source s ON s.id = so.source_id
                   JOIN artifact a ON a.content_hash = so.content_hash AND a.kind = 'structured_json'
                   LEFT JOIN matter_assignment ma ON ma.source_object_id = so.id
                   LEFT JOIN matter m ON m.id = ma.matter_id
                   WHERE s.project_id = :p AND so.deleted_at IS NULL"""
    return conn.execute(text(f"""
            SELECT so.id, {REL_PATH} AS rel, a.body->>'title' AS title, a.body->>'format' AS fmt, so.content_hash,
                   m.reference,
                   CASE WHEN :q = '' THEN false ELSE strpos(lower(a.body->>'text'), lower(:q)) > 0 END AS phrase
            {scope}"""), {"q": query, "p": project_id, "matter": matter}).fetchall()
