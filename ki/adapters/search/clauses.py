"""Splitting an agreement's text into clauses: numbered sections, § headings, "Clause 12.3", schedules. Pure.

Spec: insertion-pipeline.md "Index" ("clause embeddings at ordinals 1000+ for final/executed versions"). A clause
starts at a heading line and runs to the next one. Headings recognised (German, English, Dutch, French):

* ``§ 4 Mietsicherheit``, ``§ 4a`` (the heading may stand on the next line);
* ``Clause 12.3 Escrow``, ``Article 7 – Term``, ``Artikel 3 Duur``, ``Ziffer 3 Vergütung``, ``Section 2``,
  ``Abschnitt 4``, ``Klausel 5``, ``Clausule 8``;
* a plain number: ``4. Governing Law``, ``4.2 Escrow`` (a capitalised title of at most ten words that does not end
  like a sentence — a numbered paragraph of prose is not a heading);
* schedules and annexes: ``Schedule 1``, ``Anlage 2 – Lageplan``, ``Annex A``, ``Bijlage 1``, ``Annexe 2``; the
  numbered paragraphs inside a schedule are clauses numbered ``Schedule 1, 2``;
* the unnumbered preamble headings (``Preamble``, ``Präambel``, ``Recitals``, ``Vorbemerkung``, ``Considerans``,
  ``Préambule``).

A text with fewer than :data:`MIN_CLAUSES` headings is not clause-structured (a letter's "1. Zahlung") and yields none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Fewer headings than this: the text is not an agreement split into clauses.
MIN_CLAUSES = 2
#: A heading line is at most this long.
HEADING_MAX_CHARS = 130
#: A clause's stored text is cut here (its whole text is in the passages anyway).
CLAUSE_MAX_CHARS = 6000

_WORD = r"[A-Za-zÄÖÜäöüßÀ-ÿ]"
_PARAGRAPH = re.compile(r"^\s*§\s*(?P<no>\d{1,3}[a-z]?)\b\s*[.:–—-]?\s*(?P<title>.*)$")
_NAMED = re.compile(r"^\s*(?P<word>Clause|Klausel|Clausule|Article|Artikel|Art\.|Ziffer|Ziff\.|Section|Abschnitt|"
                    r"Bepaling)\s+(?P<no>\d{1,3}(?:\.\d{1,3}){0,3}[a-z]?)\b\s*[.:–—-]?\s*(?P<title>.*)$")
_SCHEDULE = re.compile(r"^\s*(?P<word>Schedule|Anlage|Annex|Appendix|Exhibit|Bijlage|Annexe|Anhang)\s+"
                       r"(?P<no>\d{1,3}[a-z]?|[A-Z]|[IVX]{1,5})\b\s*[.:–—-]?\s*(?P<title>.*)$")
_NUMBERED = re.compile(r"^\s*(?P<no>\d{1,2}(?:\.\d{1,2}){1,3}|\d{1,2}(?=\.))\.?\s+(?P<title>.+)$")
_PREAMBLE = re.compile(r"^\s*(Preamble|Präambel|Recitals|Vorbemerkungen?|Considerans|Overwegingen|Préambule|"
                       r"Background)\s*:?\s*$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.;,:]\s*$")
#: A statutory reference at a line's start is prose wrapped there ("§ 3 Abs. 1 des Mietvertrags …").
_CITATION = re.compile(r"^(?:Abs\.|Absatz|Satz|S\.|Nr\.|lit\.|[A-Z][A-Za-z]{1,5}G\b|BGB|HGB|ZPO)")
#: "Vergütung: Wir rechnen …" — a label and its text on one line: the label is the heading.
_LABEL = re.compile(r"^(?P<label>[^\W\d_][\w\-]*(?:\s+[\w\-]+){0,3}):\s+\S")
#: "§ 9 Haftung. Die Haftung …" — a run-in heading: its title ends at the first full stop before a sentence.
_RUN_IN = re.compile(r"^(?P<head>[^.:;]{2,60}?)\.\s+(?=[A-ZÄÖÜ0-9„\"(])")
#: A run-in heading's title has at most this many words.
RUN_IN_MAX_WORDS = 5
#: A numbered line holds a heading, not a sentence, when its title has at most this many words.
NUMBERED_MAX_WORDS = 8
_CAPITAL = re.compile(r"^[A-ZÄÖÜÀ-Ý\"„“(]")


@dataclass(frozen=True)
class Clause:
    """One clause of a text: ``number`` (``"4"``, ``"12.3"``, ``"§ 4"``, ``"Schedule 1"``, ``"Schedule 1, 2"``,
    ``""`` for a preamble), ``heading`` (its title, may be ""), ``start`` / ``end`` (character offsets into the
    text: the heading line through the character before the next heading) and ``text`` (that span, stripped and
    cut at :data:`CLAUSE_MAX_CHARS`)."""

    number: str
    heading: str
    start: int
    end: int
    text: str


def _title_ok(title: str, *, numbered_only: bool) -> bool:
    """Whether ``title`` reads as a heading's title: short, not a sentence nor a citation; a bare number needs a
    capital and at most :data:`NUMBERED_MAX_WORDS` words."""
    t = title.strip()
    if not t:
        return not numbered_only
    words = len(t.split())
    if len(t) > HEADING_MAX_CHARS or _SENTENCE_END.search(t) or words > 12 or _CITATION.match(t):
        return False
    return bool(_CAPITAL.match(t)) and words <= NUMBERED_MAX_WORDS if numbered_only else True


def _continues(lines: list[str], i: int) -> bool:
    """Whether the line after ``i`` continues it (a wrapped sentence: the next line starts in lower case)."""
    nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
    return bool(nxt) and nxt[0].islower()


def _titled(title: str) -> tuple[str, bool] | None:
    """The title of a § / named / schedule heading and whether it is run in (its clause's text follows on the same
    line: ``Haftung. Die Haftung …`` → ``Haftung``), or None when the line is no heading."""
    run = None if _CITATION.match(title.strip()) else _RUN_IN.match(title.strip())
    if run and len(run["head"].split()) <= RUN_IN_MAX_WORDS and _title_ok(run["head"], numbered_only=False):
        return run["head"].strip(), True
    return (title.strip(), False) if _title_ok(title, numbered_only=False) else None


def _heading(line: str) -> tuple[str, str, str, bool] | None:
    """(kind, number, title, run in) of a heading line — kind ``paragraph`` / ``named`` / ``schedule`` /
    ``numbered`` / ``preamble``; run in: the clause's text follows the title on the same line — or None."""
    s = line.strip()
    if not s:
        return None
    m = _PARAGRAPH.match(s)
    if m and (t := _titled(m["title"])):
        return "paragraph", f"§ {m['no']}", *t
    m = _NAMED.match(s)
    if m and (t := _titled(m["title"])):
        return "named", m["no"], *t
    m = _SCHEDULE.match(s)
    if m and (t := _titled(m["title"])):
        return "schedule", f"{m['word']} {m['no']}", *t
    if len(s) > HEADING_MAX_CHARS:
        return None
    m = _NUMBERED.match(s)
    if m:
        label = _LABEL.match(m["title"])
        title = label["label"] if label else m["title"]
        if _title_ok(title, numbered_only=True) and re.search(_WORD, title):
            return "numbered", m["no"], title.strip(), label is not None
    if _PREAMBLE.match(s):
        return "preamble", "", s.rstrip(":").strip(), False
    return None


