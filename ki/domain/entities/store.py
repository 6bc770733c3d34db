"""Entity rows: candidates for a mention, creation under an advisory lock, alias ledger, identifiers, matter roles.

Spec: insertion-pipeline.md "Extract metadata" (one real company is one row across every matter it
appears on; the uniqueness constraint on the identity key; an entity already carrying a role on
the matter keeps it). Concurrency: callers take :func:`lock_names` inside the transaction that
resolves and creates, so two documents naming the same new company at once serialise on the
normalised name and the second finds the first one's row; the unique constraint
``uq_entity_project_identity`` is the backstop (an insert that loses the race reads the winner).

All functions take an open :class:`~sqlalchemy.engine.Connection` inside a transaction; none commits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.domain.entities.identifiers import Identifier
from ki.domain.entities.names import NameKey, canonical_name, contained, name_key
from ki.domain.entities.resolve import Candidate
from ki.domain.entities.roles import RANKS, PartyClaims, settle_roles
from ki.store.locks import lock_key

#: Candidates read per mention at most (ranked by shared tokens).
MAX_CANDIDATES = 200


def lock_names(conn: Connection, project_id: int, keys: Iterable[NameKey]) -> int:
    """Take transaction-level advisory locks on each normalised identity key and each of its base tokens.

    Two mentions that could be the same entity share their key or at least one token, so they
    serialise. Locks are taken in sorted order (no deadlock between documents). Returns the count.
    """
    names: set[str] = set()
    for key in keys:
        names.add(f"key:{key.key}")
        names.update(f"tok:{t}" for t in key.base if len(t) >= 3)
    ints = sorted({lock_key("entity", f"{project_id}:{n}") for n in names})
    if ints:
        # One statement, locks taken in ascending key order (the sort is what makes it deadlock-free).
        conn.execute(text("SELECT count(pg_advisory_xact_lock(k)) FROM (SELECT unnest(CAST(:keys AS bigint[])) AS k "
                          "ORDER BY 1) AS ordered"), {"keys": ints})
    return len(ints)


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
ENTITY_ROWS_SQL = text("SELECT id, name, kind, identity_key FROM entity WHERE id = ANY(CAST(:ids AS bigint[]))")
ALIASES_SQL = text("SELECT entity_id, alias, alias_key FROM entity_alias WHERE entity_id = ANY(CAST(:ids AS bigint[]))")
IDENTIFIERS_SQL = text("""
SELECT entity_id, type, value, issuer FROM entity_identifier WHERE entity_id = ANY(CAST(:ids AS bigint[]))
ORDER BY id
""")
MATTERS_SQL = text("SELECT entity_id, matter_key FROM matter_party WHERE entity_id = ANY(CAST(:ids AS bigint[]))")


def load_candidates(conn: Connection, project_id: int, key: NameKey, identifiers: list[Identifier]
                    ) -> tuple[list[Candidate], dict[int, set[str]]]:
    """Entities that might be the mention: same alias key, an alias whose tokens contain the mention's or are
    contained in them (the precondition of token containment), or a shared identifier value.

    Returns: (candidates, entity id → alias keys on its ledger).
    """
    values = sorted({i.value_key for i in identifiers})
    ids = [r.id for r in conn.execute(CANDIDATES_SQL, {"project": project_id, "key": key.key,
                                                       "tokens": list(key.base), "values": values,
                                                       "limit": MAX_CANDIDATES})]
    if not ids:
        return [], {}
    params = {"ids": ids}
    rows = {r.id: r for r in conn.execute(ENTITY_ROWS_SQL, params)}
    aliases: dict[int, list[tuple[str, str]]] = {i: [] for i in ids}
    for r in conn.execute(ALIASES_SQL, params):
        aliases[r.entity_id].append((r.alias, r.alias_key))
    idents: dict[int, list[Identifier]] = {i: [] for i in ids}
    for r in conn.execute(IDENTIFIERS_SQL, params):
        idents[r.entity_id].append(Identifier(r.type, r.value, r.issuer))
    matters: dict[int, set[str]] = {i: set() for i in ids}
    for r in conn.execute(MATTERS_SQL, params):
        matters[r.entity_id].add(r.matter_key)
    out = []
    for i in ids:
        row = rows[i]
        kind = row.kind if row.kind in ("person", "court", "law_firm") else None
        names = tuple({name_key(n, kind=kind).key: name_key(n, kind=kind)
                       for n in [row.name, *(a for a, _ in aliases[i])]}.values())
        out.append(Candidate(entity_id=i, name=row.name, kind=row.kind, identity_key=row.identity_key, names=names,
                             identifiers=tuple(idents[i]), matters=frozenset(matters[i])))
    return out, {i: {k for _, k in aliases[i]} for i in ids}


INSERT_ENTITY_SQL = text("""
INSERT INTO entity (project_id, kind, name, identity_key, provenance)
VALUES (:project, :kind, :name, :identity_key, CAST(:provenance AS jsonb))
ON CONFLICT (project_id, identity_key) DO NOTHING
RETURNING id
""")


def create_entity(conn: Connection, project_id: int, *, kind: str, name: str, identity_key: str,
                  provenance: dict[str, Any]) -> tuple[int, bool]:
    """Insert an entity unless its identity key exists; returns (id, created)."""
    row = conn.execute(INSERT_ENTITY_SQL, {"project": project_id, "kind": kind, "name": name,
                                           "identity_key": identity_key,
                                           "provenance": json.dumps(provenance, ensure_ascii=False)}).first()
    if row is not None:
        return int(row.id), True
    existing = conn.execute(text("SELECT id FROM entity WHERE project_id = :p AND identity_key = :k"),
                            {"p": project_id, "k": identity_key}).scalar_one()
    return int(existing), False


def add_alias(conn: Connection, entity_id: int, alias: str, key: NameKey, source_object_id: int | None) -> None:
    """Put ``alias`` (as written) on the entity's alias ledger (idempotent)."""
    conn.execute(text("""
        INSERT INTO entity_alias (entity_id, alias, alias_key, tokens, source_object_id)
        VALUES (:e, :alias, :key, CAST(:tokens AS text[]), :so)
        ON CONFLICT (entity_id, alias) DO NOTHING
    """), {"e": entity_id, "alias": alias, "key": key.key, "tokens": list(key.base), "so": source_object_id})


