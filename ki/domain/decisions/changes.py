"""Tracked changes → changed points (the rules behind a DecisionRecord's entries). Pure.

Spec: insertion-pipeline.md "Extract decisions"; DESIGN.md "Decisions"; the shared corpus README
("a ``w:del`` followed by a ``w:ins`` by the same author is a ``replacement``, a lone ``w:ins`` an
``insertion``, a lone ``w:del`` a ``deletion``. Formatting-only changes are revisions but not decisions.
``locus`` is the enclosing clause heading; ``rationale`` is the text of the Word comment anchored on
the change"). Case R05: ``EUR 1,200 → EUR 1,350`` and ``B → C`` (inside a hyperlink) are
replacements, the inserted termination sentence an insertion.

Rules:

* content revisions are ``ins``, ``del``, ``moveFrom`` and ``moveTo`` with text; paragraph, row and cell
  marks and formatting changes are not decisions;
* a deletion directly followed by an insertion of the same author in the same paragraph is a
  replacement; a ``moveFrom``/``moveTo`` pair (same move name, else adjacent) is a move;
* the rationale is the comment whose anchor overlaps the changed text (or whose anchor is the
  paragraph's changed text), its category and generalizability come from keyword rules over the
  locus and the changed text (:mod:`ki.domain.decisions.taxonomy`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ki.domain.decisions.locus import locus_for
from ki.domain.decisions.taxonomy import Taxonomy, rationale_taxonomy

CONTENT_KINDS = frozenset({"ins", "del", "moveFrom", "moveTo"})
NUMBERISH = re.compile(r"\d|EUR|€|USD|GBP|CHF|m²|%")
MAX_SUMMARY_TEXT = 120


@dataclass
class Change:
    """One changed point (before ``""`` for an insertion, after ``""`` for a deletion)."""

    kind: str
    before: str
    after: str
    author: str | None
    date: str | None
    paragraph: int | None
    container: str | None = None


def _text(rev: dict[str, Any]) -> str:
    return rev.get("text") or ""


def content_revisions(revisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Revisions that change content and carry text, in document order (each ``w:ins``/``w:del`` is one)."""
    return [dict(rev) for rev in revisions if rev.get("kind") in CONTENT_KINDS and _text(rev).strip()]


def _date(rev: dict[str, Any]) -> str | None:
    value = rev.get("date")
    return value if value is None or isinstance(value, str) else value.isoformat()


def pair_changes(revisions: list[dict[str, Any]]) -> list[Change]:
    """The changed points of a document's revisions, in document order."""
    revs = content_revisions(revisions)
    changes: list[Change] = []
    used: set[int] = set()
    for i, rev in enumerate(revs):
        if i in used:
            continue
        kind = rev["kind"]
        nxt = revs[i + 1] if i + 1 < len(revs) else None
        if kind == "del" and nxt is not None and nxt["kind"] == "ins" and nxt.get("author") == rev.get("author") \
                and nxt.get("paragraph") == rev.get("paragraph"):
            used.add(i + 1)
            changes.append(Change("replacement", _text(rev), _text(nxt), rev.get("author"), _date(rev),
                                  rev.get("paragraph"), rev.get("container")))
        elif kind == "moveFrom":
            j = next((k for k in range(i + 1, len(revs)) if k not in used and revs[k]["kind"] == "moveTo"
                      and (revs[k].get("move_name") == rev.get("move_name") or not rev.get("move_name"))), None)
            if j is not None:
                used.add(j)
            changes.append(Change("move", _text(rev), _text(revs[j]) if j is not None else _text(rev),
                                  rev.get("author"), _date(rev), revs[j].get("paragraph") if j is not None
                                  else rev.get("paragraph"), rev.get("container")))
        elif kind == "moveTo":
            changes.append(Change("move", _text(rev), _text(rev), rev.get("author"), _date(rev), rev.get("paragraph"),
                                  rev.get("container")))
        elif kind == "ins":
            changes.append(Change("insertion", "", _text(rev), rev.get("author"), _date(rev), rev.get("paragraph"),
                                  rev.get("container")))
        else:
            changes.append(Change("deletion", _text(rev), "", rev.get("author"), _date(rev), rev.get("paragraph"),
                                  rev.get("container")))
    return changes


