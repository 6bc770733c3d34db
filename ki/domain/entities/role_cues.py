"""What one document says about who the firm acts for: role hints on its mentions (pure).

Spec: insertion-pipeline.md "Extract metadata" ("role = client means the party the firm acts for").
A hint is ``(role, basis)``; the basis ranks it against what the matter already knows
(:mod:`ki.domain.entities.roles`). Hints, by basis:

* ``stated`` — the text says it: "unsere Mandantin, die X", "our client, X", "prepared for X" (in a letter
  another law firm writes, the client it names is the other side's: ``counterparty``),
  "Mandant: X", "wir vertreten die X", "X … Prozessbevollmächtigte: <our firm>" (a party represented by
  the firm) and "X … vertreten durch <another law firm>" (represented by someone else → counterparty);
  the addressee of the firm's own engagement letter or invoice; a party for which the firm acts in a
  pleading ("Namens und in Vollmacht der Klägerin" under our letterhead, "wir die Beklagte vertreten"
  under another firm's).
* ``inferred`` — the text suggests it: the company writing to the firm (letter or e-mail) is its client;
  the company whose shares are sold ("all shares in X", "(the “Company”)", "overname van X", "(de
  “Vennootschap”)", "acquisition de X", "(la « Société »)") is a third party (``other``).

Law firms and courts need no hints: their kind decides (``advisor``, ``court``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ki.domain.entities.mentions import Mention
from ki.domain.entities.names import name_key
from ki.domain.entities.patterns import name_pattern
from ki.domain.ontology.terms import fold

_B = r"\s*$"
CLIENT_BEFORE = re.compile(
    r"(?:(?:unsere[rnm]?|unserem)\s+Mandant(?:in|en|schaft)?\s*,?\s*(?:der|die|den|dem|des)?"
    r"|\bour\s+client(?:s)?\s*,?\s*(?:the\s+)?|\bprepared\s+for|"
    # "Prepared by <firm> for X", "Opgesteld door <firm> voor X", "Erstellt von <firm> für X", "Établi par … pour X"
    r"\b(?:prepared\s+by|opgesteld\s+door|erstellt\s+(?:von|durch)|établi\s+par)\s+[^\n]{1,80}?\s+"
    r"(?:for|voor|für|pour)(?:\s+(?:the|de|die|den|la|le))?|\b(?:opgesteld\s+voor|erstellt\s+für)|\b(?:Mandant(?:in)?|Client|Auftraggeber(?:in)?)\s*:"
    r"|\brechtlichen\s+Interessen\s+(?:der|des)|\bwir\s+vertreten\s+(?:die|den|das)?"
    r"|\b(?:act(?:ing)?|advise|advising)\s+(?:for|on\s+behalf\s+of)|\bon\s+behalf\s+of\s+our\s+client,?"
    r"|\bHiermit\s+bevollmächtigt\s+(?:die|der|den|das)?"
    # Dutch and French: "onze cliënte X", "Cliënt: X", "uw opdracht aan <firm> om X (bij te staan)", "notre cliente X"
    r"|\b(?:namens\s+)?onze\s+cli[eë]nt(?:e)?\s*,?|\b(?:Cli[eë]nt|Opdrachtgever|Cliente)\s*:"
    r"|\bopdracht\s+aan\s+[^\n]{1,80}?\s+om|\bwij\s+(?:treden\s+op|staan)\s+(?:namens|voor)"
    r"|\b(?:pour\s+le\s+compte\s+de\s+)?notre\s+client(?:e)?\s*,?"
    r"|\bnous\s+(?:agissons\s+pour|représentons))" + _B, re.IGNORECASE)
CLIENT_AFTER = re.compile(r"^\s*,?\s*(?:\(|–|-)?\s*(?:unsere\s+Mandant(?:in|schaft)?|our\s+client|"
                          r"onze\s+cli[eë]nt(?:e)?|notre\s+client(?:e)?)\b", re.IGNORECASE)
OTHER_BEFORE = re.compile(r"(?:all\s+(?:of\s+the\s+)?shares\s+in|acquisition\s+of|Geschäftsanteile\s+an\s+der|"
                          r"Erwerb\s+der|Veräußerung\s+der|overname(?:\s+van)?|verwerving\s+van|"
                          r"(?:alle\s+)?aandelen\s+in|acquisition\s+(?:de|d['’])|rachat\s+(?:de|d['’])|"
                          r"(?:toutes\s+les\s+)?actions\s+de)" + _B, re.IGNORECASE)
OTHER_AFTER = re.compile(r"^[^()\n]{0,200}?\((?:the|die|der|de|het|la|le)\s+[“\"„«]?\s?(?:Company|Target|"
                         r"Gesellschaft|"
                         r"Zielgesellschaft|Vennootschap|Doelvennootschap|Société|Cible)\s?[”\"“»]?\)")
REPRESENTED = re.compile(r"(?:Prozessbevollmächtigte[rn]?|Verfahrensbevollmächtigte[rn]?|vertreten\s+durch|"
                         r"represented\s+by|counsel\s*:)\s*:?\s*(?:die|der)?\s*$", re.IGNORECASE)
SIDE_LABEL = re.compile(r"^[^–\n]{0,260}?[–-]\s*(?P<side>Klägerin|Kläger|Antragstellerin|Antragsteller|Beklagte[rn]?|"
                        r"Antragsgegnerin|Antragsgegner)\s*[–-]", re.IGNORECASE)
WE_ACT_FOR_SIDE = re.compile(r"(?:Namens\s+und\s+in\s+Vollmacht\s+der|wir\s+(?:die|den)|for\s+the)\s+"
                             r"(?P<side>Klägerin|Kläger|Beklagten?|claimant|defendant)\b(?:\s+vertreten)?",
                             re.IGNORECASE)
#: Titles of the firm's own engagement letters and invoices, in de/en/nl/fr (their addressee is the client): the
#: document's title or a line of its heading.
ENGAGEMENT_OR_INVOICE = re.compile(r"^\s*(?:mandatsvereinbarung|mandatsvertrag|engagement\s+letter|letter\s+of\s+"
                                   r"engagement|rechnung|invoice|kostennote|honorarrechnung|vergütungsvereinbarung|"
                                   r"fee\s+(?:agreement|note)|opdrachtbevestiging|opdrachtovereenkomst|declaratie|"
                                   r"factuur|lettre\s+de\s+mission|convention\s+d['’]honoraires|facture|"
                                   r"note\s+d['’]honoraires)\b", re.IGNORECASE)
#: How many of a letter's first lines may carry its heading ("Opdrachtbevestiging – …", "INVOICE") below the
#: letterhead and the address block.
HEADING_LINES = 14
CLAIMANT = {"klägerin", "kläger", "antragstellerin", "antragsteller", "claimant"}


CLAIMANT_FOLDED = frozenset(fold(c) for c in CLAIMANT)


def _side(word: str) -> str:
    return "claimant" if fold(word) in CLAIMANT_FOLDED else "defendant"


def _hint(m: Mention, role: str, basis: str) -> None:
    if (role, basis) not in m.hints:
        m.hints.append((role, basis))


def _occurrences(mentions: Iterable[Mention]) -> list[tuple[int, int, Mention]]:
    return sorted(((s, e, m) for m in mentions for s, e in m.spans), key=lambda x: x[0])


def _parties(mentions: list[Mention]) -> list[Mention]:
    return [m for m in mentions if m.kind in ("company", "person")]


def _letterhead(text: str, mentions: list[Mention]) -> Mention | None:
    """The mention standing in the first two lines (the sender of a letter), if any."""
    head_end = 0
    for _ in range(2):
        nxt = text.find("\n", head_end)
        head_end = len(text) if nxt < 0 else nxt + 1
    firsts = [m for m in mentions if m.start < head_end]
    return min(firsts, key=lambda m: m.start) if firsts else None


def _addressee(text: str, mentions: list[Mention], sender: Mention) -> Mention | None:
    """The first party after the letterhead within the address block (the next ~8 lines)."""
    lines = text.split("\n")
    limit = sum(len(line) + 1 for line in lines[:10])
    after = [m for m in mentions if m is not sender and m.start < limit and m.kind in ("company", "person", "law_firm")
             and m.start > sender.start]
    return min(after, key=lambda m: m.start) if after else None


def _text_cues(text: str, mentions: list[Mention], *, other_firm_writes: bool = False) -> None:
    """``other_firm_writes``: the document is another law firm's letter, so the client it names ("We act for X",
    "our client X") is the other side's — the counterparty."""
    occ = _occurrences(mentions)
    for i, (start, end, m) in enumerate(occ):
        if m.kind not in ("company", "person"):
            continue
        before = text[max(0, start - 90):start]
        if CLIENT_BEFORE.search(before) or CLIENT_AFTER.search(text[end:end + 60]):
            _hint(m, "counterparty" if other_firm_writes else "client", "stated")
        if OTHER_BEFORE.search(before) or OTHER_AFTER.search(text[end:end + 260]):
            _hint(m, "other", "inferred")
        # "X, … – Klägerin – Prozessbevollmächtigte: <law firm>"
        nxt = next((s for s, _, o in occ[i + 1:] if o.kind in ("company", "person") and o is not m), len(text))
        for s2, _, o in occ[i + 1:]:
            if s2 >= min(nxt, end + 400):
                break
            if o.kind == "law_firm" and REPRESENTED.search(text[max(end, s2 - 60):s2]):
                _hint(m, "client" if o.is_firm else "counterparty", "stated")
                break


