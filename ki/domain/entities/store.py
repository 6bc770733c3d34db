"""Entity rows: candidates for a mention, creation under an advisory lock, alias ledger, identifiers, matter roles.

Spec: insertion-pipeline.md "Extract metadata" (one real company is one row across every matter it
appears on; the uniqueness constraint on the identity key; an entity already carrying a role on
the matter keeps it). Concurrency: callers take :func:`lock_names` inside the transaction that
resolves and creates, so two documents naming the same new company at once serialise on the
normalised name and the second finds the first one's row; the unique constraint
``uq_entity_project_identity`` is the backstop (an insert that loses the race reads the winner).

All functions take an open :class:`~sqlalchemy.engine.Connection` inside a transaction; none commits. The
statements are :mod:`ki.store.entities`' and :mod:`ki.store.matter_roles`'; this module keeps the rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy.engine import Connection

from ki.domain.entities.identifiers import Identifier
from ki.domain.entities.names import NameKey, canonical_name, contained, name_key
from ki.domain.entities.resolve import Candidate
from ki.domain.entities.roles import RANKS, PartyClaims, settle_roles
from ki.store import entities as rows
from ki.store import matter_roles as roles_store
from ki.store.entities import create_entity as create_entity
from ki.store.entities import known_names as known_names
from ki.store.entities import merge_entities as merge_entities
from ki.store.locks import lock_key, lock_keys_in_order
from ki.store.matter_roles import client_matters as client_matters
from ki.store.matter_roles import matter_roles as matter_roles
from ki.store.matter_roles import relink_homonym as relink_homonym

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
        lock_keys_in_order(conn, ints)
    return len(ints)


def load_candidates(conn: Connection, project_id: int, key: NameKey, identifiers: list[Identifier]
                    ) -> tuple[list[Candidate], dict[int, set[str]]]:
    """Entities that might be the mention: same alias key, an alias whose tokens contain the mention's or are
    contained in them (the precondition of token containment), or a shared identifier value.

    Returns: (candidates, entity id → alias keys on its ledger).
    """
    values = sorted({i.value_key for i in identifiers})
    ids = rows.candidate_ids(conn, project_id, key.key, list(key.base), values, MAX_CANDIDATES)
    if not ids:
        return [], {}
    entities = rows.entity_rows(conn, ids)
    aliases: dict[int, list[tuple[str, str]]] = {i: [] for i in ids}
    for r in rows.alias_rows(conn, ids):
        aliases[r.entity_id].append((r.alias, r.alias_key))
    idents: dict[int, list[Identifier]] = {i: [] for i in ids}
    for r in rows.identifier_rows(conn, ids):
        idents[r.entity_id].append(Identifier(r.type, r.value, r.issuer))
    matters: dict[int, set[str]] = {i: set() for i in ids}
    for r in rows.party_matter_rows(conn, ids):
        matters[r.entity_id].add(r.matter_key)
    out = []
    for i in ids:
        row = entities[i]
        kind = row.kind if row.kind in ("person", "court", "law_firm") else None
        names = tuple({name_key(n, kind=kind).key: name_key(n, kind=kind)
                       for n in [row.name, *(a for a, _ in aliases[i])]}.values())
        out.append(Candidate(entity_id=i, name=row.name, kind=row.kind, identity_key=row.identity_key, names=names,
                             identifiers=tuple(idents[i]), matters=frozenset(matters[i])))
    return out, {i: {k for _, k in aliases[i]} for i in ids}


def add_alias(conn: Connection, entity_id: int, alias: str, key: NameKey, source_object_id: int | None) -> None:
    """Put ``alias`` (as written) on the entity's alias ledger (idempotent)."""
    rows.add_alias(conn, entity_id, alias, key.key, list(key.base), source_object_id)


