"""The rules that pick a document type by walking the ontology search tool (pure over a ``search`` callable).

Spec: insertion-pipeline.md "Extract metadata" (only a node that appeared in a tool result and lies in
the active scope may be submitted) ("the offline rules policy, which walks the same tools
with keyword and synonym matching"). Nothing here knows node ids: every decision is a search of the
active ontology, so an estate's own ontology works the same way.

Evidence, strongest first:

1. an e-mail is an e-mail (``E-Mail`` / ``email`` searched), whatever its subject says;
2. the title: the hit that starts earliest (then the longest term, then the deepest node). A letter
   (salutation under an address block) only takes a title hit at the title's very start —
   "Angebot eines Aufhebungsvertrags" is a letter *about* a termination agreement — and not a contract
   named before a dash ("Framework Supply Agreement – signature copies" is a cover letter);
3. the file name, by the same rule;
4. cues of the text: a demand ("fordern wir Sie auf" → ``Aufforderungsschreiben``/``demand letter``), a
   schedule that "forms an integral part of the Agreement" (typed as that agreement), a fax cover
   sheet, any letter (``Schreiben``/``letter``);
5. otherwise untyped (None) — recorded honestly.

Ties between nodes matched by the same term are broken by the text's context: a court context
(case number, "In dem Rechtsstreit") prefers the court-filing family, any other context avoids it. In a
court context a title hit outside the court family gives way to a court-filing node that shares two
content words with the title, found by walking that family (``ontology_children``/``ontology_node``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from ki.domain.matters.references import CASE_NUMBER
from ki.domain.ontology.terms import MIN_COMPOUND, tokens

Search = Callable[[str], list[dict[str, Any]]]
Walk = Callable[[str, str], Any]
#: Words a term shares with any title without saying anything ("Protokoll *der* Verhandlung").
TERM_STOPWORDS = frozenset({"der", "die", "das", "des", "dem", "den", "und", "zur", "zum", "von", "of", "the", "and",
                            "for", "to", "a", "an", "in", "im", "am"})

SALUTATION = re.compile(r"(?m)^\s*(?:Sehr\s+geehrte[rns]?|Dear|Liebe[rs]?|Hallo|Guten\s+Tag)\b")
COURT_CONTEXT = re.compile(r"In\s+dem\s+Rechtsstreit|Im\s+Namen\s+des\s+Volkes|Geschäftsnummer|Aktenzeichen|"
                           r"\bin\s+the\s+matter\s+of\b|\bclaimant\b.*\bdefendant\b", re.IGNORECASE | re.DOTALL)
#: A demand for payment ("fordern wir Sie auf, den Betrag … zu überweisen"); a demand to repair is a letter.
DEMAND = re.compile(r"(?:fordern\s+(?:wir\s+)?Sie\s+(?:hiermit\s+)?(?:letztmalig\s+)?(?:nochmals\s+)?auf|"
                    r"\bauffordern\b)(?:[^.]|\.(?=\S)){0,160}?\b(?:zu\s+)?(?:zahlen|überweisen|auszugleichen|begleichen|erstatten)\b|"
                    r"\bwe\s+(?:hereby\s+)?(?:demand|call\s+upon\s+you\s+to\s+pay)\b(?:[^.]|\.(?=\S)){0,120}?\b(?:pay|payment|amount)|"
                    r"letter\s+before\s+action|request\s+(?:that\s+you\s+)?(?:pay|settle)\s+the\s+(?:outstanding|amount)",
                    re.IGNORECASE)
INTEGRAL = re.compile(r"forms?\s+an?\s+integral\s+part\s+of\s+(?:the|this)\s+Agreement|"
                      r"(?:ist|bildet|sind)\s+(?:ein\s+)?(?:wesentlicher\s+|integraler\s+)?Bestandteil\s+(?:des|dieses)",
                      re.IGNORECASE)
PARENT_DOC = re.compile(r"\b(?:to|zum|zur|of)\s+(?:the\s+|dem\s+)?(?P<doc>[A-ZÄÖÜ][\w\-]+(?:\s+[A-ZÄÖÜ][\w\-]+){0,4})"
                        r"\s+(?:between|zwischen|dated|vom)\b")
FAX = re.compile(r"^\s*(?:TELEFAX|Telefax|FAX|Fax)\b")
#: Words a file name carries that say nothing about the type.
NAME_NOISE = re.compile(r"\b(?:\d{4}-\d{2}-\d{2}|\d{1,2}\.\d{1,2}\.\d{2,4}|v\d+|entwurf|draft|final|endfassung|"
                        r"signed|executed|unterzeichnet|eingereicht|copy|kopie|clean|redline|marked|compare|"
                        r"\(\d+\)|\d{4,})\b", re.IGNORECASE)

DEMAND_QUERIES = ("Aufforderungsschreiben", "demand letter", "Zahlungsaufforderung", "letter before action")
FAX_QUERIES = ("Telefax", "fax")
LETTER_QUERIES = ("Schreiben", "letter", "Brief")
MAIL_QUERIES = ("E-Mail", "email")
COURT_PROBES = ("Klageschrift", "statement of claim", "Urteil", "judgment")
CONTRACT_PROBES = ("Vertrag", "agreement", "contract")
#: A subject line naming a document and then what the letter does with it ("… – signature copies").
SUBJECT_SUFFIX = re.compile(r"\s[–-]\s+\S")


@dataclass(frozen=True)
class TypingFacts:
    """What the typing rules read off one document.

    Attributes:
        title / filename: the document's title and file name without extension and noise words.
        is_mail: an e-mail (``structured_json.mail`` present).
        letter: a letter's shape (salutation in the first lines, not an e-mail).
        court_context: the text is about court proceedings.
        head: the first 3,000 characters of the text.
    """

    title: str
    filename: str
    is_mail: bool
    letter: bool
    court_context: bool
    head: str


def typing_facts(body: dict[str, Any], path: str, title: str) -> TypingFacts:
    """Build :class:`TypingFacts` from a ``structured_json`` body, its path and its title."""
    text = body.get("text") or ""
    head = text[:3000]
    is_mail = body.get("mail") is not None
    stem = NAME_NOISE.sub(" ", PurePath(path).stem.replace("_", " "))
    return TypingFacts(title=title or "", filename=" ".join(stem.split()), is_mail=is_mail,
                       letter=not is_mail and bool(SALUTATION.search(text[:2500])),
                       court_context=bool(COURT_CONTEXT.search(head) or CASE_NUMBER.search(head)), head=head)


def _key(hit: dict[str, Any]) -> tuple:
    m = hit["match"]
    strength = {"exact": 3, "inflected": 2, "compound": 1}.get(m["kind"], 0)
    return (m["start"], -m["length"], -strength, -len(hit["path"]))


def _best(hits: list[dict[str, Any]], court_roots: set[str], court_context: bool) -> dict[str, Any] | None:
    if not hits:
        return None
    top = min(_key(h) for h in hits)
    tied = [h for h in hits if _key(h) == top]
    if len(tied) > 1 and court_roots:
        preferred = [h for h in tied if (h["path"][0] in court_roots) == court_context]
        tied = preferred or tied
    return sorted(tied, key=lambda h: h["id"])[0]


def _first_hit(search: Search, queries: tuple[str, ...], *, whole: bool = True) -> dict[str, Any] | None:
    for q in queries:
        hits = [h for h in search(q) if not whole or h["score"] >= 0.9]
        if hits:
            return sorted(hits, key=_key)[0]
    return None


def _overlap(term: list[str], title: list[str]) -> int:
    """Content tokens of ``term`` found in ``title`` (exactly or as the head of a compound)."""
    found = 0
    for tok in term:
        if tok in TERM_STOPWORDS:
            continue
        if any(t == tok or (len(tok) >= MIN_COMPOUND and len(t) > len(tok) and t.endswith(tok)) for t in title):
            found += 1
    return found


def _court_leaf(title: str, court_roots: set[str], walk: Walk) -> str | None:
    """In a court context, the court-filing node sharing at least two content words with the title
    ("Protokoll der Güteverhandlung" ~ "Protokoll der mündlichen Verhandlung"), found by walking the tree."""
    title_toks = tokens(title)
    best, best_key = None, (0, 0.0)
    for root in sorted(court_roots):
        for child in walk("children", root):
            view = walk("node", child["id"])
            terms = [str(v) for v in view["label"].values() if v]  # every language the node is named in
            terms += [str(x) for vs in view["synonyms"].values() for x in (vs if isinstance(vs, list) else [vs])]
            for term in terms:
                toks = [t for t in tokens(term) if t not in TERM_STOPWORDS]
                found = _overlap(toks, title_toks)
                key = (found, found / len(toks) if toks else 0.0)
                if found >= 2 and key[1] >= 0.6 and key > best_key:
                    best, best_key = child["id"], key
    return best


def choose_type(facts: TypingFacts, search: Search, walk: Walk | None = None) -> tuple[str | None, str]:
    """(node id or None, the rule that decided) — every id comes from a ``search`` or ``walk`` result.

    ``walk(kind, node_id)`` calls ``ontology_children`` (kind ``children``: a list of node summaries) or
    ``ontology_node`` (kind ``node``: the node view); without it the court-context walk is skipped.
    """
    if facts.is_mail:
        hit = _first_hit(search, MAIL_QUERIES)
        if hit:
            return hit["id"], "mail"
    court_roots: set[str] = set()
    for probe in COURT_PROBES:
        court_roots.update(h["path"][0] for h in search(probe) if h["score"] >= 0.9)
    contract_roots = {h["path"][0] for probe in CONTRACT_PROBES for h in search(probe) if h["score"] >= 0.9}
    for source, query in (("title", facts.title), ("filename", facts.filename)):
        if source == "filename" and facts.letter and DEMAND.search(facts.head):
            break  # a letter's own words say more than a file name ("Schreiben an Gegenseite")
        if not query.strip():
            continue
        best = _best(search(query), court_roots, facts.court_context)
        if best is not None and facts.letter and best["path"][0] in contract_roots and SUBJECT_SUFFIX.search(query):
            continue  # "Framework Supply Agreement – signature copies": a letter about a contract
        if best is not None and (not facts.letter or best["match"]["start"] == 0):
            if facts.court_context and court_roots and best["path"][0] not in court_roots and walk is not None:
                court = _court_leaf(query, court_roots, walk)
                if court is not None:
                    return court, f"{source}_court_context"
            return best["id"], source
    if DEMAND.search(facts.head):
        hit = _first_hit(search, DEMAND_QUERIES)
        if hit:
            return hit["id"], "demand_cue"
    if INTEGRAL.search(facts.head):
        parent = PARENT_DOC.search(facts.head)
        if parent:
            best = _best(search(parent.group("doc")), court_roots, facts.court_context)
            if best is not None and best["match"]["start"] == 0:
                return best["id"], "integral_schedule"
    if FAX.search(facts.head):
        hit = _first_hit(search, FAX_QUERIES) or _first_hit(search, LETTER_QUERIES)
        if hit:
            return hit["id"], "fax_cue"
    if facts.letter:
        hit = _first_hit(search, LETTER_QUERIES)
        if hit:
            return hit["id"], "letter_cue"
    return None, "untyped"