def add_identifiers(conn: Connection, entity_id: int, identifiers: list[Identifier]) -> None:
    """Record typed identifiers on the entity (idempotent; a missing issuer is filled in later)."""
    for ident in identifiers:
        conn.execute(text("""
            INSERT INTO entity_identifier (entity_id, type, value, value_key, issuer)
            VALUES (:e, :t, :v, :k, :i)
            ON CONFLICT (entity_id, type, value_key) DO UPDATE
              SET issuer = coalesce(entity_identifier.issuer, EXCLUDED.issuer)
        """), {"e": entity_id, "t": ident.type, "v": ident.value, "k": ident.value_key, "i": ident.issuer})


def matter_roles(conn: Connection, matter_key: str) -> dict[int, tuple[str, str]]:
    """entity id → (role, basis) recorded on the matter."""
    rows = conn.execute(text("SELECT entity_id, role, basis FROM matter_party WHERE matter_key = :m"),
                        {"m": matter_key})
    return {r.entity_id: (r.role, r.basis) for r in rows}


def set_matter_role(conn: Connection, matter_key: str, matter_id: int | None, entity_id: int, role: str, basis: str,
                    source_object_id: int | None) -> None:
    """Record a claim made outside the documents (the practice-management import: ``("client", "imported")``)
    and settle the matter's roles again (:func:`settle_matter_roles`)."""
    conn.execute(text("""
        INSERT INTO matter_party (matter_key, matter_id, entity_id, role, basis, rank, source_object_id)
        VALUES (:m, :mid, :e, :role, :basis, :rank, :so)
        ON CONFLICT (matter_key, entity_id) DO UPDATE
          SET role = EXCLUDED.role, basis = EXCLUDED.basis, rank = EXCLUDED.rank,
              matter_id = coalesce(EXCLUDED.matter_id, matter_party.matter_id), updated_at = now()
    """), {"m": matter_key, "mid": matter_id, "e": entity_id, "role": role, "basis": basis, "rank": RANKS[basis],
           "so": source_object_id})
    settle_matter_roles(conn, matter_key, matter_id)


