"""Parties of one document → entities and roles, in one transaction under the name locks.

Spec: insertion-pipeline.md "Extract metadata" (resolution by rule; a new entity next to a same-name
candidate records it on ``provenance.resolution``; roles: the firm is advisor, a role on the matter is
kept, an imported matter's client outranks document claims). Issue 5: two documents naming the same
new company at once → one entity row (advisory locks on the normalised names, then the unique
identity key).

:func:`resolve_parties` runs inside the caller's transaction (``engine.begin()``): it takes the locks,
resolves every mention (:func:`ki.entities.resolve.resolve_mention`), creates entities, extends the
alias ledger and identifiers, decides each role (:func:`ki.entities.roles.decide_role`) and records
stronger roles on the matter (propagated to the matter's other documents). It returns the party
rows to write; no model is called here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from ki.entities import store
from ki.entities.identifiers import ENTITY_TYPES
from ki.entities.mentions import Mention
from ki.entities.names import NameKey, name_key
from ki.entities.resolve import Context, Resolution, resolve_mention
from ki.entities.roles import RANKS, decide_role
from ki.metadata.matter import MatterContext

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
                                        if not (m.is_firm and firm_name)])
    resolved: list[tuple[Mention, int, Resolution]] = []
    entity_matters: dict[int, frozenset[str]] = {}
    client_matters = store.client_matters(conn, matter.key) if matter.key else frozenset()
    for m in sorted(mentions, key=lambda x: (_order(x), x.start)):
        key = _resolution_key(m, firm_name)
        idents = [i for i in m.identifiers if i.type in ENTITY_TYPES]
        candidates, alias_keys = store.load_candidates(conn, project_id, key, idents)
        co = frozenset().union(*(entity_matters[e] for _, e, _ in resolved)) if resolved else frozenset()
        ctx = Context(matter_key=matter.key, co_party_matters=co, client_matters=client_matters)
        res = resolve_mention(key, idents, candidates, ctx, alias_keys=alias_keys)
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
                    store.relink_homonym(conn, matter.key, c.entity_id, entity_id)
        store.add_alias(conn, entity_id, m.name, m.key, source_object_id)
        if m.is_firm and firm_name:
            store.add_alias(conn, entity_id, firm_name, key, source_object_id)
        store.add_identifiers(conn, entity_id, idents)
        resolved.append((m, entity_id, res))
        entity_matters[entity_id] = next((c.matters for c in candidates if c.entity_id == entity_id), frozenset())
    return _roles(conn, resolved, matter, source_object_id)


def _roles(conn: Connection, resolved: list[tuple[Mention, int, Resolution]], matter: MatterContext,
           source_object_id: int) -> list[PartyRow]:
    existing = store.matter_roles(conn, matter.key) if matter.key else {}
    merged: dict[int, tuple[Mention, Resolution, list[tuple[str, str]]]] = {}
    for m, entity_id, res in sorted(resolved, key=lambda x: x[0].start):
        if entity_id in merged:
            merged[entity_id][2].extend(h for h in m.hints if h not in merged[entity_id][2])
            merged[entity_id][0].identifiers.extend(i for i in m.identifiers
                                                    if i not in merged[entity_id][0].identifiers)
        else:
            merged[entity_id] = (m, res, list(m.hints))
    rows = []
    # Stronger claims first, so a stated client is recorded before weaker claims are judged against it.
    order = sorted(merged.items(), key=lambda kv: -max((RANKS.get(b, 0) for _, b in kv[1][2]), default=0))
    for entity_id, (m, res, hints) in order:
        others_client = max((RANKS[b] for e, (r, b) in existing.items() if r == "client" and e != entity_id),
                            default=-1)
        # An imported matter's practice-management client is recorded with basis "imported" (rank 7) by the
        # importer (store.set_matter_role); it outranks every document claim for itself and for others.
        decision = decide_role(kind=m.kind, is_firm=m.is_firm, hints=hints, existing=existing.get(entity_id),
                               matter_client_rank=others_client)
        if matter.key and decision.matter_update:
            store.set_matter_role(conn, matter.key, matter.matter_id, entity_id, decision.role, decision.basis,
                                  source_object_id)
            existing[entity_id] = (decision.role, decision.basis)
        rows.append((m.start, PartyRow(entity_id=entity_id, name=m.name, kind=m.kind, role=decision.role,
                                       role_basis=decision.basis,
                                       identifiers=[i.as_dict() for i in m.identifiers if i.type in ENTITY_TYPES],
                                       resolution={"rule": res.rule, "same_name_candidates":
                                                   list(res.same_name_candidates),
                                                   "contradicted": list(res.contradicted),
                                                   "corroboration": res.corroboration})))
    return [row for _, row in sorted(rows, key=lambda x: x[0])]
