"""Entity rows, their alias ledger and identifiers: the candidates of a mention, creation, the gazetteer of one
document, the names documents use, and the merge of two entities.

Spec: insertion-pipeline.md "Extract metadata" (one real company is one row across every matter it appears on;
the uniqueness constraint ``uq_entity_project_identity`` on the identity key is the backstop of the name locks).
The rules (name keys, which candidate a mention is, the canonical spelling) are :mod:`ki.domain.entities`'s.
Every function takes a connection inside a transaction the caller owns; none commits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.engine import Connection

CANDIDATES_SQL = text("""
SELECT e.id, count(*) AS score
FROM entity e JOIN entity_alias a ON a.entity_id = e.id
WHERE e.project_id = :project AND (a.alias_key = :key OR (cardinality(a.tokens) > 0
      AND (a.tokens @> CAST(:tokens AS text[]) OR a.tokens <@ CAST(:tokens AS text[]))))
GROUP BY e.id
UNION
SELECT e.id, 100 AS score
FROM entity e JOIN entity_identifier i ON i.entity_id = e.id
WHERE e.project_id = :project AND i.value_key = ANY(CAST(:values AS text[]))
ORDER BY score DESC, id
LIMIT :limit
""")
KNOWN_NAMES_SQL = text("""
SELECT a.entity_id, a.alias, e.kind FROM entity_alias a JOIN entity e ON e.id = a.entity_id
WHERE e.project_id = :p AND a.tokens[1] = ANY(CAST(:t AS text[])) AND a.tokens <@ CAST(:t AS text[])
ORDER BY length(a.alias) DESC, a.id LIMIT :limit
""")
ENTITY_ROWS_SQL = text("SELECT id, name, kind, identity_key FROM entity WHERE id = ANY(CAST(:ids AS bigint[]))")
ALIASES_SQL = text("SELECT entity_id, alias, alias_key FROM entity_alias WHERE entity_id = ANY(CAST(:ids AS bigint[]))")
IDENTIFIERS_SQL = text("""
SELECT entity_id, type, value, issuer FROM entity_identifier WHERE entity_id = ANY(CAST(:ids AS bigint[]))
ORDER BY id
""")
MATTERS_SQL = text("SELECT entity_id, matter_key FROM matter_party WHERE entity_id = ANY(CAST(:ids AS bigint[]))")


def candidate_ids(conn: Connection, project_id: int, key: str, tokens: Sequence[str], values: Sequence[str],
                  limit: int) -> list[int]:
    """Ids of the project's entities with an alias of key ``key``, an alias whose tokens contain ``tokens`` or are
    contained in them, or an identifier whose value key is one of ``values``; identifier matches first, then by
    shared tokens, at most ``limit``."""
    return [r.id for r in conn.execute(CANDIDATES_SQL, {"project": project_id, "key": key, "tokens": list(tokens),
                                                        "values": list(values), "limit": limit})]


def entity_rows(conn: Connection, ids: Sequence[int]) -> dict[int, Row]:
    """entity id → its row (``id``, ``name``, ``kind``, ``identity_key``); unknown ids are left out."""
    return {r.id: r for r in conn.execute(ENTITY_ROWS_SQL, {"ids": list(ids)})}


def alias_rows(conn: Connection, ids: Sequence[int]) -> Sequence[Row]:
    """``entity_id``, ``alias`` (as written), ``alias_key`` of every alias of the entities."""
    return conn.execute(ALIASES_SQL, {"ids": list(ids)}).fetchall()


def identifier_rows(conn: Connection, ids: Sequence[int]) -> Sequence[Row]:
    """``entity_id``, ``type``, ``value``, ``issuer`` of every identifier of the entities, in recording order."""
    return conn.execute(IDENTIFIERS_SQL, {"ids": list(ids)}).fetchall()


def party_matter_rows(conn: Connection, ids: Sequence[int]) -> Sequence[Row]:
    """``entity_id``, ``matter_key`` of every matter the entities are a party on."""
    return conn.execute(MATTERS_SQL, {"ids": list(ids)}).fetchall()


INSERT_ENTITY_SQL = text("""
INSERT INTO entity (project_id, kind, name, identity_key, provenance)
VALUES (:project, :kind, :name, :identity_key, CAST(:provenance AS jsonb))
ON CONFLICT (project_id, identity_key) DO NOTHING
RETURNING id
""")


def create_entity(conn: Connection, project_id: int, *, kind: str, name: str, identity_key: str,
                  provenance: dict[str, Any]) -> tuple[int, bool]:
    """Insert an entity unless its identity key exists; returns (id, created). An insert that loses the race on
    ``uq_entity_project_identity`` reads the winner's id."""
    row = conn.execute(INSERT_ENTITY_SQL, {"project": project_id, "kind": kind, "name": name,
                                           "identity_key": identity_key,
                                           "provenance": json.dumps(provenance, ensure_ascii=False)}).first()
    if row is not None:
        return int(row.id), True
    existing = conn.execute(text("SELECT id FROM entity WHERE project_id = :p AND identity_key = :k"),
                            {"p": project_id, "k": identity_key}).scalar_one()
    return int(existing), False


