"""Clause headings and the locus of a change: the enclosing heading of a paragraph. Pure.

Spec: insertion-pipeline.md "Extract decisions" (locus); the shared corpus README ("``locus`` is the
enclosing clause heading"). A heading is a short line that numbers a clause — ``§ 4 Mietsicherheit``,
``4. Governing Law``, ``4.2 Escrow``, ``Article 7 – Term``, ``Ziffer 3 Vergütung`` — or a short
title-like line without a final full stop followed by body text.
"""

from __future__ import annotations

import re

HEADING = re.compile(
    r"^\s*(?:§\s*\d+[a-z]?|(?:Art(?:ikel|icle)?\.?|Clause|Ziffer|Section|Abschnitt)\s+\d+[a-z]?|"
    r"\d{1,2}(?:\.\d{1,2})*\.?|[IVX]{1,5}\.)\s+[A-ZÄÖÜ][^\n]{1,90}$"
)
#: A numbered paragraph of body text looks like a heading but ends like a sentence or runs long.
_SENTENCE_END = re.compile(r"[.;:,]\s*$")
#: An unnumbered heading: one to four capitalised words ("Anträge", "Begründung", "Preamble").
PLAIN_HEADING = re.compile(r"^\s*[A-ZÄÖÜ][\wäöüß\-]*(?:\s+(?:[A-ZÄÖÜ][\wäöüß\-]*|and|und|of|der|des|the)){0,3}\s*$")
#: A label line: the label is the locus of a change in its value ("Streitwert: EUR 143.289,00").
LABEL_LINE = re.compile(r"^\s*([A-ZÄÖÜ][\wäöüß\- ]{1,30}?)\s*:\s+\S")


def is_heading(line: str) -> bool:
    """Whether ``line`` is a clause heading (numbered, short, not ending like a sentence)."""
    s = line.strip()
    if not s or len(s) > 100 or _SENTENCE_END.search(s):
        return False
    if not HEADING.match(s):
        return False
    words = s.split()
    return len(words) <= 10


def is_plain_heading(line: str) -> bool:
    """Whether ``line`` is an unnumbered heading (a few capitalised words, no digits, no punctuation)."""
    return bool(PLAIN_HEADING.match(line)) and len(line.strip()) <= 40


def headings(text: str) -> list[tuple[int, str]]:
    """(line index, heading text) of every clause heading in ``text`` (lines = paragraphs)."""
    return [(i, " ".join(line.split())) for i, line in enumerate((text or "").split("\n")) if is_heading(line)]


def locus_for(paragraph: int | None, text: str, *, before_text: str | None = None,
              lines: list[str] | None = None) -> str | None:
    """The heading enclosing paragraph ``paragraph`` (a line index of ``text``), or None.

    A change inside a heading line itself is located at that heading. When ``paragraph`` is None the
    paragraph is searched by ``before_text`` (the text the change touched) — first line containing it.
    ``lines``: ``text.split("\\n")`` when the caller already has it (one split per document, not per
    change: a long document with many changes stays linear).
    """
    lines = lines if lines is not None else (text or "").split("\n")
    if paragraph is None and before_text:
        needle = before_text.strip()
        paragraph = next((i for i, line in enumerate(lines) if needle and needle in line), None)
    if paragraph is None or not lines:
        return None
    paragraph = min(paragraph, len(lines) - 1)
    label = LABEL_LINE.match(lines[paragraph])
    if label and not is_heading(lines[paragraph]):
        return label.group(1).strip()
    for i in range(paragraph, -1, -1):
        if is_heading(lines[i]) or (i < paragraph and is_plain_heading(lines[i])):
            return " ".join(lines[i].split())
    return None
