"""Normalised entity names: legal forms, professional descriptors, salutations, court abbreviations.

Spec: insertion-pipeline.md "Extract metadata" ("their normalized names are identical", "one name
contains the other token-for-token") (legal-form variants normalised: GmbH/G.m.b.H./
Gesellschaft mit beschränkter Haftung, AG, SE, KG, Ltd/Limited, LLC, Inc.).

A name becomes a :class:`NameKey`:

* ``base`` — the distinctive tokens, folded (``ä`` → ``ae``, ``ß`` → ``ss``, case-folded), without
  the legal form, law-firm descriptors (``Rechtsanwälte``, ``Kanzlei``, ``Attorneys at Law``, ``PartG
  mbB``, ``LLP``), salutations and titles (``Frau``, ``Herrn``, ``Dr.``) and leading articles;
* ``form`` — the canonical legal form (``gmbh``, ``ag``, ``gmbh co kg``, ``ltd``, ...) or None;
* ``law_firm`` — a descriptor said it is a law firm;
* ``key`` — the identity key: ``base`` for law firms, persons, courts and names without a form,
  ``base|form`` otherwise. Two names are *identical* when their keys are equal.

``Eiderhof Bau G.m.b.H.`` / ``EIDERHOF BAU GMBH`` / ``Eiderhof Bau Gesellschaft mit beschränkter
Haftung`` → ``eiderhof bau|gmbh``; ``Kanzlei Brückner Kranich PartG mbB`` / ``Brückner Kranich`` →
``brueckner kranich``; ``LG Hamburg`` / ``Landgericht Hamburg`` → ``landgericht hamburg``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from ki.domain.entities.persons import is_abbreviated
from ki.domain.ontology.terms import fold

_TOKEN = re.compile(r"[a-z0-9]+")

#: Legal-form token sequences (folded, single letters joined: G.m.b.H. → gmbh) → canonical form.
#: Longest first; matched at the end of a name.
LEGAL_FORMS: list[tuple[tuple[str, ...], str]] = sorted([
    (("gesellschaft", "mit", "beschraenkter", "haftung"), "gmbh"),
    (("gmbh",), "gmbh"),
    (("mbh",), "mbh"),
    (("gmbh", "co", "kg"), "gmbh co kg"),
    (("gmbh", "und", "co", "kg"), "gmbh co kg"),
    (("gmbh", "co", "kgaa"), "gmbh co kgaa"),
    (("ag", "co", "kg"), "ag co kg"),
    (("se", "co", "kg"), "se co kg"),
    (("ug", "haftungsbeschraenkt"), "ug"),
    (("ug",), "ug"),
    (("aktiengesellschaft",), "ag"),
    (("ag",), "ag"),
    (("societas", "europaea"), "se"),
    (("se",), "se"),
    (("kommanditgesellschaft", "auf", "aktien"), "kgaa"),
    (("kgaa",), "kgaa"),
    (("kommanditgesellschaft",), "kg"),
    (("kg",), "kg"),
    (("offene", "handelsgesellschaft"), "ohg"),
    (("ohg",), "ohg"),
    (("gbr",), "gbr"),
    (("ev",), "ev"),
    (("eg",), "eg"),
    (("limited",), "ltd"),
    (("ltd",), "ltd"),
    (("public", "limited", "company"), "plc"),
    (("plc",), "plc"),
    (("limited", "liability", "company"), "llc"),
    (("llc",), "llc"),
    (("incorporated",), "inc"),
    (("inc",), "inc"),
    (("corporation",), "corp"),
    (("corp",), "corp"),
    (("bv",), "bv"),
    (("besloten", "vennootschap"), "bv"),
    (("nv",), "nv"),
    (("aktiebolag",), "ab"),
    (("ab",), "ab"),
    (("as",), "as"),
    (("oy",), "oy"),
    (("sa",), "sa"),
    (("sas",), "sas"),
    (("sarl",), "sarl"),
    (("srl",), "srl"),
    (("spa",), "spa"),
    (("lp",), "lp"),
], key=lambda item: -len(item[0]))

#: Law-firm descriptors: dropped from the base, and they make the name a law firm's.
LAW_FIRM_SEQUENCES: list[tuple[str, ...]] = sorted([
    ("rechtsanwaelte",), ("rechtsanwaltsgesellschaft",), ("rechtsanwaltskanzlei",), ("anwaltskanzlei",),
    ("kanzlei",), ("rechtsanwalt",), ("rechtsanwaeltin",), ("attorneys", "at", "law"), ("attorneys",),
    ("solicitors",), ("law", "firm"), ("lawyers",), ("partg", "mbb"), ("partg",), ("partgmbb",),
    ("partnerschaftsgesellschaft", "mbb"), ("partnerschaftsgesellschaft",), ("llp",), ("mbb",),
    ("patentanwaelte",), ("steuerberater",), ("notare",), ("advocaten",), ("advocatenkantoor",), ("avocats",),
    ("advocates",), ("partnerschaft", "mbb"), ("partnerschaft",), ("rechtsanwaelte", "partnerschaft", "mbb"),
    ("rechtsanwaltsgesellschaft", "mbh"), ("notarissen",),
], key=lambda s: -len(s))

#: Words that describe a company or a party's capacity but never name one: a name made of these alone
#: (``PRIVATE COMPANY LIMITED``, ``Incorporated``, ``Buyer's Solicitors``) is a description or a role label.
DESCRIPTIVE_WORDS = frozenset("""
a an the this that its their our your of by in and or with for to private public unlimited limited company companies
shares share guarantee incorporated registered registration liability partnership corporation corporate group
holding body entity firm new old said above below s
buyer buyers seller sellers purchaser purchasers vendor vendors landlord landlords tenant tenants lender lenders
borrower borrowers guarantor guarantors employer employee claimant claimants defendant defendants applicant
respondent appellant client clients counterparty target investor investors shareholder shareholders subscriber
agent trustee trustees assignor assignee licensor licensee supplier customer contractor manager managers party
parties other side opposing
kaeufer kaeuferin verkaeufer verkaeuferin mieter mieterin vermieter vermieterin klaeger klaegerin beklagte beklagter
beklagten arbeitgeber arbeitgeberin arbeitnehmer arbeitnehmerin mandant mandantin mandantschaft gesellschaft
gegenseite gegner gegnerin antragsteller antragstellerin antragsgegner antragsgegnerin auftraggeber auftragnehmer
koper verkoper huurder verhuurder eiser eiseres gedaagde werkgever werknemer client cliente acheteur vendeur
bailleur preneur demandeur defendeur
""".split())

#: Salutations, titles and articles dropped wherever they stand at the start of a name.
LEADING_NOISE = frozenset({
    "herr", "herrn", "frau", "mr", "mrs", "ms", "miss", "dr", "prof", "professor", "dipl", "ing", "med", "jur",
    "der", "die", "das", "den", "dem", "des", "the", "firma", "fa", "messrs",
})
#: Titles dropped anywhere inside a name.
INNER_NOISE = frozenset({"dr", "prof"})
#: Words joining a name's parts (``Fairbairn & Stroud`` = ``Fairbairn and Stroud`` = ``Fairbairn Stroud``).
CONJUNCTIONS = frozenset({"und", "and", "en", "et"})

#: Court abbreviations (folded) → spelled out.
COURT_ABBREVIATIONS = {
    "lg": "landgericht", "olg": "oberlandesgericht", "arbg": "arbeitsgericht", "lag": "landesarbeitsgericht",
    "bag": "bundesarbeitsgericht", "bgh": "bundesgerichtshof", "vg": "verwaltungsgericht",
    "ovg": "oberverwaltungsgericht", "fg": "finanzgericht", "sg": "sozialgericht", "amtsg": "amtsgericht",
    "kg": "kammergericht",
}
COURT_WORDS = ("gericht", "gerichtshof")
#: English courts named by their place before or after the court (``London Central Employment Tribunal`` =
#: ``Employment Tribunal (London Central)``, ``Leeds County Court`` = ``County Court at Leeds``): the court's
#: words first, then the place.
ENGLISH_COURT_HEADS: list[tuple[str, ...]] = sorted([
    ("employment", "tribunal"), ("employment", "appeal", "tribunal"), ("county", "court"), ("crown", "court"),
    ("family", "court"), ("magistrates", "court"),
], key=lambda s: -len(s))


def _court_order(toks: list[str]) -> list[str]:
    """An English court's tokens in one order: the court's words, then its place (``at`` dropped)."""
    for head in ENGLISH_COURT_HEADS:
        n = len(head)
        for i in range(len(toks) - n + 1):
            if tuple(toks[i:i + n]) == head:
                place = [t for t in [*toks[i + n:], *toks[:i]] if t != "at"]
                return [*head, *place]
    return toks


@dataclass(frozen=True)
class NameKey:
    """A normalised name (see module doc).

    Attributes:
        base: distinctive tokens (folded), in order.
        form: canonical legal form or None.
        law_firm: a law-firm descriptor was present.
        court: the name is a court's.
    """

    base: tuple[str, ...]
    form: str | None
    law_firm: bool = False
    court: bool = False

    @property
    def key(self) -> str:
        """The identity key (``base`` or ``base|form``)."""
        base = " ".join(self.base)
        if self.form and not self.law_firm and not self.court:
            return f"{base}|{self.form}"
        return base

    @property
    def empty(self) -> bool:
        return not self.base


def _raw_tokens(name: str) -> list[str]:
    toks = _TOKEN.findall(fold(name))
    out: list[str] = []
    i = 0
    while i < len(toks):
        # Join runs of single letters: G.m.b.H. → gmbh, B.V. → bv, L.L.C. → llc, S.A. → sa.
        if len(toks[i]) == 1 and toks[i].isalpha():
            j = i
            while j < len(toks) and len(toks[j]) == 1 and toks[j].isalpha():
                j += 1
            if j - i >= 2:
                out.append("".join(toks[i:j]))
                i = j
                continue
        tok = toks[i]
        out.append("und" if tok == "u" else tok)
        i += 1
    # "GmbH & Co. KG": the ampersand vanished already; "und" between gmbh and co stays for the pattern.
    return out


def _strip_suffix(toks: list[str], patterns) -> tuple[list[str], tuple[str, ...] | None]:
    for pattern in patterns:
        pat = pattern[0] if isinstance(pattern[0], tuple) else pattern
        n = len(pat)
        if n <= len(toks) and tuple(toks[-n:]) == pat:
            return toks[:-n], pattern
    return toks, None


@lru_cache(maxsize=65536)
def name_key(name: str, *, kind: str | None = None) -> NameKey:
    """Normalise ``name`` (as written) into a :class:`NameKey` (pure; cached).

    ``kind`` (``company``, ``law_firm``, ``person``, ``court``) only sharpens the result: a court's
    abbreviation is spelled out, a person's name keeps no legal form.
    """
    toks = _raw_tokens(name)
    first = toks[0] if toks else ""
    court = kind == "court" or (kind is None and bool(first) and (
        (first in COURT_ABBREVIATIONS and first != "kg" and len(toks) >= 2)
        or first.endswith(("gericht", "gerichts", "gerichtshof"))))
    if court:
        if toks and toks[0] in COURT_ABBREVIATIONS:
            toks = [COURT_ABBREVIATIONS[toks[0]], *toks[1:]]
        toks = [t[:-1] if t.endswith("gerichts") else t for t in toks]
        return NameKey(tuple(_court_order([t for t in toks if t not in LEADING_NOISE])), None, court=True)
    form: str | None = None
    law_firm = kind == "law_firm"
    changed = True
    while changed and toks:
        changed = False
        if kind != "person":
            rest, pat = _strip_suffix(toks, [p for p, _ in LEGAL_FORMS])
            if pat is not None and rest:
                form = form or dict(LEGAL_FORMS)[pat]
                toks, changed = rest, True
                continue
        rest, pat = _strip_suffix(toks, LAW_FIRM_SEQUENCES)
        if pat is not None and rest:
            law_firm, toks, changed = True, rest, True
    # Descriptors at the front ("Kanzlei Brückner Kranich") or inside ("X Rechtsanwälte Y").
    kept: list[str] = []
    i = 0
    while i < len(toks):
        for seq in LAW_FIRM_SEQUENCES:
            if tuple(toks[i:i + len(seq)]) == seq and len(toks) > len(seq):
                law_firm = True
                i += len(seq)
                break
        else:
            kept.append(toks[i])
            i += 1
    while kept and kept[0] in LEADING_NOISE:
        kept = kept[1:]
    kept = [t for t in kept if t not in INNER_NOISE and t not in CONJUNCTIONS] or kept
    if kind == "person":
        form, law_firm = None, False
    return NameKey(tuple(kept), form, law_firm=law_firm)


#: The words of legal forms and law-firm descriptors: a name of these alone ("Limited", "Solicitors") names nobody.
_FORM_WORDS = frozenset(t for seq in [*(p for p, _ in LEGAL_FORMS), *LAW_FIRM_SEQUENCES] for t in seq)


def is_party_name(name: str, *, kind: str | None = None) -> bool:
    """Whether ``name`` can name a party: it has a proper-name head — a word before its legal form or
    descriptor that is not an article, a description or a role (:data:`DESCRIPTIVE_WORDS`).

    ``Harbour Crest Holdings Limited`` / ``Fairbairn & Stroud`` / ``Landgericht Hamburg`` → True;
    ``PRIVATE COMPANY LIMITED`` (a company limited by shares), ``Incorporated``, ``Limited``, ``Buyer's
    Solicitors``, ``the Seller's solicitors``, ``Company Limited`` → False. Persons and courts are judged by
    their own rules elsewhere (always True here).
    """
    if kind in ("person", "court"):
        return True
    key = name_key(name, kind=kind)
    if key.court:
        return True
    return any(t not in DESCRIPTIVE_WORDS and t not in _FORM_WORDS and not t.isdigit() for t in key.base)


def contains_tokens(longer: tuple[str, ...], shorter: tuple[str, ...]) -> bool:
    """Whether ``shorter`` occurs in ``longer`` as a contiguous token run (token-for-token containment)."""
    n = len(shorter)
    if n == 0 or n > len(longer):
        return False
    return any(longer[i:i + n] == shorter for i in range(len(longer) - n + 1))


def forms_compatible(a: NameKey, b: NameKey) -> bool:
    """Legal forms do not contradict: equal, or at least one side states none (law firms ignore forms)."""
    if a.law_firm or b.law_firm or a.court or b.court:
        return True
    return a.form is None or b.form is None or a.form == b.form


def contained(a: NameKey, b: NameKey) -> bool:
    """One name contains the other token-for-token and their legal forms do not contradict.

    ``Feldmann Spedition`` ⊂ ``Feldmann Spedition AG``; ``Nagel Kollegen`` ⊂ ``Dr. Nagel & Kollegen
    Rechtsanwälte``; a one-token base (``Kessler``) never counts as containment of a longer one —
    a single word is too weak to be corroborated into an identity.
    """
    if not forms_compatible(a, b) or a.empty or b.empty:
        return False
    short, long_ = (a.base, b.base) if len(a.base) <= len(b.base) else (b.base, a.base)
    if len(short) < 2 and short != long_:
        return False
    return contains_tokens(long_, short)


#: Salutations and academic titles a display name avoids (folded tokens).
TITLES = frozenset({"herr", "herrn", "frau", "mr", "mrs", "ms", "miss", "dr", "prof", "professor", "dipl", "ing",
                    "messrs", "mevrouw", "mevr", "dhr", "heer", "mme", "mlle", "monsieur", "madame"})


def _titled(toks: list[str]) -> bool:
    """A salutation or academic title anywhere in the name's tokens."""
    return any(t in TITLES for t in toks)


