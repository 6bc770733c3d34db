"""Party mentions in one document, found by rule (pure).

Spec: insertion-pipeline.md "Extract metadata" (parties and identifiers). A *mention* is a name as
written plus what the text says about it; it is not yet an entity — :mod:`ki.domain.entities.resolve`
decides which entity it is. What counts as a party follows the estate's convention (the shared
corpus README, "Parties"): legal parties (companies and natural persons who are parties), the law
firms (ours and opposing counsel) and the court of the proceedings — not the people who sign or
act for a party, and not a register court that only issues an identifier.

Sources, each giving ``Mention.kind``:

* the firm itself (``firm.name`` / ``firm.aliases``, compared as names are) → ``law_firm``, ``is_firm``;
* names ending in a legal form (``… GmbH``, ``… Ltd``, ``… B.V.``) → ``company`` (``law_firm`` when a
  descriptor such as ``Rechtsanwälte`` or ``PartG mbB`` says so);
* law firms named by a descriptor (``Kanzlei X``, ``X Rechtsanwälte``, ``X & Kollegen``) → ``law_firm``;
* courts (``Landgericht Hamburg``, ``ArbG Köln``, ``Rechtbank Gelderland``, ``Employment Tribunal (Leeds)``),
  unless only the issuer of a register number → ``court``;
* natural persons with an address (``X, Street 1``, ``X of 143 Colmore Row``), in an address block, after a party
  label (``Claimant:``, ``Werknemer:``) or on a side of a rubrum (``A ./. B``) → ``person``; also written as
  initials and surname (``N. Ogilvie``, ``Ogilvie, N.`` → ``N. Ogilvie``), which is the one full-name person
  of the same document it can be (``Nicola Ogilvie``: one mention), else a mention of its own;
* names the firm already knows (the alias ledger, ``known``) wherever they occur.

Entity-typed identifiers (register number, VAT id, LEI) are attached to the nearest mention before
them (or, failing that, just after them), so ``X, eingetragen … unter HRB 78491`` gives X its number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ki.domain.entities.identifiers import ENTITY_TYPES, Found, Identifier, find_identifiers, unique
from ki.domain.entities.names import NameKey, is_party_name, name_key
from ki.domain.entities.patterns import (
    ADDRESS_NOISE,
    ATTENDANCE_LINE,
    BRACKETED_PERSON,
    COMPANY,
    COURT,
    DUTCH_PREFIX,
    FORMERLY,
    JUDGE_CONTEXT,
    LABELLED_PERSON,
    LAW_FIRM,
    LEADING_STOP,
    NOT_A_PERSON,
    NOW_CALLED,
    PARTY_LIST_BEFORE,
    PERSON_ADDRESS_BLOCK,
    PERSON_AFTER_COMPANY,
    PERSON_AND,
    PERSON_OF_ADDRESS,
    PERSON_RESIDING,
    PERSON_WITH_ADDRESS,
    POSTCODE_BEFORE,
    REGISTER_CONTEXT_AFTER,
    REGISTER_CONTEXT_BEFORE,
    RUBRUM,
    TWO_NAMES,
    WE_REPRESENT,
    firm_pattern,
    name_pattern,
)
from ki.domain.entities.persons import expansion, is_abbreviated, natural_order, parse_person
from ki.domain.ontology.terms import fold

#: How far (characters) an identifier may stand from the name it belongs to.
ATTACH_BEFORE_CHARS = 260
ATTACH_AFTER_CHARS = 220
#: Longest distinctive part of a name (tokens); longer matches are sentences, not names.
MAX_NAME_TOKENS = 6
#: A court's name may be longer (``High Court of Justice, King's Bench Division, Commercial Court``).
MAX_COURT_TOKENS = 12
#: A sentence ends inside the words taken for a name (``… dated 15th May 2023. Solicitors for the Claimant``): a
#: number or a word of three or more small letters closed by a full stop, then the next word; abbreviations
#: that end in a full stop inside names (``Bros.``, ``Prof.``, ``Dipl.``, ``Corp.``) are not sentence ends.
SENTENCE_END = re.compile(r"(?:\d|(?<!Bros)(?<!Prof)(?<!Dipl)(?<!Corp)(?<!Dres)(?<=[a-zäöüß]{3}))\.\s+\S")


@dataclass(frozen=True)
class KnownName:
    """An alias the firm already holds (from the entity alias ledger), or the imported client of the
    document's matter (``entity_id`` None: known from practice management before any document)."""

    entity_id: int | None
    name: str
    kind: str


