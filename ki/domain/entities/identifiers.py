"""Typed identifiers: register numbers with their court, VAT ids, LEIs, and the document's own numbers.

Spec: insertion-pipeline.md "Extract metadata" ("a mention links to an entity ... when the two share a
typed identifier"; "two companies that genuinely share a name are kept apart by a contradicting
register identifier") (HRB/HRA with court, LEI, VAT id). Pure functions.

Types (``Identifier.type``): ``register_number`` (``HRB 18864`` issued by ``Amtsgericht Düsseldorf``, or
a foreign registry's number with the registry as issuer), ``vat_id``, ``lei``, ``matter_reference``,
``case_number`` (issuer: the court), ``invoice_number``, ``external_reference``. ``register_number``,
``vat_id`` and ``lei`` identify an entity (:data:`ENTITY_TYPES`); the others identify a document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ki.domain.entities.names import COURT_ABBREVIATIONS
from ki.domain.matters.references import CASE_NUMBER, FIRM_REFERENCE
from ki.domain.ontology.terms import fold

ENTITY_TYPES = frozenset({"register_number", "vat_id", "lei"})

_WS = r"[ \t\u00a0]"
GERMAN_REGISTER = re.compile(r"(?<![\w/])(HRB|HRA|PR|GnR|VR|GsR)" + _WS + r"*(\d{1,7})(?:" + _WS
                             + r"([A-Z]{1,2}))?(?![\w/])")
COURT_NAME = r"[A-ZÄÖÜ][\wäöüß.-]+(?:\s(?:am|an der|im|in der|i\.)\s[A-ZÄÖÜ][\wäöüß.-]+)?"
REGISTER_COURT = re.compile(
    r"(?:Amtsgerichts?|Registergerichts?)\s+(" + COURT_NAME + r")"
    r"|local\s+court\s+\(Amtsgericht\)\s+of\s+(" + COURT_NAME + r")"
    r"|Amtsgericht\s+\(local\s+court\)\s+of\s+(" + COURT_NAME + r")")
FOREIGN_REGISTER = re.compile(
    r"(?:registered\s+(?:with|at|in)\s+(?:the\s+)?|eingetragen\s+(?:bei|beim|im)\s+(?:der\s+|dem\s+)?)"
    r"(?P<issuer>[A-Z][\w&'. ]{2,60}?)\s+(?:under\s+(?:company\s+|registration\s+)?(?:number|no\.?)|"
    r"unter\s+(?:der\s+)?(?:Nummer|Nr\.?))\s*(?P<num>[0-9][0-9 .-]{2,16}[0-9])")
VAT = re.compile(r"(?<![\w])(DE\d{9}|ATU\d{8}|NL\d{9}B\d{2}|GB\d{9}(?:\d{3})?|FR[0-9A-Z]{2}\d{9}|BE0?\d{9,10}|"
                 r"SE\d{12}|DK\d{8}|IT\d{11}|ES[0-9A-Z]\d{7}[0-9A-Z]|LU\d{8}|PL\d{10}|CZ\d{8,10}|"
                 r"CHE-?\d{3}\.?\d{3}\.?\d{3})(?![\w])")
LEI = re.compile(r"(?<![A-Z0-9])([A-Z0-9]{18}[0-9]{2})(?![A-Z0-9])")
INVOICE = re.compile(r"(?:Rechnung(?:snummer)?|Invoice|Kostennote)\s*(?:Nr\.|No\.|Nummer|number|#)?\s*[:.]?"
                     + _WS + r"*([A-Z]{0,4}-?\d{2,4}-\d{2,6})(?![\w-])", re.IGNORECASE)
LABELLED_MATTER = re.compile(r"(?:matter(?:" + _WS + r"+(?:no\.?|number|ref(?:erence)?))?|Mandats?(?:nummer|-?Nr\.?)?)"
                             + _WS + r"*[:#]?" + _WS + r"*([A-Z]{1,6}-(?:19|20)\d{2}-\d{3,5})(?![\w-])",
                             re.IGNORECASE)
OWN_LABEL = re.compile(r"(?:Unser(?:e)?" + _WS + r"+Zeichen|Our" + _WS + r"+ref(?:erence)?|Unser" + _WS
                       + r"+Az\.?)" + _WS + r"*:?" + _WS + r"*([^\s|]+(?:" + _WS + r"[A-Z]{1,4})?)")
COURT_FOR_CASE = re.compile(r"((?:Landgericht|Amtsgericht|Arbeitsgericht|Oberlandesgericht|Landesarbeitsgericht|"
                            r"Verwaltungsgericht|Finanzgericht|Sozialgericht)\s+" + COURT_NAME + r"|(?:LG|ArbG|OLG|"
                            r"LAG|VG)\s+" + COURT_NAME + ")")


@dataclass(frozen=True)
class Identifier:
    """One typed identifier as written (``value``), with its issuer when the text names one."""

    type: str
    value: str
    issuer: str | None = None

    @property
    def value_key(self) -> str:
        """The comparable value: upper case, no spaces/dots/dashes (``HRB 173011 B`` → ``HRB173011B``)."""
        return re.sub(r"[\s.\-/]", "", self.value.upper())

    @property
    def issuer_key(self) -> str | None:
        """The folded issuer without ``Amtsgericht``/``Registergericht`` (``Amtsgericht Köln`` → ``koeln``)."""
        if not self.issuer:
            return None
        return re.sub(r"^(?:amtsgerichts?|registergerichts?)\s+", "", " ".join(fold(self.issuer).split()))

    def as_dict(self) -> dict[str, str]:
        """``{type, value[, issuer]}`` (the truth.json / export shape)."""
        out = {"type": self.type, "value": self.value}
        if self.issuer:
            out["issuer"] = self.issuer
        return out


@dataclass(frozen=True)
class Found:
    """An identifier and where it stands in the text (character offsets)."""

    identifier: Identifier
    start: int
    end: int


def same_identifier(a: Identifier, b: Identifier) -> bool:
    """Same type and value; issuers must agree when both name one (``HRB 100`` at two courts differ)."""
    if a.type != b.type or a.value_key != b.value_key:
        return False
    return a.issuer_key is None or b.issuer_key is None or a.issuer_key == b.issuer_key


def contradicts(mention: list[Identifier], entity: list[Identifier]) -> bool:
    """A register number (or VAT id, or LEI) on both sides and none in common: different legal persons.

    Spec: "Two companies that genuinely share a name are kept apart by a contradicting register
    identifier".
    """
    for kind in ENTITY_TYPES:
        mine = [i for i in mention if i.type == kind]
        theirs = [i for i in entity if i.type == kind]
        if mine and theirs and not any(same_identifier(a, b) for a in mine for b in theirs):
            return True
    return False


def shares_identifier(mention: list[Identifier], entity: list[Identifier]) -> bool:
    """At least one entity-typed identifier in common."""
    return any(same_identifier(a, b) for a in mention for b in entity if a.type in ENTITY_TYPES)


def lei_valid(value: str) -> bool:
    """ISO 17442 check digits (ISO 7064 MOD 97-10 over the 20 characters == 1)."""
    if not re.fullmatch(r"[A-Z0-9]{18}[0-9]{2}", value):
        return False
    digits = "".join(str(int(ch, 36)) for ch in value)
    return int(digits) % 97 == 1


def _clean_court(name: str) -> str:
    return " ".join(name.replace("\n", " ").split()).rstrip(".,;")


def spell_out_court(name: str) -> str:
    """``LG Hamburg`` → ``Landgericht Hamburg``, ``ArbG Köln`` → ``Arbeitsgericht Köln``; others unchanged."""
    head, _, rest = name.partition(" ")
    full = COURT_ABBREVIATIONS.get(head.casefold())
    return f"{full.capitalize()} {rest}" if full and rest else name


def _register_issuer(text: str, start: int) -> str | None:
    window = text[max(0, start - 160):start]
    courts = list(REGISTER_COURT.finditer(window))
    if courts:
        m = courts[-1]
        return "Amtsgericht " + _clean_court(next(g for g in m.groups() if g))
    after = REGISTER_COURT.match(text[start:start + 60].split(")")[0].lstrip(" (,"))
    if after:
        return "Amtsgericht " + _clean_court(next(g for g in after.groups() if g))
    return None


def find_identifiers(text: str) -> list[Found]:
    """Every typed identifier in ``text``, in order of position (duplicates kept: callers dedupe).

    Register numbers take the nearest register court before them (``… des Amtsgerichts Köln unter
    HRB 78491``, ``Amtsgericht Hannover PR 521``, ``local court (Amtsgericht) of Leipzig under HRA
    18959``) as issuer; case numbers take the nearest court named before them.
    """
    text = text or ""
    out: list[Found] = []
    taken: list[tuple[int, int]] = []

    def add(ident: Identifier, start: int, end: int) -> None:
        if any(s < end and start < e for s, e in taken):
            return
        taken.append((start, end))
        out.append(Found(ident, start, end))

    for m in GERMAN_REGISTER.finditer(text):
        value = f"{m.group(1)} {m.group(2)}" + (f" {m.group(3)}" if m.group(3) else "")
        add(Identifier("register_number", value, _register_issuer(text, m.start())), m.start(), m.end())
    for m in FOREIGN_REGISTER.finditer(text):
        issuer = " ".join(m.group("issuer").split())
        if re.search(r"commercial register|Handelsregister|local court", issuer, re.IGNORECASE):
            continue  # German register wording: the HRB/HRA number was taken above
        add(Identifier("register_number", m.group("num").strip(), issuer), m.start("num"), m.end("num"))
    for m in VAT.finditer(text):
        add(Identifier("vat_id", m.group(1).replace(".", "").replace("-", "")), m.start(1), m.end(1))
    for m in LEI.finditer(text):
        if lei_valid(m.group(1)):
            add(Identifier("lei", m.group(1)), m.start(1), m.end(1))
    for m in INVOICE.finditer(text):
        add(Identifier("invoice_number", m.group(1)), m.start(1), m.end(1))
    for m in LABELLED_MATTER.finditer(text):
        add(Identifier("matter_reference", m.group(1).upper()), m.start(1), m.end(1))
    for m in FIRM_REFERENCE.finditer(text):
        add(Identifier("matter_reference", m.group(1).upper()), m.start(1), m.end(1))
    for m in OWN_LABEL.finditer(text):
        value = m.group(1).strip().rstrip(".,;")
        if value and not FIRM_REFERENCE.fullmatch(value) and re.search(r"\d", value):
            add(Identifier("external_reference", value), m.start(1), m.start(1) + len(value))
    for m in CASE_NUMBER.finditer(text):
        courts = list(COURT_FOR_CASE.finditer(text[max(0, m.start() - 400):m.start()]))
        issuer = spell_out_court(_clean_court(courts[-1].group(1))) if courts else None
        add(Identifier("case_number", " ".join(m.group(1).split()), issuer), m.start(1), m.end(1))
    out.sort(key=lambda f: f.start)
    return out


def unique(identifiers: list[Identifier]) -> list[Identifier]:
    """``identifiers`` without repeats (same type, value key and issuer key), first occurrence kept."""
    seen: set[tuple] = set()
    out = []
    for ident in identifiers:
        key = (ident.type, ident.value_key, ident.issuer_key)
        if key not in seen:
            seen.add(key)
            out.append(ident)
    return out