_ROLES_INSERT = """
INSERT INTO matter_party (matter_key, matter_id, entity_id, role, basis, rank)
SELECT :m, :mid, e, r, b, k FROM unnest(CAST(:e AS bigint[]), CAST(:r AS text[]), CAST(:b AS text[]),
                                       CAST(:k AS int[])) AS t(e, r, b, k)
ON CONFLICT (matter_key, entity_id) DO """
_ROLES_REPLACE = """UPDATE
  SET role = EXCLUDED.role, basis = EXCLUDED.basis, rank = EXCLUDED.rank,
      matter_id = coalesce(EXCLUDED.matter_id, matter_party.matter_id), updated_at = now()
  WHERE (matter_party.role, matter_party.basis) IS DISTINCT FROM (EXCLUDED.role, EXCLUDED.basis)"""


def _write_roles(conn: Connection, matter_key: str, matter_id: int | None, roles: dict[int, tuple[str, str]], *,
                 replace: bool) -> None:
    """Upsert ``matter_party`` rows (entity → (role, basis)); ``replace``: overwrite a different recorded role."""
    if roles:
        conn.execute(text(_ROLES_INSERT + (_ROLES_REPLACE if replace else "NOTHING")),
                     {"m": matter_key, "mid": matter_id, "e": list(roles), "r": [v[0] for v in roles.values()],
                      "b": [v[1] for v in roles.values()], "k": [RANKS[v[1]] for v in roles.values()]})


def note_on_matter(conn: Connection, matter_key: str, matter_id: int | None,
                   roles: dict[int, tuple[str, str]]) -> None:
    """Put the entities on the matter (so the next mention resolved in this transaction or after it sees
    them there) with a provisional role; an existing row is kept. :func:`settle_matter_roles` decides."""
    _write_roles(conn, matter_key, matter_id, roles, replace=False)


#: Bases recorded on ``matter_party`` from outside the documents (kept when the roles are settled again).
OUTSIDE_BASES = ("imported",)

_PARTY_CLAIMS_SQL = text("""
SELECT p.entity_id, e.kind, p.resolution->'claims' AS claims, coalesce((p.resolution->>'is_firm')::boolean, false)
       AS is_firm, p.source_object_id
FROM document_party p JOIN entity e ON e.id = p.entity_id WHERE p.matter_key = :m
""")


def _imported_client(conn: Connection, matter_key: str, matter_id: int | None) -> set[int]:
    """The entities of the matter's documents that are its practice-management client (an imported matter's
    ``client_name``): the same normalised name, or one containing the other token for token."""
    if matter_id is None:
        return set()
    row = conn.execute(text("SELECT client_name FROM matter WHERE id = :m AND imported"), {"m": matter_id}).first()
    if row is None or not row.client_name:
        return set()
    client = name_key(row.client_name)
    person = name_key(row.client_name, kind="person")
    found: set[int] = set()
    for r in conn.execute(text("""SELECT DISTINCT p.entity_id, p.name, e.kind FROM document_party p
                                  JOIN entity e ON e.id = p.entity_id WHERE p.matter_key = :m"""), {"m": matter_key}):
        if r.kind in ("law_firm", "court"):
            continue
        key = name_key(r.name, kind=r.kind if r.kind == "person" else None)
        want = person if r.kind == "person" else client
        if key.key == want.key or contained(key, want):
            found.add(int(r.entity_id))
    return found