@dataclass
class Mention:
    """One party named in the document.

    Attributes:
        name: the first occurrence as written (whitespace collapsed).
        kind: ``company``, ``law_firm``, ``person`` or ``court``.
        spans: every occurrence, as (start, end) character offsets.
        is_firm: the firm itself.
        identifiers: register numbers / VAT ids / LEIs written next to it.
        hints: (role, basis) pairs the text states or suggests (filled by :mod:`ki.domain.entities.role_cues`).
        known_entity_ids: entity ids whose known alias matched this mention.
        source: which rule found it first (``firm``, ``legal_form``, ``law_firm``, ``court``, ``person``,
            ``rubrum``, ``known``).
        former_names: names the text says the party had before (``X Ltd (formerly Y Ltd)``): one party, whose
            former names go on its alias ledger.
    """

    name: str
    kind: str
    spans: list[tuple[int, int]]
    is_firm: bool = False
    identifiers: list[Identifier] = field(default_factory=list)
    hints: list[tuple[str, str]] = field(default_factory=list)
    known_entity_ids: list[int] = field(default_factory=list)
    source: str = ""
    former_names: list[str] = field(default_factory=list)

    @property
    def key(self) -> NameKey:
        """The normalised name."""
        return name_key(self.name, kind=self.kind)

    @property
    def start(self) -> int:
        return min(s for s, _ in self.spans)


def _clean(name: str) -> str:
    return " ".join(name.split()).strip(" ,;:–-")


def _trim_leading(words: str) -> tuple[str, int]:
    """Drop capitalised stop words at the front (``Die Rheintal`` → ``Rheintal``); returns (rest, chars cut)."""
    cut = 0
    rest = words
    while True:
        m = re.match(r"(\S+)(\s+)", rest)
        if not m:
            return rest, cut
        word = fold(m.group(1)).strip(".,:;()")
        if word in LEADING_STOP or not re.search(r"[A-Za-zÄÖÜäöüß]", m.group(1)):
            cut += m.end()
            rest = rest[m.end():]
            continue
        return rest, cut


class _Collector:
    def __init__(self, text: str):
        self.text = text
        self.items: list[Mention] = []
        self.taken: list[tuple[int, int]] = []

    def overlaps(self, start: int, end: int) -> bool:
        return any(s < end and start < e for s, e in self.taken)

    def add(self, name: str, kind: str, start: int, end: int, *, source: str, is_firm: bool = False,
            known: int | None = None) -> None:
        """Record ``name`` (``self.text[start:end]`` for companies and law firms) unless it overlaps a name taken
        before, is no party name (:func:`~ki.domain.entities.names.is_party_name`) or runs over a sentence end."""
        name = _clean(name)
        if not name or self.overlaps(start, end):
            return
        if kind in ("company", "law_firm"):  # a sentence ended inside: the name is what follows it
            ends = list(SENTENCE_END.finditer(self.text, start, end))
            if ends:
                start = ends[-1].end() - 1
                name = _clean(self.text[start:end])
        key = name_key(name, kind=kind)
        longest = MAX_COURT_TOKENS if kind == "court" else MAX_NAME_TOKENS
        if key.empty or len(key.base) > longest or not is_party_name(name, kind=kind):
            return  # a sentence, a description ("PRIVATE COMPANY LIMITED") or a role ("Buyer's Solicitors")
        if kind == "company" and key.law_firm:
            kind = "law_firm"
        self.taken.append((start, end))
        for m in self.items:
            if m.kind == kind and m.key.key == key.key:
                m.spans.append((start, end))
                if known is not None and known not in m.known_entity_ids:
                    m.known_entity_ids.append(known)
                return
        self.items.append(Mention(name=name, kind=kind, spans=[(start, end)], is_firm=is_firm, source=source,
                                  known_entity_ids=[known] if known is not None else []))


