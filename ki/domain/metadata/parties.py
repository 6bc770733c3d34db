"""Parties of one document → entities and roles, in one transaction under the name locks.

Spec: insertion-pipeline.md "Extract metadata" (resolution by rule; a new entity next to a same-name
candidate records it on ``provenance.resolution``; roles: the firm is advisor, a role on the matter is
kept, an imported matter's client outranks document claims). Two documents naming the same
new company at once → one entity row (advisory locks on the normalised names, then the unique
identity key).

:func:`resolve_parties` runs inside the caller's transaction (``engine.begin()``): it takes the locks,
resolves every mention (:func:`ki.domain.entities.resolve.resolve_mention`), creates entities, extends the
alias ledger and identifiers, and gives each party the role this document alone claims
(:func:`ki.domain.entities.roles.settle_roles`); it returns the party rows to write. Once they are written,
:func:`settle_parties` settles the matter's roles over all its documents and the entities' names
over all documents naming them. No model is called here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from ki.domain.entities import store
from ki.domain.entities.abbreviations import (
    FolderScope,
    lock_matters,
    settle_abbreviations,
    settle_folder_abbreviations,
)
from ki.domain.entities.identifiers import ENTITY_TYPES
from ki.domain.entities.mentions import Mention
from ki.domain.entities.names import NameKey, name_key
from ki.domain.entities.resolve import Context, Resolution, resolve_mention
from ki.domain.entities.roles import PartyClaims, settle_roles
from ki.domain.metadata.matter import MatterContext

#: The order mentions are resolved in: the firm, then those with identifiers, then the rest.
_ORDER = {"firm": 0, "identified": 1, "other": 2}


@dataclass(frozen=True)
class PartyRow:
    """One resolved party of the document (a ``document_party`` row)."""

    entity_id: int
    name: str
    kind: str
    role: str
    role_basis: str
    identifiers: list[dict[str, str]]
    resolution: dict[str, Any]


def _resolution_key(m: Mention, firm_name: str) -> NameKey:
    return name_key(firm_name, kind="law_firm") if m.is_firm and firm_name else m.key


def _order(m: Mention) -> int:
    if m.is_firm:
        return _ORDER["firm"]
    return _ORDER["identified"] if any(i.type in ENTITY_TYPES for i in m.identifiers) else _ORDER["other"]


def resolve_parties(conn: Connection, *, project_id: int, source_object_id: int, mentions: list[Mention],
                    matter: MatterContext, firm_name: str, agent_entity_ids: dict[int, int] | None = None
                    ) -> list[PartyRow]:
    """Resolve ``mentions`` to entities and decide their roles (see module doc).

    Args:
        conn: an open transaction (committed by the caller).
        project_id / source_object_id: where the document lives.
        mentions: the document's mentions, with identifiers and role hints.
        matter: the document's matter context.
        firm_name: ``firm.name`` (the firm's mentions resolve to one entity under this name).
        agent_entity_ids: ``id(mention)`` → entity id the agent named via ``search_entities``; used only where
            the rules leave the choice open ("anything weaker is left to the agent").
    Returns: one :class:`PartyRow` per distinct entity, in order of first mention.
    """
    agent_entity_ids = agent_entity_ids or {}
    mentions = [m for m in mentions if not m.key.empty or m.is_firm]
    # The firm resolves by one fixed identity key (the unique constraint settles a race), so it takes no name
    # lock: otherwise every document naming the firm would wait for every other one.
    store.lock_names(conn, project_id, [_resolution_key(m, firm_name) for m in mentions
                                        if not (m.is_firm and firm_name)]
                     + [name_key(f, kind=m.kind) for m in mentions for f in m.former_names])
    resolved: list[tuple[Mention, int, Resolution]] = []
    relinked: set[int] = set()
    merged_matters: set[str] = set()
    entity_matters: dict[int, frozenset[str]] = {}
    client_matters = store.client_matters(conn, matter.key) if matter.key else frozenset()
    for m in sorted(mentions, key=lambda x: (_order(x), x.start)):
        key = _resolution_key(m, firm_name)
        idents = [i for i in m.identifiers if i.type in ENTITY_TYPES]
        candidates, alias_keys = store.load_candidates(conn, project_id, key, idents)
        co = frozenset().union(*(entity_matters[e] for _, e, _ in resolved)) if resolved else frozenset()
        ctx = Context(matter_key=matter.key, co_party_matters=co, client_matters=client_matters)
        res = resolve_mention(key, idents, candidates, ctx, alias_keys=alias_keys,
                             kind="law_firm" if m.is_firm else m.kind)
        if m.former_names:  # renamed: the entity may be known by its former name, or under both as two
            former = _by_former_name(conn, project_id, m, idents, ctx)
            if former is not None and res.entity_id is None:
                res = former
            elif former is not None and former.entity_id != res.entity_id:
                merged_matters |= store.merge_entities(conn, res.entity_id, former.entity_id)
                relinked.add(former.entity_id)
        entity_id = res.entity_id
        suggested = agent_entity_ids.get(id(m))
        if entity_id is None and suggested is not None and suggested in res.same_name_candidates \
                and suggested not in res.contradicted:
            entity_id = suggested
            res = Resolution(suggested, "agent", same_name_candidates=res.same_name_candidates)
        if entity_id is None:
            kind = "law_firm" if m.is_firm else m.kind
            provenance = {"created_by": "extract_metadata", "source_object_id": source_object_id,
                          "resolution": {"rule": "new", "same_name_candidates": list(res.same_name_candidates),
                                         "contradicted": list(res.contradicted)}}
            entity_id, _ = store.create_entity(conn, project_id, kind=kind, name=firm_name if m.is_firm and firm_name
                                               else m.name, identity_key=res.identity_key or key.key,
                                               provenance=provenance)
        if matter.key and res.contradicted:
            for c in candidates:
                if c.entity_id in res.contradicted and matter.key in c.matters \
                        and any(n.key == key.key for n in c.names):
                    if store.relink_homonym(conn, matter.key, c.entity_id, entity_id):
                        relinked.add(c.entity_id)
        store.add_alias(conn, entity_id, m.name, m.key, source_object_id)
        for former in m.former_names:
            store.add_alias(conn, entity_id, former, name_key(former, kind=m.kind), source_object_id)
        if m.is_firm and firm_name:
            store.add_alias(conn, entity_id, firm_name, key, source_object_id)
        store.add_identifiers(conn, entity_id, idents)
        resolved.append((m, entity_id, res))
        entity_matters[entity_id] = next((c.matters for c in candidates if c.entity_id == entity_id), frozenset())
    rows = _roles(conn, resolved, matter, source_object_id)
    for row in rows:  # the firm's entity carries firm.name; without one it is named by its spellings like any
        if row.resolution.get("is_firm") and not firm_name:
            row.resolution["is_firm_unnamed"] = True
    if relinked and rows:  # their rows moved: settle_parties renames them too
        rows[0].resolution["relinked_from"] = sorted(relinked)
    if merged_matters and rows:  # a former name's entity was folded in: its matters' roles are settled again
        rows[0].resolution["merged_matters"] = sorted(merged_matters)
    return rows


def _by_former_name(conn: Connection, project_id: int, m: Mention, idents: list, ctx: Context
                    ) -> Resolution | None:
    """The entity a renamed company's former name resolves to (its first former name that resolves), or None."""
    for former in m.former_names:
        key = name_key(former, kind=m.kind)
        candidates, alias_keys = store.load_candidates(conn, project_id, key, idents)
        res = resolve_mention(key, idents, candidates, ctx, alias_keys=alias_keys, kind=m.kind)
        if res.entity_id is not None:
            return Resolution(res.entity_id, "former_name", corroboration=res.corroboration)
    return None


def _roles(conn: Connection, resolved: list[tuple[Mention, int, Resolution]], matter: MatterContext,
           source_object_id: int) -> list[PartyRow]:
    """One row per entity with this document's claims about it and its role by this document alone; the
    matter's roles are settled over all its documents afterwards (:func:`settle_parties`)."""
    merged: dict[int, tuple[Mention, Resolution, list[tuple[str, str]]]] = {}
    for m, entity_id, res in sorted(resolved, key=lambda x: x[0].start):
        if entity_id in merged:
            merged[entity_id][2].extend(h for h in m.hints if h not in merged[entity_id][2])
            merged[entity_id][0].identifiers.extend(i for i in m.identifiers
                                                    if i not in merged[entity_id][0].identifiers)
        else:
            merged[entity_id] = (m, res, list(m.hints))
    claims = {e: PartyClaims(kind=m.kind, is_firm=m.is_firm) for e, (m, _, _) in merged.items()}
    for e, (_, _, hints) in merged.items():
        claims[e].add(hints)
    roles = settle_roles(claims)
    if matter.key:
        store.note_on_matter(conn, matter.key, matter.matter_id, roles)
    rows = []
    for entity_id, (m, res, _) in merged.items():
        role, basis = roles[entity_id]
        rows.append((m.start, PartyRow(entity_id=entity_id, name=m.name, kind=m.kind, role=role, role_basis=basis,
                                       identifiers=[i.as_dict() for i in m.identifiers if i.type in ENTITY_TYPES],
                                       resolution={"rule": res.rule, "same_name_candidates":
                                                   list(res.same_name_candidates),
                                                   "contradicted": list(res.contradicted),
                                                   "corroboration": res.corroboration,
                                                   "claims": sorted(claims[entity_id].claims),
                                                   "is_firm": m.is_firm,
                                                   **({"former_names": m.former_names} if m.former_names else {})})))
    return [row for _, row in sorted(rows, key=lambda x: x[0])]


def settle_parties(conn: Connection, parties: list[PartyRow], matter: MatterContext, *,
                   previous_matters: Iterable[str | None] = (), folder: FolderScope | None = None) -> None:
    """After the document's party rows are written: point initials-only persons of its matter at the
    full-name person they abbreviate (:func:`ki.domain.entities.abbreviations.settle_abbreviations`), settle the
    roles of its matter over every document of the matter, and the names of its entities over every
    document naming them (functions of the estate, not of the order documents came in).

    Args:
        previous_matters: the matter keys the document's replaced party rows were on; a matter the document
            left is settled again too (its persons and roles no longer count this document).
        folder: the document's folder; its initials rows without a matter key are settled there
            (:func:`ki.domain.entities.abbreviations.settle_folder_abbreviations`) — every document settles its
            folder, as its full names may be what those rows abbreviate.
    Entities whose rows a homonym relink or an abbreviation moved (``resolution.relinked_from``) are renamed too.
    """
    merged = [k for p in parties for k in p.resolution.get("merged_matters", [])]
    keys = sorted({k for k in [matter.key, *previous_matters, *merged] if k})
    # every matter and folder lock before any entity-row lock, in one order
    lock_matters(conn, keys + ([folder.lock_name] if folder else []))
    touched = {e for p in parties for e in p.resolution.get("relinked_from", [])}
    for key in keys:
        touched |= settle_abbreviations(conn, key)
    if folder is not None:
        touched |= settle_folder_abbreviations(conn, folder)
    for key in keys:
        store.settle_matter_roles(conn, key, matter.matter_id if key == matter.key else _matter_id(key))
    store.settle_entity_names(conn, {p.entity_id for p in parties if not p.resolution.get("is_firm")
                                     or p.resolution.get("is_firm_unnamed")} | touched)


def _matter_id(matter_key: str) -> int | None:
    """The Matter row id of a ``matter:<id>`` key (a ``ref:`` key has none)."""
    kind, _, value = matter_key.partition(":")
    return int(value) if kind == "matter" and value.isdigit() else None
