"""A party's role on its matter, by rule (pure).

Spec: insertion-pipeline.md "Extract metadata": "role = client means the party the firm acts for:
the firm itself is recorded as advisor when firm.name is set, an entity already carrying a role on
the matter keeps it, and on an imported matter the practice-management client outranks any
document-level claim."

Roles: ``client``, ``counterparty``, ``advisor``, ``court``, ``other``. Every claim has a basis, and
bases rank (:data:`RANKS`): a matter's recorded role changes only when a strictly stronger claim
arrives, so the first claim of a kind is kept and an imported client beats everything a document
says. Law firms are advisors and courts are courts by their kind; a company or person nobody
claims for a side is the counterparty (rank 0, replaced by the first real claim).
"""

from __future__ import annotations

from dataclasses import dataclass

ROLES = ("client", "counterparty", "advisor", "court", "other")

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
        hints: (role, basis) claims of this document (:mod:`ki.entities.role_cues`, folder, client code).
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