def _firm_spans(c: _Collector, firm_names: list[str]) -> None:
    """The firm under its configured names, then under any spelling of their distinctive words
    (:func:`~ki.domain.entities.patterns.firm_pattern`: ``&``/``and``, punctuation, professional suffixes)."""
    variants = sorted({n.strip() for n in firm_names if n and n.strip()}, key=len, reverse=True)
    for variant in variants:
        for m in name_pattern(variant).finditer(c.text):
            c.add(m.group(0), "law_firm", m.start(), m.end(), source="firm", is_firm=True)
    for variant in variants:
        base = set(name_key(variant, kind="law_firm").base)
        pattern = firm_pattern([w for w in re.findall(r"[\wÄÖÜäöüß]+", variant) if fold(w) in base])
        for m in pattern.finditer(c.text) if pattern is not None else ():
            c.add(m.group(0), "law_firm", m.start(), m.end(), source="firm", is_firm=True)


def _glue_previous_line(text: str, start: int) -> int:
    """A name broken across lines mid-sentence ("gegen die Weserfeld\\nUmwelttechnik AG"): the start of
    its first part, else ``start``. Only when the name begins a line and the line before ends in
    one to three capitalised words (after a Dutch particle: "tussen Van der Veen\\nInstallatietechniek B.V.") that
    follow a lower-case word or a rubrum's "./."."""
    line_start = text.rfind("\n", 0, start) + 1
    if text[line_start:start].strip() or line_start == 0:
        return start
    prev = text[text.rfind("\n", 0, line_start - 1) + 1:line_start - 1]
    m = re.search(r"(?:^|\s)([a-zäöüß][\wäöüß]*|\./\.|gg\.|vs\.?|\._\.)[ \t]+"
                  rf"((?:{DUTCH_PREFIX})?(?:[A-ZÄÖÜ][\wÄÖÜäöüß.\-]*[ \t]*){{1,3}})$", prev)
    if not m or fold(m.group(2).split()[0]) in LEADING_STOP or m.group(1) in ("am", "an", "im", "in", "on", "upon"):
        return start
    return line_start - 1 - len(prev) + m.start(2)


def _add_company(c: _Collector, start: int, end: int) -> None:
    raw = c.text[start:end]
    rest, cut = _trim_leading(raw)
    if not rest or (len(rest.split()) == 1 and rest.isupper() and len(rest) <= 3):
        return
    start += cut
    if not is_party_name(c.text[start:end]):
        return  # a description ("PRIVATE COMPANY LIMITED"): no name of its own, none glued from the line before
    glued = _glue_previous_line(c.text, start)
    if glued < start:
        start = glued
    c.add(c.text[start:end], "company", start, end, source="legal_form")


def _person_before_company(c: _Collector, start: int, end: int) -> int:
    """In a party list ("Parties: Niamh Ogilvie and Caldera Holdings Limited"), the person a company
    match swallowed is a mention of its own; returns where the company itself starts."""
    rest, cut = _trim_leading(c.text[start:end])
    joined = PERSON_AND.match(rest)
    line = c.text[c.text.rfind("\n", 0, start) + 1:start + cut]
    if joined is None or not PARTY_LIST_BEFORE.search(line) or NOT_A_PERSON.search(joined.group("person")) \
            or name_key(joined.group("person"), kind="company").form is not None:
        return start  # "Pennant Healthcare Limited and Larkspur Energy B.V.": two companies, no person
    parsed = parse_person(joined.group("person"))
    if parsed is None or not parsed.full:
        return start
    c.add(joined.group("person"), "person", start + cut, start + cut + joined.end("person"), source="party_list")
    return start + cut + joined.end()


def _companies(c: _Collector) -> None:
    for m in COMPANY.finditer(c.text):
        start, end = m.start("name"), m.end()
        start = _person_before_company(c, start, end)
        split = TWO_NAMES.search(c.text, start, end)
        while split is not None and split.end() < end:
            _add_company(c, start, split.end("form"))
            start = split.end()
            split = TWO_NAMES.search(c.text, start, end)
        _add_company(c, start, end)
    for m in LAW_FIRM.finditer(c.text):
        rest, cut = _trim_leading(m.group(0))
        if rest:
            start = m.start() + cut
            c.add(c.text[start:m.end()], "law_firm", start, m.end(), source="law_firm")