def rationale_for(change: Change, comments: list[dict[str, Any]]) -> str | None:
    """The text of the comment anchored on the change (anchor overlaps its before/after text), or None."""
    texts = [t.strip() for t in (change.after, change.before) if t and t.strip()]
    for comment in comments:
        anchor = (comment.get("anchor_text") or "").strip()
        body = (comment.get("text") or "").strip()
        if not anchor or not body or comment.get("parent_id"):
            continue
        if any(anchor in t or t in anchor for t in texts):
            return body
    return None


def categorise(change: Change, locus: str | None, taxonomy: Taxonomy | None = None) -> str:
    """The rationale category: the category whose keywords occur most in the locus and changed text."""
    taxonomy = taxonomy or rationale_taxonomy()
    hay_locus = (locus or "").casefold()
    hay_text = f"{change.before} {change.after}".casefold()
    best, best_score = "other", 0.0
    for cat_id, cat in taxonomy.categories.items():
        score = 0.0
        for kw in cat.get("keywords", []):
            kw = kw.casefold()
            if kw in hay_locus:
                score += 2
            if kw in hay_text:
                score += 1
        if score > best_score:
            best, best_score = cat_id, score
    if best == "other" and NUMBERISH.search(change.before + change.after):
        return "commercial_terms"
    return best


def generalizability(change: Change, category: str) -> str:
    """``deal_specific`` (a value of this deal), ``negotiable_position`` (a clause position) or
    ``drafting_standard`` (wording)."""
    if category == "drafting":
        return "drafting_standard"
    texts = [t for t in (change.before, change.after) if t]
    if texts and all(len(t) <= 40 and NUMBERISH.search(t) for t in texts):
        return "deal_specific"
    return "negotiable_position"


def summary(change: Change, locus: str | None) -> str:
    """One line: ``§ 3 Miete: "EUR 1,200" → "EUR 1,350"`` / ``inserted "…"`` / ``deleted "…"``."""
    def cut(value: str) -> str:
        value = " ".join(value.split())
        return value if len(value) <= MAX_SUMMARY_TEXT else value[:MAX_SUMMARY_TEXT - 1] + "…"

    where = f"{locus}: " if locus else ""
    if change.kind == "replacement":
        return f"{where}\"{cut(change.before)}\" → \"{cut(change.after)}\""
    if change.kind == "insertion":
        return f"{where}inserted \"{cut(change.after)}\""
    if change.kind == "deletion":
        return f"{where}deleted \"{cut(change.before)}\""
    return f"{where}moved \"{cut(change.after or change.before)}\""


def decision_entries(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The rules' entries for a ``structured_json`` body: one dict per changed point with ``locus``,
    ``before``, ``after``, ``kind``, ``change_summary``, ``rationale_category``, ``rationale_text``,
    ``generalizability``, ``author``, ``date``."""
    text = body.get("text") or ""
    original = body.get("original_text") or text
    lines, original_lines = text.split("\n"), original.split("\n")
    comments = body.get("comments") or []
    out = []
    for change in pair_changes(body.get("revisions") or []):
        if change.kind == "deletion":  # the deleted paragraph exists only in the original view
            locus = locus_for(None, original, before_text=change.before, lines=original_lines)
        else:
            locus = locus_for(change.paragraph, text, before_text=change.after or None, lines=lines)
        category = categorise(change, locus)
        out.append({"locus": locus, "before": change.before, "after": change.after, "kind": change.kind,
                    "change_summary": summary(change, locus), "rationale_category": category,
                    "rationale_text": rationale_for(change, comments),
                    "generalizability": generalizability(change, category), "author": change.author,
                    "date": change.date})
    return out
