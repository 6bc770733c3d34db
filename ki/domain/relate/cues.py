"""Text cues for typed relations (pure): citations by date or number, annex labels, amendment and reply language.

Spec: insertion-pipeline.md "Relate": typed relations ``annex_of``, ``responds_to``, ``references``,
``amends``. A document cites another by naming it and its date ("gemäß Mandatsvereinbarung vom
02.02.2023", "the engagement letter dated 16 May 2022", "Ihr Schreiben vom …") or its number
("Rechnung Nr. 2024-512"); an annex carries its label on top ("Anlage K1", "Schedule 4") and the
main document cites that label; an amendment says so ("Nachtrag", "Amendment", "wird … neu gefasst").
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from ki.domain.relate.dates import dates_in
from ki.domain.relate.facts import ANNEX_LABEL, FileFacts

WORD = re.compile(r"[0-9A-Za-zÄÖÜäöüß]+")
#: The word that joins a document's name to its date: "vom", "dated", "of", "van", "d.d.", "du", "en date du",
#: "received on" ("the claim received on 12/03/2022").
CITE_PREP = re.compile(r"(?:\b(?:vom|dated|of|from|datiert|van|de dato|du|(?:received|filed|served|issued|"
                       r"ontvangen|ingediend|eingegangen|eingereicht)\s+(?:on|op|am))|\bd\.d\.)\s*$", re.IGNORECASE)
NUMBER_CITE = re.compile(r"\b(?:nr\.|no\.|nummer|number)\s*([A-Z]{0,4}-?\d{2,4}-\d{2,6}|\d{3,})", re.IGNORECASE)
#: A number labelled as a party's, a matter's or a case's identifier ("client no. 752232", "Claim no. 2225711",
#: "Aktenzeichen", "company number"): it names no document, so it is no citation.
IDENTIFIER_NUMBER = re.compile(r"\b(?:client|customer|matter|case|claim|company|registration|account|file|ref|"
                               r"reference|vat|mandant(?:en)?|akten|kunden|klant|cli[eë]nt|zaak|dossier|kvk|"
                               r"handelsregister)\s*[-.]?\s*$", re.IGNORECASE)
ANNEX_MENTION = ANNEX_LABEL
REPLY_CITE = re.compile(r"\b(?:ihr(?:e|em)?\s+schreiben|your\s+letter|ihre\s+e-?mail|your\s+e-?mail|"
                        r"uw\s+(?:brief|schrijven|e-?mail|bericht)|votre\s+(?:courrier|lettre|e-?mail))\b",
                        re.IGNORECASE)
#: Answering language in the citing sentence: "responds to the Particulars of Claim dated …", "replies to the
#: Defence", "reageert hierbij op de dagvaarding van …", "voert verweer tegen het verzoekschrift van …".
RESPOND_VERB = re.compile(r"\b(?:respond(?:s|ing)?\s+to|repl(?:y|ies|ying)\s+to|in\s+(?:reply|response|answer)\s+to|"
                          r"resists|reageer?t\s+(?:hierbij\s+)?op|reageren\s+(?:hierbij\s+)?op|"
                          r"verweer\s+tegen|antwoordt\s+op|r[ée]pond(?:ons)?\s+[àa]|erwider[nt]?\s+auf|"
                          r"antwortet\s+auf)\b", re.IGNORECASE)
AMEND_TITLE = re.compile(r"\b(nachtrag|amendment|änderungsvereinbarung|addendum|side letter|(?:deed of )?variation|"
                         r"allonge|wijzigingsovereenkomst|avenant)\b", re.IGNORECASE)
AMEND_VERB = re.compile(r"\b(neu gefasst|wird geändert|werden geändert|geändert wird|is hereby amended|"
                        r"shall be amended|are hereby amended|ändert|varies|is varied|are varied|"
                        r"in substitution for|wijzigt|te wijzigen|wordt gewijzigd|worden gewijzigd|modifie)\b",
                        re.IGNORECASE)
RESPONSIVE_TITLE = re.compile(r"\b(klageerwiderung|replik|duplik|erwiderung|statement of defen[cs]e|reply brief|"
                              r"rejoinder|defen[cs]e|reply to defen[cs]e|response form|conclusie van (?:antwoord|"
                              r"repliek|dupliek)|verweerschrift|conclusions en r[ée]ponse)\b", re.IGNORECASE)
PLEADING_WORDS = ("klage", "klageschrift", "klageerwiderung", "erwiderung", "replik", "claim", "defence", "defense",
                  "particulars", "dagvaarding", "verzoekschrift", "conclusie", "antwoord")
FILENAME_CITE = re.compile(
    r"[(„\"']\s*([^()„\"'\n]{3,120}?\.(?:docx|doc|pdf|xlsx|pptx|txt|eml|msg))\s*[)“\"']", re.IGNORECASE)
STAMP_LINE = re.compile(r"^\s*(entwurf|draft|fassung zur unterzeichnung|execution version)\b", re.IGNORECASE)

STOPWORDS = frozenset(
    "vom dated from datiert der die das des dem den ein eine einer eines und oder mit für gemäß nach unter über "
    "aus zum zur auf sowie bis trotz the and for under pursuant our your their with this that which unsere unser "
    "ihre ihr ihrem ihren wir sie haben hat wurde beigefügten beigefügte anbei fassung version entwurfs "
    "execution nr no nummer number between zwischen".split()
)

#: English/German words that name the same kind of document (both directions are tried).
SYNONYMS: dict[str, tuple[str, ...]] = {
    "engagement": ("mandat", "mandatsvereinbarung"), "mandatsvereinbarung": ("engagement",),
    "invoice": ("rechnung",), "rechnung": ("invoice",),
    "lease": ("mietvertrag",), "mietvertrag": ("lease",),
    "articles": ("satzung",), "satzung": ("articles",),
    "resolution": ("beschluss", "gesellschafterbeschluss"), "gesellschafterbeschluss": ("resolution",),
    "minutes": ("protokoll",), "protokoll": ("minutes",),
    "claim": ("klage", "klageschrift"), "klageschrift": ("claim",),
    "defence": ("klageerwiderung",), "klageerwiderung": ("defence",),
    "letter": ("schreiben",), "schreiben": ("letter",),
    "register": ("handelsregister", "auszug"), "handelsregisterauszug": ("register", "extract"),
    "extract": ("auszug",), "reminder": ("erinnerung", "zahlungserinnerung"),
    "zahlungserinnerung": ("reminder",), "supply": ("liefervertrag",), "liefervertrag": ("supply",),
    "settlement": ("vergleich",), "vergleich": ("settlement",), "termination": ("aufhebungsvertrag", "kündigung"),
}


def content_words(text: str) -> list[str]:
    """Lower-case words of ≥ 4 letters that are not stop words."""
    return [w.lower() for w in WORD.findall(text) if len(w) >= 4 and w.lower() not in STOPWORDS
            and not w.isdigit()]


def words_match(a: str, b: str) -> bool:
    """Two words name the same thing: equal, one contains the other (≥ 6 letters), or synonyms."""
    if a == b:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    if len(short) >= 6 and short in long_:
        return True
    if len(short) >= 5 and long_.startswith(short[:-1]) and len(long_) - len(short) <= 2:
        return True  # inflection: Gewerbemietvertrags / Gewerbemietvertrag
    return any(words_match_plain(s, b) for s in SYNONYMS.get(a, ())) or \
        any(words_match_plain(s, a) for s in SYNONYMS.get(b, ()))


def words_match_plain(a: str, b: str) -> bool:
    """:func:`words_match` without synonyms."""
    if a == b:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= 6 and short in long_


@dataclass(frozen=True)
class Citation:
    """One place where the text names another document.

    Attributes:
        words: the naming words before the date/number (``["gewerbemietvertrags"]``).
        date: the cited date, or None for a number citation.
        number: the cited number (``2024-512``), or None.
        line: the line it stands in (for the relation type and the evidence).
        reply: the citation is "Ihr Schreiben vom …" / "your letter of …".
        annex_ref: the line also names an annex label ("…, Anlage K1"): the cited document is our annex.
        filename: a file name the text cites ("(Aufhebungsvertrag Entwurf v1.docx)"), else None.
    """

    words: tuple[str, ...]
    date: dt.date | None
    number: str | None
    line: str
    reply: bool
    annex_ref: bool
    filename: str | None = None


def citations(facts: FileFacts, *, max_words: int = 6) -> list[Citation]:
    """Citations in the file's text (stamp lines and quoted e-mail text skipped).

    A number the file carries in its own name or title (an invoice's own number) is not a citation.
    """
    own = f"{facts.name} {facts.title}".lower()
    out: list[Citation] = []
    lines = [ln for ln in facts.lines if not (STAMP_LINE.match(ln) or ln.startswith(">"))]
    for i, ln in enumerate(lines):
        for fm in FILENAME_CITE.finditer(ln):
            name = fm.group(1).strip()
            if name != facts.name:
                out.append(Citation((), None, None, ln, False, False, filename=name))
        # a PDF text layer wraps lines anywhere: a date (and the sentence) may go on in the next line
        joined = f"{ln} {lines[i + 1]}" if i + 1 < len(lines) else ln
        prev_end = 0
        found = [(s, e, d) for s, e, d in dates_in(joined) if s < len(ln)]
        for start, end, d in found:
            before = joined[prev_end:start]
            prev_end = end
            if not CITE_PREP.search(before):
                continue
            words = content_words(CITE_PREP.sub("", before))[-max_words:]
            number = None
            nm = NUMBER_CITE.search(before)
            if nm and nm.group(1).lower() not in own and not IDENTIFIER_NUMBER.search(before[: nm.start()]):
                number = nm.group(1)
            if words or number:
                out.append(Citation(tuple(words), d, number, joined, bool(REPLY_CITE.search(before)),
                                    bool(ANNEX_MENTION.search(joined[end:end + 40]))))
        if not found:
            for nm in NUMBER_CITE.finditer(ln):
                if nm.group(1).lower() in own or IDENTIFIER_NUMBER.search(ln[: nm.start()]):
                    continue
                words = content_words(ln[: nm.start()])[-max_words:]
                if words:
                    out.append(Citation(tuple(words), None, nm.group(1), ln, False,
                                        bool(ANNEX_MENTION.search(ln[nm.end():nm.end() + 40]))))
    return out


def citation_score(cite: Citation, target: FileFacts) -> float:
    """How well ``target`` fits ``cite`` (0: not at all). A fit needs a naming word the target calls itself
    by (title or name), and the cited date among the target's own dates or the cited number in its
    name/title. A date the text states counts more than a name or modification date; an annex counts
    less than a main document."""
    if cite.filename is not None:
        return 3.0 if target.name == cite.filename else 0.0
    heading = target.heading_words
    if not any(words_match(w, h) for w in cite.words for h in heading):
        if not (cite.reply and target.is_letter_like):
            return 0.0
    score = 0.0 if target.annex_label else 0.25
    if cite.date is not None:
        if cite.date not in target.own_dates:
            return 0.0
        score += 1.5 if cite.date in target.text_dates else 1.0
    if cite.number is not None:
        hay = f"{target.name} {target.title} {' '.join(target.lines[:12])}"
        if cite.number.lower() in hay.lower():
            score += 1.0
        elif cite.date is None:
            return 0.0
    return score


def mentions_label(facts: FileFacts, label: str) -> bool:
    """Whether the text cites the annex ``label`` (``anlage k1``) anywhere outside its first line (a label a
    PDF text layer wraps onto the next line included)."""
    kind, ident = label.split(" ", 1)
    pattern = re.compile(rf"\b{re.escape(kind)}(?:s|n|en)?\s+(?:n[°o]\.?\s*)?{re.escape(ident)}\b", re.IGNORECASE)
    return bool(pattern.search(" ".join(ln for ln in facts.lines[1:] if not ln.startswith(">"))))


def is_amendment(facts: FileFacts) -> bool:
    """Nachtrag / Amendment / Änderungsvereinbarung in the title or the name."""
    return bool(AMEND_TITLE.search(facts.title or "") or AMEND_TITLE.search(facts.stem))


def is_responsive_pleading(facts: FileFacts) -> bool:
    """Klageerwiderung, Replik, Duplik, statement of defence...: a pleading answering another (never an e-mail)."""
    if facts.is_email:
        return False
    return bool(RESPONSIVE_TITLE.search(facts.title or "") or RESPONSIVE_TITLE.search(facts.stem))


def relation_type(source: FileFacts, cite: Citation, target: FileFacts) -> str:
    """The relation a citation makes: ``amends``, ``responds_to`` or ``references``."""
    if AMEND_VERB.search(cite.line) or (is_amendment(source) and not is_amendment(target)):
        return "amends"
    if cite.reply or RESPOND_VERB.search(cite.line):
        return "responds_to"
    if is_responsive_pleading(source) and any(w.startswith(PLEADING_WORDS) for w in cite.words):
        return "responds_to"
    return "references"
