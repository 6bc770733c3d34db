"""A party's role on its matter, by rule (pure).

Spec: insertion-pipeline.md "Extract metadata": "role = client means the party the firm acts for:
the firm itself is recorded as advisor when firm.name is set, an entity already carrying a role on
the matter keeps it, and on an imported matter the practice-management client outranks any
document-level claim."

Roles: ``client``, ``counterparty``, ``advisor``, ``court``, ``other``. Every claim has a basis, and
bases rank (:data:`RANKS`). A party's role on a matter is a function of *every* claim the matter's
documents (and the practice-management import) make — :func:`settle_roles` — never of the order
they arrive in: the strongest claim wins, a tie between roles goes by
:data:`ROLE_PRIORITY`, an imported client beats everything a document says, and a client claim
weaker than another party's strongest client claim is ignored (one client per matter unless the
evidence is as strong). Law firms are advisors and courts are courts by their kind; a company or
person nobody claims for a side is the counterparty (basis ``default``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

ROLES = ("client", "counterparty", "advisor", "court", "other")
#: Which role wins a tie between claims of equal rank (earlier wins).
ROLE_PRIORITY = ("client", "counterparty", "other", "advisor", "court")

#: Strength of the evidence behind a role.
RANKS: dict[str, int] = {
    "firm": 9,          # the firm itself (firm.name / firm.aliases)
    "kind": 8,          # a law firm is an advisor, a court a court
    "imported": 7,      # the practice-management client of an imported matter
    "stated": 4,        # the document says so ("unsere Mandantin", engagement letter addressee, ...)
    "folder": 3,        # the matter folder names it first ("<client> gg. <opponent>", "<client> - <subject>")
    "code": 2,          # the matter reference's client code (THOR-2023-013 → Thornfield ...)
    "inferred": 1,      # the document suggests it (writes to the firm, shares are sold)
    "default": 0,       # nobody claimed it: counterparty
}


@dataclass(frozen=True)
class RoleDecision:
    """The role recorded for a party on this document, and whether the matter's record changes.

    Attributes:
        role / basis: the effective role and why (a :data:`RANKS` key).
        rank: ``RANKS[basis]``.
        matter_update: the matter-level record must be set to (role, basis) (a stronger claim, or none yet).
    """

    role: str
    basis: str
    matter_update: bool

    @property
    def rank(self) -> int:
        return RANKS[self.basis]


def decide_role(*, kind: str, is_firm: bool, hints: list[tuple[str, str]], existing: tuple[str, str] | None,
                imported_client: bool = False, matter_client_rank: int = -1) -> RoleDecision:
    """The role of one party on its matter.

    Args:
        kind: ``company``, ``law_firm``, ``person`` or ``court``.
        is_firm: the party is the firm itself.
        hints: (role, basis) claims of this document (:mod:`ki.domain.entities.role_cues`, folder, client code).
        existing: (role, basis) the matter already records for this entity, or None.
        imported_client: the entity is the imported matter's practice-management client.
        matter_client_rank: rank of the strongest ``client`` another entity holds on the matter
            (-1: none). A weaker ``client`` claim for this entity is ignored — one client per matter
            unless the evidence is as strong.
    Returns: :class:`RoleDecision`.
    """
    if is_firm:
        return RoleDecision("advisor", "firm", existing != ("advisor", "firm"))
    if kind == "law_firm":
        return RoleDecision("advisor", "kind", existing != ("advisor", "kind"))
    if kind == "court":
        return RoleDecision("court", "kind", existing != ("court", "kind"))
    claims = [h for h in hints if h[0] in ROLES and h[1] in RANKS]
    claims = [h for h in claims if not (h[0] == "client" and RANKS[h[1]] < matter_client_rank)]
    if imported_client:
        claims.append(("client", "imported"))
    best = max(claims, key=lambda h: (RANKS[h[1]], h[0] == "client"), default=None)
    if existing is not None and (best is None or RANKS[existing[1]] >= RANKS[best[1]]):
        return RoleDecision(existing[0], existing[1], False)
    if best is None:
        return RoleDecision("counterparty", "default", True)
    return RoleDecision(best[0], best[1], True)


@dataclass
class PartyClaims:
    """Everything a matter's documents claim about one party.

    Attributes:
        kind: ``company``, ``law_firm``, ``person`` or ``court``.
        is_firm: the party is the firm itself.
        claims: (role, basis) pairs from every document (and ``("client", "imported")`` for an imported client).
    """

    kind: str
    is_firm: bool = False
    claims: set[tuple[str, str]] = field(default_factory=set)

    def add(self, claims: Iterable[tuple[str, str] | list[str]]) -> None:
        """Add (role, basis) claims (lists from JSON accepted); unknown roles or bases are ignored."""
        for role, basis in claims:
            if role in ROLES and basis in RANKS:
                self.claims.add((role, basis))


def _claim_key(claim: tuple[str, str]) -> tuple[int, int]:
    return RANKS[claim[1]], -ROLE_PRIORITY.index(claim[0])


def settle_roles(parties: Mapping[int, PartyClaims]) -> dict[int, tuple[str, str]]:
    """Each party's (role, basis) on one matter from all the claims made about it (see module doc).

    Args:
        parties: entity id → its :class:`PartyClaims` on the matter.
    Returns: entity id → (role, basis). Pure; the same claims give the same roles in any order.
    """
    fixed: dict[int, tuple[str, str]] = {}
    best: dict[int, tuple[str, str] | None] = {}
    for entity, p in parties.items():
        if p.is_firm:
            fixed[entity] = ("advisor", "firm")
        elif p.kind == "law_firm":
            fixed[entity] = ("advisor", "kind")
        elif p.kind == "court":
            fixed[entity] = ("court", "kind")
        else:
            best[entity] = max(p.claims, key=_claim_key, default=None)
    client_rank = {e: RANKS[b[1]] for e, b in best.items() if b is not None and b[0] == "client"}
    out = dict(fixed)
    for entity in best:
        others = max((r for e, r in client_rank.items() if e != entity), default=-1)
        claims = [c for c in parties[entity].claims if not (c[0] == "client" and RANKS[c[1]] < others)]
        out[entity] = max(claims, key=_claim_key, default=("counterparty", "default"))
    return out
