"""The classify basis and epoch of a project (``classify_basis``, ``classify_epoch``): what each classification
read, so a later file that answers one of its queries unseen can take it again.

Spec: insertion-pipeline.md "Classify" (results do not depend on processing order); the protocol is
:mod:`ki.domain.matters.basis`'s. Every function runs on the caller's connection and transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.store.corpus import CONTAINING_CHARS, EVIDENCE_HEAD, HEAD_CHARS, REL_PATH
from ki.store.locks import xact_lock

#: The basis reads this much of each file's text (:data:`ki.store.corpus.HEAD_CHARS` for its files; the
#: case-number and name queries search as much as this).
TEXT_CHARS = CONTAINING_CHARS

_FILES_SQL = f"""
SELECT so.id, so.source_id, {REL_PATH} AS rel, so.external_id, left(a.body->>'text', :head) AS text,
       left({EVIDENCE_HEAD}, {HEAD_CHARS}) AS head, a.body->'mail' AS mail, b.has_reference
FROM source_object so JOIN source s ON s.id = so.source_id
JOIN artifact a ON a.content_hash = so.content_hash AND a.kind = 'structured_json'
LEFT JOIN classify_basis b ON b.source_object_id = so.id
WHERE so.deleted_at IS NULL
"""


def lock_project(conn: Connection, project_id: int, *, shared: bool) -> None:
    """The project's ``classify-project`` advisory lock for this transaction, shared or exclusive."""
    xact_lock(conn, "classify-project", str(project_id), shared=shared)


def read_epoch(conn: Connection, project_id: int) -> int:
    """The project's classification epoch (0 before the first commit)."""
    return int(conn.execute(text("SELECT epoch FROM classify_epoch WHERE project_id = :p"),
                            {"p": project_id}).scalar() or 0)


def next_epoch(conn: Connection, project_id: int) -> int:
    """Bump the project's epoch and return the new one."""
    return int(conn.execute(text("""
        INSERT INTO classify_epoch (project_id, epoch) VALUES (:p, 1)
        ON CONFLICT (project_id) DO UPDATE SET epoch = classify_epoch.epoch + 1 RETURNING epoch"""),
        {"p": project_id}).scalar_one())


def basis_file(conn: Connection, source_object_id: int) -> Any | None:
    """One converted file as the basis reads it (id, source_id, rel, external_id, text, head, mail,
    has_reference), None when it is gone or not converted."""
    return conn.execute(text(_FILES_SQL + " AND so.id = :o"), {"o": source_object_id, "head": TEXT_CHARS}).first()


def files_classified_since(conn: Connection, project_id: int, epoch: int, but: int) -> list[Any]:
    """The files of the project (rows as :func:`basis_file`) classified after ``epoch``, except ``but``."""
    return list(conn.execute(text(_FILES_SQL + """ AND so.id IN (
            SELECT b.source_object_id FROM classify_basis b
            WHERE b.project_id = :p AND b.classified_epoch > :e AND b.source_object_id <> :o)"""),
            {"p": project_id, "e": epoch, "o": but, "head": TEXT_CHARS}))


def record_basis(conn: Connection, *, source_object_id: int, project_id: int, epoch: int, has_reference: bool,
                 queries_json: str, seen: Sequence[str], folders: Sequence[str], ids: Sequence[str],
                 needle_words: Sequence[str]) -> None:
    """Write (or replace) a classification's basis: its queries (JSON), the files it saw, and the keys
    (folders, message ids, needle words) :func:`bases_touching` matches a new file against."""
    conn.execute(text("""
        INSERT INTO classify_basis (source_object_id, project_id, classified_epoch, has_reference, queries, seen,
                                    folders, ids, needle_words)
        VALUES (:o, :p, :e, :hr, CAST(:q AS jsonb), CAST(:seen AS text[]), CAST(:folders AS text[]),
                CAST(:ids AS text[]), CAST(:words AS text[]))
        ON CONFLICT (source_object_id) DO UPDATE
        SET project_id = EXCLUDED.project_id, classified_epoch = EXCLUDED.classified_epoch,
            has_reference = EXCLUDED.has_reference, queries = EXCLUDED.queries, seen = EXCLUDED.seen,
            folders = EXCLUDED.folders, ids = EXCLUDED.ids, needle_words = EXCLUDED.needle_words"""),
        {"o": source_object_id, "p": project_id, "e": epoch, "hr": has_reference, "q": queries_json,
         "seen": list(seen), "folders": list(folders), "ids": list(ids), "words": list(needle_words)})


def bases_touching(conn: Connection, project_id: int, but: int, *, rel: str, prefixes: Sequence[str],
                   ids: Sequence[str], words: Sequence[str]) -> list[Any]:
    """The other live classifications of the project (source_object_id, queries, seen, source_id) that did not
    see the file ``rel`` and whose basis names one of the folder ``prefixes``, message ``ids`` or needle
    ``words`` (empty arrays match nothing). A basis that saw the file is never answered by it
    (:meth:`ki.domain.matters.basis.Queries.answered_by`): leaving those out reads only the ones it can change."""
    return list(conn.execute(text("""
            SELECT b.source_object_id, b.queries, b.seen, so.source_id FROM classify_basis b
            JOIN source_object so ON so.id = b.source_object_id AND so.deleted_at IS NULL
            WHERE b.project_id = :p AND b.source_object_id <> :o AND NOT (b.seen @> ARRAY[CAST(:rel AS text)])
              AND (b.folders && CAST(:prefixes AS text[]) OR b.ids && CAST(:ids AS text[])
                   OR b.needle_words && CAST(:words AS text[]))"""),
            {"p": project_id, "o": but, "rel": rel, "prefixes": list(prefixes), "ids": list(ids),
             "words": list(words)}))
