"""The roles of a matter's parties (``matter_party``) and the claims they are settled from.

Spec: insertion-pipeline.md "Extract metadata" (an entity already carrying a role on the matter keeps it; the
practice-management import names a matter's client); "when a name maps to two entities (homonyms) only an
identifier or the matter context decides". Which role wins is :func:`ki.domain.entities.roles.settle_roles`'s rule;
these statements read the claims and record the outcome. Every function takes a connection inside a transaction
the caller owns; none commits.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Row, text
from sqlalchemy.engine import Connection

from ki.store.locks import xact_lock


def matter_roles(conn: Connection, matter_key: str) -> dict[int, tuple[str, str]]:
    """entity id → (role, basis) recorded on the matter."""
    rows = conn.execute(text("SELECT entity_id, role, basis FROM matter_party WHERE matter_key = :m"),
                        {"m": matter_key})
    return {r.entity_id: (r.role, r.basis) for r in rows}


def record_matter_role(conn: Connection, matter_key: str, matter_id: int | None, entity_id: int, role: str,
                       basis: str, rank: int, source_object_id: int | None) -> None:
    """Record (or replace) one entity's role on the matter, with its basis and the basis's rank."""
    conn.execute(text("""
        INSERT INTO matter_party (matter_key, matter_id, entity_id, role, basis, rank, source_object_id)
        VALUES (:m, :mid, :e, :role, :basis, :rank, :so)
        ON CONFLICT (matter_key, entity_id) DO UPDATE
          SET role = EXCLUDED.role, basis = EXCLUDED.basis, rank = EXCLUDED.rank,
              matter_id = coalesce(EXCLUDED.matter_id, matter_party.matter_id), updated_at = now()
    """), {"m": matter_key, "mid": matter_id, "e": entity_id, "role": role, "basis": basis, "rank": rank,
           "so": source_object_id})


_ROLES_INSERT = """
INSERT INTO matter_party (matter_key, matter_id, entity_id, role, basis, rank)
SELECT :m, :mid, e, r, b, k FROM unnest(CAST(:e AS bigint[]), CAST(:r AS text[]), CAST(:b AS text[]),
                                       CAST(:k AS int[])) AS t(e, r, b, k)
ON CONFLICT (matter_key, entity_id) DO """
_ROLES_REPLACE = """UPDATE
  SET role = EXCLUDED.role, basis = EXCLUDED.basis, rank = EXCLUDED.rank,
      matter_id = coalesce(EXCLUDED.matter_id, matter_party.matter_id), updated_at = now()
  WHERE (matter_party.role, matter_party.basis) IS DISTINCT FROM (EXCLUDED.role, EXCLUDED.basis)"""


def write_matter_roles(conn: Connection, matter_key: str, matter_id: int | None,
                       roles: dict[int, tuple[str, str, int]], *, replace: bool) -> None:
    """Upsert ``matter_party`` rows, entity id → (role, basis, rank), in one statement; ``replace``: overwrite a
    different recorded role (else an existing row is kept)."""
    if roles:
        conn.execute(text(_ROLES_INSERT + (_ROLES_REPLACE if replace else "NOTHING")),
                     {"m": matter_key, "mid": matter_id, "e": list(roles), "r": [v[0] for v in roles.values()],
                      "b": [v[1] for v in roles.values()], "k": [v[2] for v in roles.values()]})


def lock_matter_roles(conn: Connection, matter_key: str) -> None:
    """Take the matter's transaction-level roles lock (blocking; held until the caller commits): the settling of
    one matter's roles is serialised, so the last document to commit sees every other one's claims."""
    xact_lock(conn, "matter-roles", matter_key)


_PARTY_CLAIMS_SQL = text("""
SELECT p.entity_id, e.kind, p.resolution->'claims' AS claims, coalesce((p.resolution->>'is_firm')::boolean, false)
       AS is_firm, p.source_object_id
FROM document_party p JOIN entity e ON e.id = p.entity_id WHERE p.matter_key = :m
""")


def party_claim_rows(conn: Connection, matter_key: str) -> Sequence[Row]:
    """``entity_id``, ``kind``, ``claims`` (JSON list or None), ``is_firm``, ``source_object_id`` of every document
    party row of the matter."""
    return conn.execute(_PARTY_CLAIMS_SQL, {"m": matter_key}).fetchall()


def outside_role_rows(conn: Connection, matter_key: str, bases: Sequence[str]) -> Sequence[Row]:
    """``entity_id``, ``role``, ``basis``, ``kind`` of the matter's roles recorded on one of ``bases`` (claims made
    outside the documents)."""
    return conn.execute(text("""SELECT mp.entity_id, mp.role, mp.basis, e.kind FROM matter_party mp
                                JOIN entity e ON e.id = mp.entity_id
                                WHERE mp.matter_key = :m AND mp.basis = ANY(:outside)"""),
                        {"m": matter_key, "outside": list(bases)}).fetchall()


def imported_client_name(conn: Connection, matter_id: int) -> str | None:
    """The ``client_name`` of an imported matter (None: not imported, unknown, or no client name)."""
    row = conn.execute(text("SELECT client_name FROM matter WHERE id = :m AND imported"), {"m": matter_id}).first()
    return None if row is None else row.client_name


def party_names(conn: Connection, matter_key: str) -> Sequence[Row]:
    """``entity_id``, ``name`` (as the document wrote it), ``kind`` of the matter's document parties, distinct."""
    return conn.execute(text("""SELECT DISTINCT p.entity_id, p.name, e.kind FROM document_party p
                                JOIN entity e ON e.id = p.entity_id WHERE p.matter_key = :m"""),
                        {"m": matter_key}).fetchall()


def drop_roles_except(conn: Connection, matter_key: str, entity_ids: Sequence[int]) -> None:
    """Delete the matter's roles of every entity not in ``entity_ids``."""
    conn.execute(text("DELETE FROM matter_party WHERE matter_key = :m AND NOT (entity_id = ANY(CAST(:e AS bigint[])))"),
                 {"m": matter_key, "e": list(entity_ids)})


def set_document_roles(conn: Connection, matter_key: str, roles: dict[int, tuple[str, str]]) -> None:
    """Write entity id → (role, basis) on each document party row of the matter where it differs."""
    conn.execute(text("""
        UPDATE document_party p SET role = t.r, role_basis = t.b
        FROM unnest(CAST(:e AS bigint[]), CAST(:r AS text[]), CAST(:b AS text[])) AS t(e, r, b)
        WHERE p.matter_key = :m AND p.entity_id = t.e AND (p.role, p.role_basis) IS DISTINCT FROM (t.r, t.b)
    """), {"m": matter_key, "e": list(roles), "r": [v[0] for v in roles.values()],
           "b": [v[1] for v in roles.values()]})


def relink_homonym(conn: Connection, matter_key: str, old_entity_id: int, new_entity_id: int) -> int:
    """Move the matter's name-only links from ``old_entity_id`` to its homonym ``new_entity_id``.

    Spec: "when a name maps to two entities (homonyms) only an identifier or the matter context decides".
    A document on ``matter_key`` that named the company without an identifier was linked to the only
    same-name entity there was; once a register number on this matter proves the matter's company is
    the other one, those links follow — unless the old entity is tied to the matter by an identifier
    itself. Returns the number of document party rows moved (1 when only the matter role moved).
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
