"""Which entity a mention is: the resolution rules, as a pure function over candidates.

Spec: insertion-pipeline.md "Extract metadata": "A mention links to an entity the firm already holds
when the two share a typed identifier, when their normalized names are identical or the mention's
name is already on that entity's alias ledger, or when one name contains the other token-for-token
and something beyond the name agrees — the entity is already on this matter, shares a matter with
another party named on this document, or acts on another matter for this matter's client. Anything
weaker is left to the agent, and a new entity created next to a known same-name candidate records
that candidate on its own provenance.resolution, so it stays countable. Two companies that genuinely
share a name are kept apart by a contradicting register identifier".

Rules, in order (the first that applies decides; ``Resolution.rule`` names it):

1. ``identifier`` — a shared register number / VAT id / LEI.
2. candidates whose register identifiers contradict the mention's are out (``contradicted``).
3. ``name`` / ``alias`` — identical normalised name, or the name is on the alias ledger; among several
   (homonyms without identifiers) the one on this matter, then the one sharing a matter with another
   party of this document, then the oldest.
4. ``containment`` — token-for-token containment plus corroboration (see above), between names of one
   sort only: a person's name inside a company's ("Niamh Ogilvie Limited", or a list the extractor read
   as one name) never makes the company that person, nor the other way round.
5. ``new`` — a new entity; same-name candidates (contradicted, or contained but uncorroborated) are
   listed in ``same_name_candidates``. Its identity key is the name key, or, when a contradicted
   homonym already holds that key, the key plus ``#`` and the distinguishing register number.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ki.domain.entities.identifiers import Identifier, contradicts, shares_identifier
from ki.domain.entities.names import NameKey, contained


@dataclass(frozen=True)
class Candidate:
    """An entity the firm holds, as the rules see it.

    Attributes:
        entity_id / name / kind: the row.
        identity_key: its unique identity key.
        names: name keys of its canonical name and every alias.
        identifiers: its typed identifiers.
        matters: matter keys it is a party on.
    """

    entity_id: int
    name: str
    kind: str
    identity_key: str
    names: tuple[NameKey, ...]
    identifiers: tuple[Identifier, ...] = ()
    matters: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Context:
    """What the document and its matter add beyond the name.

    Attributes:
        matter_key: the matter of the document (None: unassigned).
        co_party_matters: matter keys of the *other* parties already resolved on this document.
        client_matters: matter keys on which this matter's client acts as client (this matter excluded).
    """

    matter_key: str | None = None
    co_party_matters: frozenset[str] = frozenset()
    client_matters: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Resolution:
    """The verdict for one mention.

    Attributes:
        entity_id: the linked entity, or None for a new one.
        rule: ``identifier``, ``name``, ``alias``, ``containment`` or ``new``.
        identity_key: for ``new``: the key the new row takes.
        same_name_candidates: ids of known same-name entities not linked (``provenance.resolution``).
        contradicted: ids ruled out by a contradicting register identifier.
        corroboration: for ``containment``: ``same_matter``, ``co_party`` or ``client_matter``.
    """

    entity_id: int | None
    rule: str
    identity_key: str | None = None
    same_name_candidates: tuple[int, ...] = ()
    contradicted: tuple[int, ...] = ()
    corroboration: str | None = None
    detail: dict = field(default_factory=dict)


def _prefer(cands: list[Candidate], ctx: Context) -> Candidate:
    def rank(c: Candidate) -> tuple:
        return (ctx.matter_key is not None and ctx.matter_key in c.matters,
                bool(c.matters & ctx.co_party_matters), bool(c.matters & ctx.client_matters), -c.entity_id)
    return max(cands, key=rank)


def _corroboration(c: Candidate, ctx: Context) -> str | None:
    if ctx.matter_key is not None and ctx.matter_key in c.matters:
        return "same_matter"
    if c.matters & ctx.co_party_matters:
        return "co_party"
    if c.matters & ctx.client_matters:
        return "client_matter"
    return None


def _distinguishing(identifiers: list[Identifier]) -> str | None:
    for kind in ("register_number", "lei", "vat_id"):
        for ident in identifiers:
            if ident.type == kind:
                return f"{kind}:{ident.value_key}" + (f"@{ident.issuer_key}" if ident.issuer_key else "")
    return None


def resolve_mention(key: NameKey, identifiers: list[Identifier], candidates: list[Candidate],
                    ctx: Context, *, alias_keys: dict[int, set[str]] | None = None,
                    kind: str | None = None) -> Resolution:
    """Apply the rules (module doc) to one mention.

    Args:
        key: the mention's normalised name.
        identifiers: typed identifiers written next to it.
        candidates: entities that might be it (same key, shared token, shared identifier).
        ctx: matter and co-party context.
        alias_keys: entity id → keys on its alias ledger (to tell ``alias`` from ``name``).
        kind: the mention's kind (``person``, ``company`` …); given, containment links only a person to a
            person and a non-person to a non-person.
    Returns: :class:`Resolution`.
    """
    alias_keys = alias_keys or {}
    contradicted = [c for c in candidates if contradicts(identifiers, list(c.identifiers))]
    shared = [c for c in candidates if shares_identifier(identifiers, list(c.identifiers)) and c not in contradicted]
    if shared:
        named = [c for c in shared if any(n.key == key.key or contained(n, key) for n in c.names)]
        return Resolution(_prefer(named or shared, ctx).entity_id, "identifier",
                          contradicted=tuple(sorted(c.entity_id for c in contradicted)))
    open_ = [c for c in candidates if c not in contradicted]
    same = [c for c in open_ if any(n.key == key.key for n in c.names)]
    if same:
        chosen = _prefer(same, ctx)
        on_ledger = key.key in alias_keys.get(chosen.entity_id, set()) and chosen.identity_key.split("#")[0] != key.key
        others = tuple(sorted(c.entity_id for c in same if c is not chosen))
        return Resolution(chosen.entity_id, "alias" if on_ledger else "name", same_name_candidates=others,
                          contradicted=tuple(sorted(c.entity_id for c in contradicted)))
    corroborated = []
    uncorroborated = []
    for c in open_:
        if kind is not None and (kind == "person") != (c.kind == "person"):
            continue
        if any(contained(n, key) for n in c.names):
            why = _corroboration(c, ctx)
            (corroborated if why else uncorroborated).append((c, why))
    if corroborated:
        chosen, why = max(corroborated, key=lambda cw: (cw[1] == "same_matter", cw[1] == "co_party", -cw[0].entity_id))
        return Resolution(chosen.entity_id, "containment", corroboration=why,
                          contradicted=tuple(sorted(c.entity_id for c in contradicted)))
    same_name = [c for c in contradicted if any(n.key == key.key for n in c.names)]
    identity_key = key.key
    if any(c.identity_key == key.key for c in same_name):
        suffix = _distinguishing(identifiers)
        identity_key = f"{key.key}#{suffix}" if suffix else key.key
    listed = sorted({c.entity_id for c in same_name} | {c.entity_id for c, _ in uncorroborated})
    return Resolution(None, "new", identity_key=identity_key, same_name_candidates=tuple(listed),
                      contradicted=tuple(sorted(c.entity_id for c in contradicted)))