def split_clauses(text: str) -> list[Clause]:
    """The clauses of ``text`` in order (see the module docstring); [] when it is not clause-structured.

    A heading without a title (``§ 4`` alone) takes the next non-empty line as its title when that line is short
    and not itself a heading. Pure; linear in the text.
    """
    lines = text.split("\n")
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    found: list[tuple[int, str, str]] = []  # (line index, number, title)
    schedule: str | None = None
    for i, line in enumerate(lines):
        h = _heading(line)
        if h is None or (h[0] != "schedule" and h[2] and not h[3] and _continues(lines, i)):
            continue
        kind, number, title, _run_in = h
        if kind == "schedule":
            schedule = number
        elif kind == "numbered" and schedule is not None:
            number = f"{schedule}, {number}"
        if not title and kind != "preamble":
            nxt = next((j for j in range(i + 1, min(i + 3, len(lines))) if lines[j].strip()), None)
            if nxt is not None and _heading(lines[nxt]) is None and _title_ok(lines[nxt], numbered_only=False):
                title = lines[nxt].strip()
        found.append((i, number, " ".join(title.split())))
    if len(found) < MIN_CLAUSES:
        return []
    out: list[Clause] = []
    for n, (i, number, title) in enumerate(found):
        start = offsets[i] + (len(lines[i]) - len(lines[i].lstrip()))
        end = offsets[found[n + 1][0]] if n + 1 < len(found) else len(text)
        body = text[start:end].strip()
        out.append(Clause(number, title, start, start + len(text[start:end].rstrip()), body[:CLAUSE_MAX_CHARS]))
    return out