def _courts(c: _Collector) -> None:
    for m in COURT.finditer(c.text):
        before = c.text[max(0, m.start() - 60):m.start()]
        after = c.text[m.end():m.end() + 40]
        if REGISTER_CONTEXT_BEFORE.search(before) or REGISTER_CONTEXT_AFTER.search(after) \
                or JUDGE_CONTEXT.search(before) or POSTCODE_BEFORE.search(before):
            continue
        c.add(m.group("court"), "court", m.start(), m.end(), source="court")


def _persons(c: _Collector) -> None:
    for pattern in (PERSON_WITH_ADDRESS, PERSON_OF_ADDRESS, PERSON_RESIDING, PERSON_ADDRESS_BLOCK, LABELLED_PERSON):
        for m in pattern.finditer(c.text):
            if not NOT_A_PERSON.search(m.group("name")):
                c.add(natural_order(m.group("name")), "person", m.start("name"), m.end("name"), source="person")
    for line in ATTENDANCE_LINE.finditer(c.text):  # "Attending: <lawyer>, <contact> (<party>)"
        for m in BRACKETED_PERSON.finditer(c.text, line.start(), line.end()):
            if not NOT_A_PERSON.search(m.group("name")):
                c.add(m.group("name"), "person", m.start("name"), m.end("name"), source="person")
    for m in PERSON_AFTER_COMPANY.finditer(c.text):  # "tussen X B.V. en Marloes de Boer": a party list only
        line = c.text[c.text.rfind("\n", 0, m.start()) + 1:m.start()]
        if PARTY_LIST_BEFORE.search(line) and not NOT_A_PERSON.search(m.group("name")):
            c.add(m.group("name"), "person", m.start("name"), m.end("name"), source="party_list")
    for m in RUBRUM.finditer(c.text):
        for side in ("left", "right"):
            value = m.group(side)
            if COMPANY.search(value) or name_key(value).court:
                continue
            rest, cut = _trim_leading(value)
            words = rest.split()
            if 2 <= len(words) <= 4 and all(w[:1].isupper() for w in words) and not NOT_A_PERSON.search(rest):
                start = m.start(side) + cut
                c.add(rest, "person", start, start + len(rest), source="rubrum")


def _known(c: _Collector, known: list[KnownName]) -> None:
    folded = set(re.findall(r"[a-z0-9]+", fold(c.text)))
    for entry in sorted(known, key=lambda k: len(k.name), reverse=True):
        key = name_key(entry.name, kind=entry.kind)
        if key.empty or not set(key.base) <= folded:
            continue
        if len(key.base) < 2 and entry.kind != "court" and not key.form:
            continue  # a single bare word is too weak to stand for a party
        for m in name_pattern(entry.name).finditer(c.text):
            kind = entry.kind if entry.kind in ("company", "law_firm", "person", "court") else "company"
            end = m.end()
            if m.group(0).count("(") > m.group(0).count(")") and c.text[end:end + 1] == ")":
                end += 1  # "Employment Tribunal (Leeds)": the pattern stops before the closing bracket
            c.add(c.text[m.start():end], kind, m.start(), end, source="known", known=entry.entity_id)


def _letterhead_law_firm(text: str, mentions: list[Mention]) -> None:
    """A letter whose writer says it represents someone (:data:`~ki.domain.entities.patterns.WE_REPRESENT`: "We act for
    Bluefield Media Inc.") comes from a law firm: the name above its address on the first line ("Ogilvie Marston\\n
    159 Cheapside, Cambridge CB2 6SH"), read as a person by its address block, is that law firm."""
    first_line = text.find("\n")
    if not mentions or first_line < 0 or not WE_REPRESENT.search(text):
        return
    head = mentions[0]
    if head.kind == "person" and head.source == "person" and head.start < first_line and not is_abbreviated(head.name):
        head.kind = "law_firm"


def _merge_initials(mentions: list[Mention]) -> list[Mention]:
    """A person written with initials (``N. Ogilvie``) whom exactly one full-name person of the same document
    can be (``Nicola Ogilvie``, :func:`ki.domain.entities.persons.expansion`) is that person: one mention, both
    spellings' occurrences. Two candidates (``Nicola`` and ``Niamh Ogilvie``) keep it apart."""
    full = {i: [m.name] for i, m in enumerate(mentions) if m.kind == "person" and not is_abbreviated(m.name)}
    merged: set[int] = set()
    for i, m in enumerate(mentions):
        if m.kind != "person" or not is_abbreviated(m.name):
            continue
        target = expansion(m.name, full)
        if target is None:
            continue
        into = mentions[target]
        into.spans = sorted({*into.spans, *m.spans})
        into.identifiers = unique([*into.identifiers, *m.identifiers])
        into.known_entity_ids.extend(e for e in m.known_entity_ids if e not in into.known_entity_ids)
        merged.add(i)
    return [m for i, m in enumerate(mentions) if i not in merged]


