"""Person party rows an initials-only name is settled against, the move of a party row to another entity, and
the documents a search's ``--party`` names (the entities a name names on the ledger; the SQL condition).

Spec: insertion-pipeline.md "Extract metadata" (parties resolved by rule, one real person one entity); the
rules are :mod:`ki.domain.entities.abbreviations`'s. Every function takes a connection the caller owns (the
extraction's transaction, under the matter's roles lock).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.engine import Connection

PERSON_ROWS_SQL = text("""
SELECT p.id, p.source_object_id, p.entity_id, p.name, p.resolution->'abbreviation' AS abbreviation
FROM document_party p JOIN entity e ON e.id = p.entity_id
WHERE p.matter_key = :m AND e.kind = 'person'
ORDER BY p.id
""")


FOLDER_PERSON_ROWS_SQL = text("""
SELECT p.id, p.source_object_id, p.entity_id, p.name, p.resolution->'abbreviation' AS abbreviation,
       p.matter_key IS NULL AS unscoped, so.path
FROM document_party p JOIN entity e ON e.id = p.entity_id JOIN source_object so ON so.id = p.source_object_id
WHERE so.source_id = :s AND so.path LIKE :prefix ESCAPE '\\' AND e.kind = 'person'
ORDER BY p.id
""")


def matter_person_rows(conn: Connection, matter_key: str) -> Sequence[Row]:
    """``id``, ``source_object_id``, ``entity_id``, ``name``, ``abbreviation`` of the matter's person party rows."""
    return conn.execute(PERSON_ROWS_SQL, {"m": matter_key}).fetchall()


def folder_person_rows(conn: Connection, source_id: int, prefix: str) -> Sequence[Row]:
    """As :func:`matter_person_rows` for the person rows of documents whose path is LIKE ``prefix`` (escaped
    with a backslash) in the source, with ``unscoped`` (no matter key) and ``path``."""
    return conn.execute(FOLDER_PERSON_ROWS_SQL, {"s": source_id, "prefix": prefix}).fetchall()


def repoint_party(conn: Connection, party_id: int, entity_id: int, note: dict[str, Any]) -> None:
    """Point a party row at ``entity_id`` and record why (``resolution.abbreviation`` = ``note``)."""
    conn.execute(text("""UPDATE document_party SET entity_id = :e,
                         resolution = resolution || jsonb_build_object('abbreviation', CAST(:note AS jsonb))
                         WHERE id = :id"""), {"e": entity_id, "note": json.dumps(note), "id": party_id})


_ENTITIES_NAMED = text("""
SELECT DISTINCT a.entity_id FROM entity_alias a
WHERE a.alias_key = :key OR (cardinality(CAST(:tokens AS text[])) > 0 AND a.tokens @> CAST(:tokens AS text[]))
UNION
SELECT e.id FROM entity e WHERE e.identity_key = :key OR split_part(e.identity_key, '#', 1) = :key
ORDER BY 1
""")


def entities_named(conn: Connection, key: str, tokens: Sequence[str]) -> tuple[int, ...]:
    """Entity ids whose identity key or an alias's key is ``key`` (a :class:`ki.domain.entities.names.NameKey` key), or
    one of whose aliases holds every one of ``tokens`` (its distinctive words): what ``--party`` names."""
    return tuple(int(r[0]) for r in conn.execute(_ENTITIES_NAMED, {"key": key, "tokens": list(tokens)}))


def party_condition(oid: str) -> str:
    """SQL EXISTS: the object ``oid`` (a SQL expression) names one of ``:party_entities`` as a party."""
    return (f"EXISTS (SELECT 1 FROM document_party dp WHERE dp.source_object_id = {oid} "
            f"AND dp.entity_id = ANY(CAST(:party_entities AS bigint[])))")