def add_identifiers(conn: Connection, entity_id: int, identifiers: list[Identifier]) -> None:
    """Record typed identifiers on the entity (idempotent; a missing issuer is filled in later)."""
    rows.add_identifiers(conn, entity_id, [(i.type, i.value, i.value_key, i.issuer) for i in identifiers])


def set_matter_role(conn: Connection, matter_key: str, matter_id: int | None, entity_id: int, role: str, basis: str,
                    source_object_id: int | None) -> None:
    """Record a claim made outside the documents (the practice-management import: ``("client", "imported")``)
    and settle the matter's roles again (:func:`settle_matter_roles`)."""
    roles_store.record_matter_role(conn, matter_key, matter_id, entity_id, role, basis, RANKS[basis], source_object_id)
    settle_matter_roles(conn, matter_key, matter_id)


def _write_roles(conn: Connection, matter_key: str, matter_id: int | None, roles: dict[int, tuple[str, str]], *,
                 replace: bool) -> None:
    """Upsert ``matter_party`` rows (entity → (role, basis)); ``replace``: overwrite a different recorded role."""
    roles_store.write_matter_roles(conn, matter_key, matter_id,
                                   {e: (r, b, RANKS[b]) for e, (r, b) in roles.items()}, replace=replace)


def note_on_matter(conn: Connection, matter_key: str, matter_id: int | None,
                   roles: dict[int, tuple[str, str]]) -> None:
    """Put the entities on the matter (so the next mention resolved in this transaction or after it sees
    them there) with a provisional role; an existing row is kept. :func:`settle_matter_roles` decides."""
    _write_roles(conn, matter_key, matter_id, roles, replace=False)


#: Bases recorded on ``matter_party`` from outside the documents (kept when the roles are settled again).
OUTSIDE_BASES = ("imported",)


def _imported_client(conn: Connection, matter_key: str, matter_id: int | None) -> set[int]:
    """The entities of the matter's documents that are its practice-management client (an imported matter's
    ``client_name``): the same normalised name, or one containing the other token for token."""
    if matter_id is None:
        return set()
    client_name = roles_store.imported_client_name(conn, matter_id)
    if not client_name:
        return set()
    client = name_key(client_name)
    person = name_key(client_name, kind="person")
    found: set[int] = set()
    for r in roles_store.party_names(conn, matter_key):
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
    roles_store.lock_matter_roles(conn, matter_key)
    parties: dict[int, PartyClaims] = {}
    for r in roles_store.party_claim_rows(conn, matter_key):
        p = parties.setdefault(r.entity_id, PartyClaims(kind=r.kind))
        p.is_firm = p.is_firm or bool(r.is_firm)
        p.add(r.claims or [])
    for r in roles_store.outside_role_rows(conn, matter_key, OUTSIDE_BASES):
        parties.setdefault(r.entity_id, PartyClaims(kind=r.kind)).add([(r.role, r.basis)])
    for entity in _imported_client(conn, matter_key, matter_id):
        if entity in parties:
            parties[entity].add([("client", "imported")])
    roles = settle_roles(parties)
    roles_store.drop_roles_except(conn, matter_key, sorted(roles))
    if roles:
        _write_roles(conn, matter_key, matter_id, roles, replace=True)
        roles_store.set_document_roles(conn, matter_key, roles)
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
    lock_keys_in_order(conn, sorted({lock_key("entity-row", str(i)) for i in ids}))
    spellings: dict[int, dict[str, int]] = {i: {} for i in ids}
    for r in rows.name_spellings(conn, ids):
        spellings[r.entity_id][r.name] = int(r.n)
    former: dict[int, set[str]] = {i: set() for i in ids}
    for r in rows.former_names(conn, ids):
        former[r.entity_id].add(r.f)
    kinds = {i: r.kind for i, r in rows.entity_rows(conn, ids).items()}
    rows.rename_entities(conn, {e: canonical_name(names, kind=kinds.get(e), former=former[e])
                                for e, names in spellings.items() if names})


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