def _merge_former_names(text: str, mentions: list[Mention]) -> list[Mention]:
    """A company renamed (``X Ltd (formerly Y Ltd)``, ``X GmbH, vormals Y GmbH``, ``Y Limited having … changed
    its name, is now incorporated under the name of X Limited``) is one mention: the current name's, with
    the former one's occurrences and the former name in ``former_names``."""
    spans = sorted(((s, e, m) for m in mentions if m.kind in ("company", "law_firm") for s, e in m.spans),
                   key=lambda x: x[0])
    merged: dict[int, Mention] = {}  # id(former) → current
    for (_, end, first), (start, _, second) in zip(spans, spans[1:], strict=False):
        if first is second or start - end > 200:
            continue
        between = text[end:start]
        if FORMERLY.fullmatch(between):
            current, former = first, second
        elif NOW_CALLED.fullmatch(between):
            current, former = second, first
        else:
            continue
        while id(current) in merged:
            current = merged[id(current)]
        if current is former or id(former) in merged:
            continue
        merged[id(former)] = current
        current.spans = sorted({*current.spans, *former.spans})
        current.identifiers = unique([*current.identifiers, *former.identifiers])
        current.former_names.extend(n for n in [former.name, *former.former_names] if n not in current.former_names)
        current.known_entity_ids.extend(e for e in former.known_entity_ids if e not in current.known_entity_ids)
    return [m for m in mentions if id(m) not in merged]


def _attach_identifiers(mentions: list[Mention], found: list[Found]) -> None:
    spans = sorted(((s, e, m) for m in mentions for s, e in m.spans if m.kind != "court"), key=lambda x: x[0])
    for f in found:
        if f.identifier.type not in ENTITY_TYPES:
            continue
        before = [(s, e, m) for s, e, m in spans if e <= f.start and f.start - e <= ATTACH_BEFORE_CHARS]
        target = before[-1][2] if before else None
        if target is None:
            after = [(s, e, m) for s, e, m in spans if s >= f.end and s - f.end <= ATTACH_AFTER_CHARS]
            target = after[0][2] if after else None
        if target is not None:
            target.identifiers = unique([*target.identifiers, f.identifier])


def find_mentions(text: str, *, firm_names: list[str] | None = None, known: list[KnownName] | None = None,
                  found: list[Found] | None = None) -> list[Mention]:
    """Every party mention in ``text``, in order of first occurrence.

    Args:
        text: the document's text (for mail: headers rendered as text plus the body).
        firm_names: ``firm.name`` and ``firm.aliases`` (empty: the firm is not recognised as such).
        known: aliases of entities the firm already holds, found wherever they occur.
        found: the identifiers of ``text`` if already computed (:func:`find_identifiers`).
    Returns: mentions with their spans and attached identifiers (``hints`` empty).
    """
    text = text or ""
    # Addresses are not names: "kessler-claussen.example" must not read as the firm.
    c = _Collector(ADDRESS_NOISE.sub(lambda m: " " * len(m.group(0)), text))
    _firm_spans(c, firm_names or [])
    # The rules before the names already known: which aliases exist depends on which documents came first,
    # so a known shorter spelling ("Employment Tribunal") must not take the span of the one written here.
    _courts(c)
    _known(c, [k for k in (known or []) if k.kind == "court"])
    _companies(c)
    _known(c, [k for k in (known or []) if k.kind != "court"])
    _persons(c)
    mentions = sorted(c.items, key=lambda m: m.start)
    for m in mentions:  # the name as written at its first occurrence
        m.spans.sort()
        first = _clean(c.text[m.spans[0][0]:m.spans[0][1]])
        if first and name_key(first, kind=m.kind).key == m.key.key:
            m.name = first
    _letterhead_law_firm(c.text, mentions)
    mentions = _merge_initials(_merge_former_names(c.text, mentions))
    _attach_identifiers(mentions, found if found is not None else find_identifiers(c.text))
    return mentions