def _shouting(spelling: str, kind: str | None) -> bool:
    """The name's distinctive words are all capitals (a letterhead: ``BRANDT KOLLMAR Rechtsanwälte``)."""
    base = set(name_key(spelling, kind=kind).base)
    words = [w for w in re.findall(r"[^\W\d_]+", spelling) if fold(w) in base]
    letters = [c for w in words for c in w]
    return len(letters) > 3 and all(c.isupper() for c in letters)


def canonical_name(spellings: dict[str, int], *, kind: str | None = None, former: Iterable[str] = ()) -> str:
    """The name an entity is shown by, from the spellings its documents use (spelling → how many documents).

    A function of the spellings alone, so every processing order names the entity alike: a person's name
    written out before its initials (``Nicola Ogilvie`` over ``N. Ogilvie``), a spelling without a
    salutation or academic title before one with (``Jonas Weller`` over ``Dr. Jonas Weller``, ``Herrn Jonas
    Weller``), a spelling whose distinctive words are not all capitals before a letterhead's
    (``Brandt Kollmar Rechtsanwälte`` over ``BRANDT KOLLMAR Rechtsanwälte``), a written-out court before its
    abbreviation (``Arbeitsgericht Bremen`` over ``ArbG Bremen``), then the spelling most documents use, then
    the shorter, then the first in code-point order. A spelling whose key is one of the ``former`` names
    (``Larkspur Estates Ltd`` of ``Larkspur Holdings Ltd (formerly Larkspur Estates Ltd)``) comes last.

    Raises: ValueError for no spellings.
    """
    if not spellings:
        raise ValueError("an entity needs at least one spelling")
    former_keys = {name_key(f, kind=kind).key for f in former}

    def rank(spelling: str) -> tuple:
        toks = _raw_tokens(spelling)
        initials = kind == "person" and is_abbreviated(spelling)
        abbreviated = kind == "court" and bool(toks) and toks[0] in COURT_ABBREVIATIONS
        was = name_key(spelling, kind=kind).key in former_keys
        return (was, initials, _titled(toks), _shouting(spelling, kind), abbreviated, -spellings[spelling],
                len(spelling), spelling)

    return min(spellings, key=rank)