def add_alias(conn: Connection, entity_id: int, alias: str, alias_key: str, tokens: Sequence[str],
              source_object_id: int | None) -> None:
    """Put ``alias`` (as written, with its key and base tokens) on the entity's alias ledger (idempotent)."""
    conn.execute(text("""
        INSERT INTO entity_alias (entity_id, alias, alias_key, tokens, source_object_id)
        VALUES (:e, :alias, :key, CAST(:tokens AS text[]), :so)
        ON CONFLICT (entity_id, alias) DO NOTHING
    """), {"e": entity_id, "alias": alias, "key": alias_key, "tokens": list(tokens), "so": source_object_id})


def add_identifiers(conn: Connection, entity_id: int, identifiers: Iterable[tuple[str, str, str, str | None]]
                    ) -> None:
    """Record typed identifiers ``(type, value, value_key, issuer)`` on the entity, one statement each
    (idempotent; a missing issuer is filled in later)."""
    for kind, value, value_key, issuer in identifiers:
        conn.execute(text("""
            INSERT INTO entity_identifier (entity_id, type, value, value_key, issuer)
            VALUES (:e, :t, :v, :k, :i)
            ON CONFLICT (entity_id, type, value_key) DO UPDATE
              SET issuer = coalesce(entity_identifier.issuer, EXCLUDED.issuer)
        """), {"e": entity_id, "t": kind, "v": value, "k": value_key, "i": issuer})


def name_spellings(conn: Connection, entity_ids: Sequence[int]) -> Sequence[Row]:
    """``entity_id``, ``name``, ``n`` (how many document party rows use that spelling) of the entities."""
    return conn.execute(text("SELECT entity_id, name, count(*) AS n FROM document_party "
                             "WHERE entity_id = ANY(CAST(:ids AS bigint[])) GROUP BY entity_id, name"),
                        {"ids": list(entity_ids)}).fetchall()


def former_names(conn: Connection, entity_ids: Sequence[int]) -> Sequence[Row]:
    """``entity_id``, ``f``: each name a document party row of the entities calls a former one."""
    return conn.execute(text("SELECT DISTINCT entity_id, jsonb_array_elements_text(resolution->'former_names') AS f "
                             "FROM document_party WHERE entity_id = ANY(CAST(:ids AS bigint[])) "
                             "AND resolution ? 'former_names'"), {"ids": list(entity_ids)}).fetchall()


def rename_entities(conn: Connection, names: dict[int, str]) -> None:
    """Set each entity's name (entity id → name) where it differs."""
    if names:
        conn.execute(text("UPDATE entity SET name = :n, updated_at = now() WHERE id = :e AND name <> :n"),
                     [{"e": e, "n": n} for e, n in names.items()])


def known_names(conn: Connection, project_id: int, tokens: Iterable[str], limit: int = 2000
                ) -> list[tuple[int, str, str]]:
    """Aliases whose every base token occurs in ``tokens`` (the gazetteer of one document).

    Returns: (entity id, alias as written, entity kind), longest aliases first, at most ``limit``. An alias
    without tokens is none. Read through the alias's first token (``ix_entity_alias_first_token``: one of
    ``tokens`` for every alias that qualifies), not the whole alias table.
    """
    rows = conn.execute(KNOWN_NAMES_SQL, {"p": project_id, "t": sorted(set(tokens)), "limit": limit})
    return [(r.entity_id, r.alias, r.kind) for r in rows]


def merge_entities(conn: Connection, into: int, other: int) -> set[str]:
    """Fold entity ``other`` into ``into`` (one company under a former and a current name): its document party
    rows, alias ledger, identifiers and matter roles move over (where ``into`` already has a row for the same
    document or matter, ``into``'s stays), then ``other`` is deleted. The caller holds the name locks of both.

    Returns: the matter keys ``other`` was a party on (their roles are to be settled again).
    """
    if into == other:
        return set()
    params = {"i": into, "o": other}
    conn.execute(text("DELETE FROM document_party o USING document_party i WHERE o.entity_id = :o "
                      "AND i.entity_id = :i AND i.source_object_id = o.source_object_id"), params)
    conn.execute(text("UPDATE document_party SET entity_id = :i WHERE entity_id = :o"), params)
    conn.execute(text("INSERT INTO entity_alias (entity_id, alias, alias_key, tokens, source_object_id) "
                      "SELECT :i, alias, alias_key, tokens, source_object_id FROM entity_alias WHERE entity_id = :o "
                      "ORDER BY id ON CONFLICT (entity_id, alias) DO NOTHING"), params)
    conn.execute(text("INSERT INTO entity_identifier (entity_id, type, value, value_key, issuer) "
                      "SELECT :i, type, value, value_key, issuer FROM entity_identifier WHERE entity_id = :o "
                      "ORDER BY id ON CONFLICT (entity_id, type, value_key) DO NOTHING"), params)
    matters = {r[0] for r in conn.execute(text("SELECT matter_key FROM matter_party WHERE entity_id = :o"), params)}
    conn.execute(text("DELETE FROM matter_party o USING matter_party i WHERE o.entity_id = :o "
                      "AND i.entity_id = :i AND i.matter_key = o.matter_key"), params)
    conn.execute(text("UPDATE matter_party SET entity_id = :i WHERE entity_id = :o"), params)
    conn.execute(text("DELETE FROM entity WHERE id = :o"), params)
    return matters