def settle_matter_roles(conn: Connection, matter_key: str, matter_id: int | None) -> dict[int, tuple[str, str]]:
    """Decide every party's role on the matter from all claims its documents (and the import) make, record
    them on ``matter_party`` and on each document party row of the matter
    (:func:`ki.domain.entities.roles.settle_roles`).

    Serialised per matter by a transaction-level advisory lock (taken after the name locks), so the last
    document to commit sees every other one's claims. Returns entity id → (role, basis).
    """
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": lock_key("matter-roles", matter_key)})
    parties: dict[int, PartyClaims] = {}
    for r in conn.execute(_PARTY_CLAIMS_SQL, {"m": matter_key}):
        p = parties.setdefault(r.entity_id, PartyClaims(kind=r.kind))
        p.is_firm = p.is_firm or bool(r.is_firm)
        p.add(r.claims or [])
    for r in conn.execute(text("""SELECT mp.entity_id, mp.role, mp.basis, e.kind FROM matter_party mp
                                  JOIN entity e ON e.id = mp.entity_id
                                  WHERE mp.matter_key = :m AND mp.basis = ANY(:outside)"""),
                          {"m": matter_key, "outside": list(OUTSIDE_BASES)}):
        parties.setdefault(r.entity_id, PartyClaims(kind=r.kind)).add([(r.role, r.basis)])
    for entity in _imported_client(conn, matter_key, matter_id):
        if entity in parties:
            parties[entity].add([("client", "imported")])
    roles = settle_roles(parties)
    conn.execute(text("DELETE FROM matter_party WHERE matter_key = :m AND NOT (entity_id = ANY(CAST(:e AS bigint[])))"),
                 {"m": matter_key, "e": sorted(roles)})
    if roles:
        _write_roles(conn, matter_key, matter_id, roles, replace=True)
        conn.execute(text("""
            UPDATE document_party p SET role = t.r, role_basis = t.b
            FROM unnest(CAST(:e AS bigint[]), CAST(:r AS text[]), CAST(:b AS text[])) AS t(e, r, b)
            WHERE p.matter_key = :m AND p.entity_id = t.e AND (p.role, p.role_basis) IS DISTINCT FROM (t.r, t.b)
        """), {"m": matter_key, "e": list(roles), "r": [v[0] for v in roles.values()],
               "b": [v[1] for v in roles.values()]})
    return roles


def settle_entity_names(conn: Connection, entity_ids: Iterable[int]) -> None:
    """Name each entity by the spelling its documents use (:func:`ki.domain.entities.names.canonical_name` over
    every document party row's name; a name any document calls a former one comes last), whatever order the
    documents came in.

    Takes a transaction-level advisory lock per entity (ascending ids, after the name locks), so the last
    document to commit sees every other one's rows.
    """
    ids = sorted(set(entity_ids))
    if not ids:
        return
    conn.execute(text("SELECT count(pg_advisory_xact_lock(k)) FROM (SELECT unnest(CAST(:keys AS bigint[])) AS k "
                      "ORDER BY 1) AS ordered"), {"keys": sorted({lock_key("entity-row", str(i)) for i in ids})})
    spellings: dict[int, dict[str, int]] = {i: {} for i in ids}
    for r in conn.execute(text("SELECT entity_id, name, count(*) AS n FROM document_party "
                               "WHERE entity_id = ANY(CAST(:ids AS bigint[])) GROUP BY entity_id, name"),
                          {"ids": ids}):
        spellings[r.entity_id][r.name] = int(r.n)
    former: dict[int, set[str]] = {i: set() for i in ids}
    for r in conn.execute(text("SELECT DISTINCT entity_id, jsonb_array_elements_text(resolution->'former_names') AS f "
                               "FROM document_party WHERE entity_id = ANY(CAST(:ids AS bigint[])) "
                               "AND resolution ? 'former_names'"), {"ids": ids}):
        former[r.entity_id].add(r.f)
    kinds = {r.id: r.kind for r in conn.execute(ENTITY_ROWS_SQL, {"ids": ids})}
    updates = [{"e": e, "n": canonical_name(names, kind=kinds.get(e), former=former[e])}
               for e, names in spellings.items() if names]
    if updates:
        conn.execute(text("UPDATE entity SET name = :n, updated_at = now() WHERE id = :e AND name <> :n"), updates)


