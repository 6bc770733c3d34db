"""Documents by party: the entities a name names on the ledger, and the SQL condition of ``--party``.

Spec: insertion-pipeline.md "Extract metadata" (parties resolved by rule; a mention's name on an entity's alias
ledger names that entity). Used by :mod:`ki.index.clause_filters` and the record's filters
(:func:`ki.index.record.filter_sql`).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import text
from sqlalchemy.engine import Connection

_ENTITIES = text("""
SELECT DISTINCT a.entity_id FROM entity_alias a
WHERE a.alias_key = :key OR (cardinality(CAST(:tokens AS text[])) > 0 AND a.tokens @> CAST(:tokens AS text[]))
UNION
SELECT e.id FROM entity e WHERE e.identity_key = :key OR split_part(e.identity_key, '#', 1) = :key
ORDER BY 1
""")


def entities_named(conn: Connection, key: str, tokens: Sequence[str]) -> tuple[int, ...]:
    """Entity ids whose identity key or an alias's key is ``key`` (a :class:`ki.entities.names.NameKey` key), or
    one of whose aliases holds every one of ``tokens`` (its distinctive words)."""
    return tuple(int(r[0]) for r in conn.execute(_ENTITIES, {"key": key, "tokens": list(tokens)}))


def party_condition(oid: str) -> str:
    """SQL EXISTS: the object ``oid`` (a SQL expression) names one of ``:party_entities`` as a party."""
    return (f"EXISTS (SELECT 1 FROM document_party dp WHERE dp.source_object_id = {oid} "
            f"AND dp.entity_id = ANY(CAST(:party_entities AS bigint[])))")