def _litigation_sides(text: str, mentions: list[Mention], sender: Mention | None) -> None:
    sides: dict[str, list[Mention]] = {"claimant": [], "defendant": []}
    for m in _parties(mentions):
        for _, end in m.spans:
            label = SIDE_LABEL.match(text[end:end + 300])
            if label:
                sides[_side(label.group("side"))].append(m)
                break
    if not any(sides.values()):
        return
    act = WE_ACT_FOR_SIDE.search(text)
    if act is None or sender is None or sender.kind != "law_firm":
        return
    ours = _side(act.group("side"))
    theirs = "defendant" if ours == "claimant" else "claimant"
    if sender.is_firm:
        for m in sides[ours]:
            _hint(m, "client", "stated")
        for m in sides[theirs]:
            _hint(m, "counterparty", "stated")
    else:
        for m in sides[ours]:
            _hint(m, "counterparty", "stated")
        for m in sides[theirs]:
            _hint(m, "client", "stated")


FROM_LABEL = re.compile(r"(?:^|\n)[ \t]*(?:From|Von|Absender)[ \t]*:[ \t]*$", re.IGNORECASE)
TO_LABEL = re.compile(r"(?:^|\n)[ \t]*(?:To|An|Empfänger|Attn\.?)[ \t]*:[ \t]*$", re.IGNORECASE)