def relink_homonym(conn: Connection, matter_key: str, old_entity_id: int, new_entity_id: int) -> int:
    """Move the matter's name-only links from ``old_entity_id`` to its homonym ``new_entity_id``.

    Spec: "when a name maps to two entities (homonyms) only an identifier or the matter context decides".
    A document on ``matter_key`` that named the company without an identifier was linked to the only
    same-name entity there was; once a register number on this matter proves the matter's company is
    the other one, those links follow — unless the old entity is tied to the matter by an identifier
    itself. Returns the number of document party rows moved.
    """
    tied = conn.execute(text("""
        SELECT 1 FROM document_party WHERE matter_key = :m AND entity_id = :old AND resolution->>'rule' = 'identifier'
        LIMIT 1"""), {"m": matter_key, "old": old_entity_id}).first()
    if tied is not None:
        return 0
    conn.execute(text("""
        DELETE FROM document_party p WHERE p.matter_key = :m AND p.entity_id = :old
          AND EXISTS (SELECT 1 FROM document_party q WHERE q.source_object_id = p.source_object_id
                      AND q.entity_id = :new)"""), {"m": matter_key, "old": old_entity_id, "new": new_entity_id})
    moved = conn.execute(text("""
        UPDATE document_party SET entity_id = :new,
               resolution = resolution || '{"relinked": "homonym on this matter"}'::jsonb
        WHERE matter_key = :m AND entity_id = :old"""), {"m": matter_key, "old": old_entity_id,
                                                         "new": new_entity_id}).rowcount
    role = conn.execute(text("DELETE FROM matter_party WHERE matter_key = :m AND entity_id = :old "
                             "RETURNING role, basis, rank, matter_id, source_object_id"),
                        {"m": matter_key, "old": old_entity_id}).first()
    if role is not None:
        conn.execute(text("""
            INSERT INTO matter_party (matter_key, matter_id, entity_id, role, basis, rank, source_object_id)
            VALUES (:m, :mid, :new, :role, :basis, :rank, :so) ON CONFLICT (matter_key, entity_id) DO NOTHING
        """), {"m": matter_key, "mid": role.matter_id, "new": new_entity_id, "role": role.role, "basis": role.basis,
               "rank": role.rank, "so": role.source_object_id})
    return moved or int(role is not None)


def client_matters(conn: Connection, matter_key: str) -> frozenset[str]:
    """Other matters on which this matter's client(s) act as client."""
    rows = conn.execute(text("""
        SELECT DISTINCT other.matter_key FROM matter_party mine
        JOIN matter_party other ON other.entity_id = mine.entity_id AND other.role = 'client'
        WHERE mine.matter_key = :m AND mine.role = 'client' AND other.matter_key <> :m
    """), {"m": matter_key})
    return frozenset(r.matter_key for r in rows)


def known_names(conn: Connection, project_id: int, tokens: Iterable[str], limit: int = 2000
                ) -> list[tuple[int, str, str]]:
    """Aliases whose every base token occurs in ``tokens`` (the gazetteer of one document).

    Returns: (entity id, alias as written, entity kind), longest aliases first.
    """
    rows = conn.execute(text("""
        SELECT a.entity_id, a.alias, e.kind FROM entity_alias a JOIN entity e ON e.id = a.entity_id
        WHERE e.project_id = :p AND cardinality(a.tokens) > 0 AND a.tokens <@ CAST(:t AS text[])
        ORDER BY length(a.alias) DESC, a.id LIMIT :limit
    """), {"p": project_id, "t": sorted(set(tokens)), "limit": limit})
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


def entities_named_by(conn: Connection, name: str) -> tuple[int, ...]:
    """The entity ids a search's ``--party NAME`` names: an entity whose identity key or an alias's key is the
    name's key (:func:`ki.domain.entities.names.name_key`: legal form and case aside), or one of whose aliases holds
    every
    distinctive word of the name ("Thalbach" names "Thalbach Immobilien GmbH & Co. KG"); () for none or a name
    without distinctive words."""
    from ki.store.parties import entities_named

    key = name_key(name)
    return entities_named(conn, key.key, key.base) if key.key else ()


def party_filter_ids(db: Any, name: str | None) -> tuple[int, ...] | None:
    """:func:`entities_named_by` on a new connection of ``db`` (a Database or engine); None when ``name`` is None
    (no party filter)."""
    if name is None:
        return None
    with getattr(db, "engine", db).connect() as conn:
        return entities_named_by(conn, name)
