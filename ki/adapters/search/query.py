"""What a search query means — one definition for both backends, the README and ``ki search --explain``.

One query semantics for both backends. Syntax (web-search style, as ``websearch_to_tsquery`` reads it):

- plain words: ``Kündigung Mieter``;
- a quoted phrase: ``"Pflichten des Mieters"`` (an unclosed quote runs to the end);
- an exclusion: ``-Entwurf``, ``-"erste Fassung"`` (a ``-`` that begins a word);
- alternatives: ``Kaufvertrag or Mietvertrag`` (``or``/``OR`` between two items joins them into one group).

A word with inner punctuation (``2024-0153``, ``a<b``, ``<<Mandant>>``) is analysed into its words
(:mod:`ki.adapters.search.analysis`) and must match them consecutively, like a phrase, but stays a plain word.

Meaning (:class:`ParsedQuery`): the items form **groups** (an item, or items joined by ``or``); a group
matches a passage when any of its alternatives does. A group made only of quoted phrases is **required**;
the others are **relaxable**.

1. *All groups* matching, nothing excluded: these rank first (``tier 1``);
2. then, when some relaxable group does not match anywhere with the rest: passages matching every required
   group and *at least one* relaxable group (``tier 2``), ranked by BM25 — passages matching more of the words,
   rarer ones, more often, rank higher. A query is never silently empty while some of its words match.

Within a tier, passages holding the plain words in a row (verbatim) get a bonus (a phrase match).

Exclusions apply to the whole document: a document any passage (or field) of which matches an excluded item
is not returned. A word matches its exact form, its German or English stem, the compounds that contain it
(``Mietvertrag`` finds ``Gewerbemietvertrag``, ranked below exact matches), and the document fields file
name, title, folders, document type, matter and parties (with boosts: :data:`FIELD_WEIGHTS`). Fields that say
the same thing count by their best match (:data:`FIELD_GROUPS`, :data:`FIELD_TIE_BREAKER`), and a compound
*ending* in the word in a field (``Aufforderungsschreiben`` for ``Schreiben``) counts as a near match there
(:data:`COMPOUND_HEAD_WEIGHT`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ki.adapters.search.analysis import WordForms, word_forms, words

#: A clause row's ``kind`` field also holds ``clause:<type>`` (its clause-facet node): what ``--clause-type``
#: filters on in both engines (:mod:`ki.adapters.search.query_plan`, :mod:`ki.adapters.search.lexical`).
CLAUSE_TAG = "clause:"
#: Weights of the passage streams (body text, comments, footnotes … : every textual part).
STREAM_WEIGHTS = {"exact": 1.0, "de": 0.7, "en": 0.5, "parts": 0.35}
#: Weight of a quoted phrase's exact match (×) and of its stemmed match.
PHRASE_EXACT_WEIGHT = 2.0
PHRASE_STEM_WEIGHT = 0.7
#: Document fields (the profile row of each document): (weight of the exact words, weight of stems/parts).
FIELD_WEIGHTS = {
    "title": (3.0, 1.5),
    "name": (3.0, 1.5),
    "folder": (1.5, 0.8),
    "type": (1.5, 0.8),
    "matter": (2.0, 1.0),
    "party": (2.0, 1.0),
}
#: Fields that say the same thing are scored by their best match: the best field's score + this × the others'
#: (OpenSearch ``dis_max`` / ``multi_match type=best_fields``; tantivy ``DisjunctionMaxQuery``), so a word
#: repeated in them does not outrank it in one by adding up — a compound in title *and* file name (an e-mail's
#: subject is its file name) stays below the exact word in a file name.
FIELD_TIE_BREAKER = 0.3
#: The field groups (:data:`FIELD_TIE_BREAKER` within a group; the groups' scores add up): the document's own
#: description (title, file name) and its context (folders, document type, matter, parties — a matter folder
#: is named like its matter). Measured on the dev estate's judged set (bench/search_judged.py): one group of
#: all six fields loses file-name recall (0.984: a short type or party field wins the best match over the
#: long file name of the files named with the word), these two groups 0.994, adding everything up 0.998 but
#: with compounds above exact matches.
FIELD_GROUPS: tuple[tuple[str, ...], ...] = (("title", "name"), ("folder", "type", "matter", "party"))
#: A single-part query word found as the *head* (last part) of a compound in a field (``Schreiben`` in the
#: file name ``Aufforderungsschreiben …``: an Aufforderungsschreiben *is* a Schreiben; a Klageerwiderung is no
#: Klage) adds this × the field's stem/part weight: such a document ranks below one whose field holds the word
#: itself, and above passages that merely mention the word.
COMPOUND_HEAD_WEIGHT = 1.0
#: Marks a compound's head in a field's extra stream (:func:`ki.adapters.search.lexical.field_streams`: ``>schreib``).
HEAD_MARK = ">"
FIELD_LABELS = {"title": "title", "name": "file name", "folder": "folder", "type": "document type",
                "matter": "matter", "party": "party"}

_ITEM = re.compile(r'(-?)"([^"]*)"?|(\S+)')
_OR = frozenset({"or", "OR"})


@dataclass(frozen=True)
class Item:
    """One query item: its words' forms (in order) and whether it was ``quoted``.

    A single-word item matches the word in any form; a multi-word item must match its words consecutively
    (exact words or stems)."""

    text: str
    forms: tuple[WordForms, ...]
    quoted: bool = False

    @property
    def single(self) -> WordForms | None:
        return self.forms[0] if len(self.forms) == 1 else None

    def describe(self) -> str:
        if self.single is not None:
            f = self.single
            alts = sorted({f.de, f.en} - {f.exact})
            out = f"'{f.exact}'" + (f" (stems {', '.join(alts)})" if alts else "")
            if len(f.parts_de) > 1:
                out += f"; in compounds: {' + '.join(f.parts_de)}"
            elif len(f.parts_nl) > 1:
                out += f"; in Dutch compounds: {' + '.join(f.parts_nl)}"
            else:
                out += f"; inside compounds as '{f.parts_de[0]}'"
            return out
        words_ = " ".join(f.exact for f in self.forms)
        return f"{'phrase' if self.quoted else 'consecutive words'} \"{words_}\""


@dataclass(frozen=True)
class Group:
    """Alternatives (joined by ``or``); matches when any item does."""

    items: tuple[Item, ...]

    @property
    def required(self) -> bool:
        return all(i.quoted for i in self.items)


@dataclass(frozen=True)
class ParsedQuery:
    """A parsed query (see the module docstring).

    Attributes:
        text: as typed.
        groups: every group, in query order.
        excluded: excluded items.
        ignored: pieces that hold no word (``--``, ``"…"`` with punctuation only, a dangling ``or``).
    """

    text: str
    groups: tuple[Group, ...]
    excluded: tuple[Item, ...] = ()
    ignored: tuple[str, ...] = field(default=())

    @property
    def required(self) -> tuple[Group, ...]:
        return tuple(g for g in self.groups if g.required)

    @property
    def relaxable(self) -> tuple[Group, ...]:
        return tuple(g for g in self.groups if not g.required)

    @property
    def empty(self) -> bool:
        return not self.groups

    @property
    def has_relaxed_tier(self) -> bool:
        """Whether tier 2 differs from tier 1 (some relaxable group may be missing)."""
        return len(self.relaxable) >= 1 and len(self.groups) >= 2

    def explain(self) -> list[str]:
        """How the query was understood, one line per statement (``ki search --explain``)."""
        lines = []
        if self.empty:
            lines.append("no word to search for" + (" (only exclusions)" if self.excluded else ""))
        for n, g in enumerate(self.groups, 1):
            kind = "required" if g.required else "word"
            alts = " or ".join(i.describe() for i in g.items)
            lines.append(f"{n}. {kind}: {alts}")
        for i in self.excluded:
            lines.append(f"excluded (documents containing it anywhere): {i.describe()}")
        for piece in self.ignored:
            lines.append(f"ignored: {piece!r} (no word in it)")
        if self.groups:
            lines.append("ranking: passages matching " + ("every group" if len(self.groups) > 1 else "it")
                         + " first (BM25)" + ("; then passages matching every required group and some of the "
                                              "words, more and rarer words first" if self.has_relaxed_tier else ""))
            lines.append("a word matches its exact form (weight 1), German stem (0.7), English stem (0.5), "
                         "compounds containing it (0.35); document fields: "
                         + ", ".join(f"{FIELD_LABELS[f]} ×{w[0]:g}" for f, w in FIELD_WEIGHTS.items())
                         + f"; of title and file name, and of the context fields, the best match counts "
                         f"(+{FIELD_TIE_BREAKER:g} × the others); a compound ending in the word (its head) counts "
                         "as a near match in a field")
        return lines


def _item(text: str, quoted: bool) -> Item | None:
    ws = words(text)
    if not ws:
        return None
    return Item(text, tuple(word_forms(w) for w in ws), quoted)


def parse_query(query: str) -> ParsedQuery:
    """Parse ``query`` (see the module docstring). Never raises: what cannot be read is ``ignored``."""
    pieces: list[tuple[str, Item | None, bool]] = []  # (raw, item, excluded) ; item None for "or"
    ignored: list[str] = []
    for m in _ITEM.finditer(query or ""):
        if m.group(2) is not None:  # a quoted phrase, maybe excluded
            item = _item(m.group(2), True)
            if item is None:
                ignored.append(m.group(0))
                continue
            pieces.append((m.group(0), item, m.group(1) == "-"))
            continue
        raw = m.group(3)
        if raw in _OR:
            pieces.append((raw, None, False))
            continue
        excluded = raw.startswith("-") and len(raw) > 1
        item = _item(raw[1:] if excluded else raw, False)
        if item is None:
            ignored.append(raw)
            continue
        pieces.append((raw, item, excluded))
    groups: list[list[Item]] = []
    excluded_items: list[Item] = []
    join_next = False
    for raw, item, excl in pieces:
        if item is None:  # "or"
            if groups and not join_next:
                join_next = True
            else:
                ignored.append(raw)
            continue
        if excl:
            excluded_items.append(item)
            continue
        if join_next and groups:
            groups[-1].append(item)
        else:
            groups.append([item])
        join_next = False
    if join_next:
        ignored.append("or")
    return ParsedQuery(query, tuple(Group(tuple(g)) for g in groups), tuple(excluded_items), tuple(ignored))