def _fax_header(text: str, mentions: list[Mention]) -> None:
    """A cover sheet "To: <our firm> … From: <X>": X writes to the firm, so X is the client (inferred)."""
    senders, firm_addressed = [], False
    for start, _, m in _occurrences(mentions):
        before = text[max(0, start - 40):start]
        if FROM_LABEL.search(before) and m.kind in ("company", "person"):
            senders.append(m)
        elif TO_LABEL.search(before) and m.is_firm:
            firm_addressed = True
    if firm_addressed:
        for m in senders:
            _hint(m, "client", "inferred")


#: The firm named as the author on its line ("Prepared by <firm> for X", "Opgesteld door <firm>"), not as the addressee.
AUTHOR_BEFORE = re.compile(r"\b(?:by|door|von|durch|par)\s*$", re.IGNORECASE)


def _written_by(text: str, firm: Mention) -> bool:
    """Whether the firm's first mention follows "by"/"door"/"von"/"par" on its line: the firm wrote the document."""
    start = firm.start
    return bool(AUTHOR_BEFORE.search(text[text.rfind("\n", 0, start) + 1:start]))


def _letters(text: str, title: str, mentions: list[Mention], is_mail: bool) -> None:
    if is_mail:
        return
    _fax_header(text, mentions)
    sender = _letterhead(text, mentions)
    if sender is None:
        return
    addressee = _addressee(text, mentions, sender)
    if addressee is None:
        return
    if sender.is_firm and addressee.kind in ("company", "person"):
        if ENGAGEMENT_OR_INVOICE.search(title or "") or any(ENGAGEMENT_OR_INVOICE.search(line)
                                                            for line in text.split("\n")[:HEADING_LINES]):
            _hint(addressee, "client", "stated")
        elif any(h[0] == "client" for p in _parties(mentions) if p is not addressee for h in p.hints):
            _hint(addressee, "counterparty", "inferred")
    elif addressee.is_firm and sender.kind in ("company", "person") and not _written_by(text, addressee):
        _hint(sender, "client", "inferred")


FREEMAIL = frozenset({"gmail", "googlemail", "gmx", "web", "t-online", "online", "outlook", "hotmail", "yahoo",
                      "icloud", "me", "posteo", "mailbox", "freenet", "aol", "proton", "protonmail"})
_NAME_PART = r"[A-ZÄÖÜ][a-zäöüß]+(?:-[A-ZÄÖÜ][a-zäöüß]+)?"
PERSON_NAME = re.compile(rf"^(?:(?:Frau|Herr|Mr|Mrs|Ms)\.?\s+)?(?:(?:Dr|Prof)\.\s+)?"
                         rf"({_NAME_PART}(?:\s+{_NAME_PART}){{1,2}})$")


def _domain_tokens(addr: dict | None) -> set[str]:
    address = (addr or {}).get("address") or ""
    return set(re.findall(r"[a-z0-9]+", fold(address.rpartition("@")[2].rsplit(".", 1)[0])))


def _private_person(text: str, mentions: list[Mention], addr: dict | None) -> Mention | None:
    """A natural person writing from (or to) a private address: a personal domain or a free-mail provider."""
    display = " ".join(((addr or {}).get("name") or "").split())
    m = PERSON_NAME.match(display)
    if not m:
        return None
    tokens = _domain_tokens(addr)
    name_tokens = set(re.findall(r"[a-z0-9]+", fold(m.group(1))))
    if not (tokens & FREEMAIL or name_tokens <= tokens):
        return None
    for existing in mentions:
        if existing.kind == "person" and existing.key.key == name_key(m.group(1), kind="person").key:
            return existing
    spans = [(x.start(), x.end()) for x in name_pattern(m.group(1)).finditer(text)]
    if not spans:
        return None
    person = Mention(name=m.group(1), kind="person", spans=spans[:1], source="mail")
    mentions.append(person)
    return person


def _mail(text: str, mentions: list[Mention], mail: dict | None, firm_tokens: set[str]) -> None:
    """An e-mail between the firm and a company or a private person: that side is the client (inferred)."""
    if not mail or not firm_tokens:
        return

    def is_firm(tokens: set[str]) -> bool:
        return bool(tokens) and firm_tokens <= tokens

    sender = mail.get("sender")
    recipients = [*(mail.get("to") or []), *(mail.get("cc") or [])]
    if is_firm(_domain_tokens(sender)):
        others = [r for r in recipients if _domain_tokens(r) and not is_firm(_domain_tokens(r))]
    elif any(is_firm(_domain_tokens(r)) for r in recipients):
        others = [sender]
    else:
        return
    for addr in others:
        person = _private_person(text, mentions, addr)
        if person is not None:
            _hint(person, "client", "inferred")
            continue
        tokens = _domain_tokens(addr)
        for m in _parties(mentions):
            base = set(m.key.base)
            if base and (base <= tokens or (len(base) >= 2 and len(base & tokens) >= 2)):
                _hint(m, "client", "inferred")


def add_role_hints(text: str, mentions: list[Mention], *, title: str = "", mail: dict | None = None,
                   firm_names: list[str] | None = None) -> list[Mention]:
    """Fill ``Mention.hints`` from the document's own words (see module doc); returns ``mentions``.

    Args:
        text: the text the mentions were found in.
        title: the document's title (an engagement letter's or invoice's addressee is the client).
        mail: the ``structured_json`` ``mail`` object for e-mails (sender and recipients).
        firm_names: ``firm.name`` + ``firm.aliases`` (their tokens recognise the firm's mail domain).
    """
    firm_tokens: set[str] = set()
    for name in firm_names or []:
        base = set(name_key(name, kind="law_firm").base)
        if len(base) >= 2 and (not firm_tokens or len(base) < len(firm_tokens)):
            firm_tokens = base
    sender = _letterhead(text, mentions)
    _text_cues(text, mentions, other_firm_writes=mail is None and sender is not None and sender.kind == "law_firm"
               and not sender.is_firm and bool(firm_names))
    _litigation_sides(text, mentions, sender)
    _letters(text, title, mentions, is_mail=mail is not None)
    _mail(text, mentions, mail, firm_tokens)
    mentions.sort(key=lambda m: m.start)
    return mentions
