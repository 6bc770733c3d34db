"""Walker over OpenDocument content (``content.xml``, ``styles.xml``): lines, notes, annotations, tracked changes.

Spec: OASIS OpenDocument 1.3 Part 3 — §5.1 paragraphs (``text:p``, ``text:h``; ``text:s``, ``text:tab``,
``text:line-break``), §5.3 lists, §6.3 notes (``text:note``: its body is a ``footnote``/``endnote`` part, not
body text), §14.1 annotations (``office:annotation``: a comment with author and date), §5.5 tracked changes
(``text:tracked-changes``: an insertion's text lies in the body between ``text:change-start`` and
``text:change-end``; a deletion's text is kept in its ``text:changed-region`` and marked in the body by
``text:change``). Tables (§9) give one line per row, cells joined by ``" | "``; a covered (merged) cell is
skipped, so a merged value is read once; repeated rows and cells are repeated at most :data:`MAX_REPEAT`
times. Frames, text boxes and shapes (with their ``svg:title``/``svg:desc``) give lines after the paragraph
that anchors them. Unknown elements are searched for text; the walker never raises on markup.

Two views, as for DOCX revisions: the accepted view (the document as shown: insertions in, deletions out) and
the original view (insertions out, deletions back at their ``text:change``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from lxml import etree

from ki.adapters.convert.model import Comment, Revision
from ki.adapters.convert.ooxml_blocks import ROW_SEP
from ki.adapters.convert.ooxml_ns import parse_ooxml_date

TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
SVG = "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"
DC = "http://purl.org/dc/elements/1.1/"
XLINK = "http://www.w3.org/1999/xlink"
PRESENTATION = "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"
MAX_REPEAT = 100
MAX_DEPTH = 200

_PARAGRAPHS = frozenset({f"{{{TEXT}}}p", f"{{{TEXT}}}h"})
_NO_TEXT = frozenset({f"{{{TEXT}}}tracked-changes", f"{{{TEXT}}}sequence-decls", f"{{{TEXT}}}variable-decls",
                      f"{{{TEXT}}}user-field-decls", f"{{{OFFICE}}}forms", f"{{{TEXT}}}note-citation",
                      f"{{{OFFICE}}}annotation-end", f"{{{TABLE}}}covered-table-cell", f"{{{OFFICE}}}event-listeners",
                      f"{{{TEXT}}}bookmark-ref", f"{{{TEXT}}}soft-page-break", f"{{{DRAW}}}image",
                      f"{{{DC}}}creator", f"{{{DC}}}date"})
_SHAPES_WITH_DESC = frozenset({f"{{{SVG}}}title", f"{{{SVG}}}desc"})

ObjectReader = Callable[[str], list[str]]


@dataclass
class _Change:
    kind: str  # "ins", "del" or "other_format"
    author: str | None
    date: str | None
    deleted: list[str] = field(default_factory=list)  # a deletion's paragraphs (original view)
    inserted: list[str] = field(default_factory=list)


def _squeeze(text: str) -> str:
    return " ".join(text.split())


class OdfWalker:
    """Walks ODF body elements into lines; collects notes, comments and revisions on the way.

    Args:
        tracked: the ``text:tracked-changes`` element of the document (or None).
        read_object: returns the lines of an embedded object (``draw:object`` ``xlink:href``), or [].
    """

    def __init__(self, tracked: etree._Element | None = None, read_object: ObjectReader | None = None):
        self.changes: dict[str, _Change] = {}
        self.notes: dict[str, list[str]] = {"footnote": [], "endnote": []}
        self.comments: list[Comment] = []
        self.read_object = read_object
        self._open_insertions: set[str] = set()
        self._pending: list[tuple[str, str]] = []
        self._anchoring: list[Comment] = []
        if tracked is not None:
            self._read_tracked(tracked)

    # ------------------------------------------------------------------ tracked changes

    def _read_tracked(self, tracked: etree._Element) -> None:
        for region in tracked.iter(f"{{{TEXT}}}changed-region"):
            cid = region.get(f"{{{TEXT}}}id") or region.get("{http://www.w3.org/XML/1998/namespace}id") or ""
            for change in region:
                local = etree.QName(change).localname
                kind = {"insertion": "ins", "deletion": "del", "format-change": "other_format"}.get(local)
                if kind is None:
                    continue
                info = change.find(f"{{{OFFICE}}}change-info")
                author = _squeeze(info.findtext(f"{{{DC}}}creator") or "") if info is not None else ""
                date = (info.findtext(f"{{{DC}}}date") or "").strip() if info is not None else ""
                record = _Change(kind, author or None, date or None)
                if kind == "del":
                    saved = OdfWalker(read_object=self.read_object)
                    record.deleted = [acc for acc, _orig in saved.blocks(change) if acc]
                self.changes[cid] = record

    def revisions(self) -> list[Revision]:
        """One revision per changed region with text: ``ins`` (the inserted text), ``del`` (the deleted text)."""
        out = []
        for cid, ch in self.changes.items():
            text = _squeeze(" ".join(ch.inserted)) if ch.kind == "ins" else "\n".join(ch.deleted)
            if ch.kind == "other_format" or text:
                out.append(Revision(kind=ch.kind, text=text, author=ch.author, date=parse_ooxml_date(ch.date),
                                    revision_id=cid))
        return out

    # ------------------------------------------------------------------ blocks

    def blocks(self, el: etree._Element, depth: int = 0) -> list[tuple[str, str]]:
        """Lines ``(accepted, original)`` of the block content of ``el`` (its paragraphs, lists, tables, sections)."""
        out: list[tuple[str, str]] = []
        if depth > MAX_DEPTH:
            return out
        for child in el:
            if not isinstance(child.tag, str) or child.tag in _NO_TEXT:
                continue
            if child.tag in _PARAGRAPHS:
                out += self.paragraph(child, depth)
            elif child.tag == f"{{{TABLE}}}table":
                out += self.table(child, depth)
            elif child.tag == f"{{{OFFICE}}}annotation":
                self._annotation(child, depth)
            elif child.tag == f"{{{TEXT}}}change":
                out += [(None, line) for line in self._deleted(child)]  # type: ignore[misc]
            elif child.tag in (f"{{{TEXT}}}change-start", f"{{{TEXT}}}change-end"):
                self._change_mark(child)
            elif child.tag in _SHAPES_WITH_DESC:
                text = _squeeze("".join(child.itertext()))
                if text:
                    out.append((text, text))
            elif child.tag == f"{{{DRAW}}}object":
                out += self._object(child)
            else:
                out += self.blocks(child, depth + 1)
        return [(acc or "", orig or "") for acc, orig in out]

    def paragraph(self, el: etree._Element, depth: int) -> list[tuple[str, str]]:
        """One paragraph as a line, then the lines of the frames and shapes it anchors."""
        acc: list[str] = []
        orig: list[str] = []
        outer_pending, self._pending = self._pending, []
        anchoring, self._anchoring = self._anchoring, []
        self._inline(el, acc, orig, depth)
        line = (_squeeze("".join(acc)), _squeeze("".join(orig)))
        for comment in self._anchoring:
            comment.anchor_text = line[0] or None
        lines = [line, *self._pending]
        self._pending, self._anchoring = outer_pending, anchoring
        return lines

    def _emit(self, text: str | None, acc: list[str], orig: list[str]) -> None:
        if not text:
            return
        acc.append(text)
        if self._open_insertions:
            for cid in self._open_insertions:
                self.changes[cid].inserted.append(text)
        else:
            orig.append(text)

    def _inline(self, el: etree._Element, acc: list[str], orig: list[str], depth: int) -> None:
        self._emit(el.text, acc, orig)
        for child in el:
            if depth > MAX_DEPTH:
                break
            tag = child.tag if isinstance(child.tag, str) else ""
            if tag == f"{{{TEXT}}}s":
                self._emit(" " * min(int(child.get(f"{{{TEXT}}}c") or 1), 100), acc, orig)
            elif tag in (f"{{{TEXT}}}tab", f"{{{TEXT}}}line-break"):
                self._emit(" ", acc, orig)
            elif tag == f"{{{TEXT}}}note":
                self._note(child, depth)
            elif tag == f"{{{OFFICE}}}annotation":
                self._annotation(child, depth)
            elif tag in (f"{{{TEXT}}}change-start", f"{{{TEXT}}}change-end"):
                self._change_mark(child)
            elif tag == f"{{{TEXT}}}change":
                orig.append(" ".join(self._deleted(child)))
            elif tag == f"{{{DRAW}}}object":
                self._pending += self._object(child)
            elif tag.startswith(f"{{{DRAW}}}") or tag == f"{{{TABLE}}}table":
                self._pending += self.blocks(child, depth + 1) if tag != f"{{{TABLE}}}table" \
                    else self.table(child, depth + 1)
            elif tag and tag not in _NO_TEXT:
                self._inline(child, acc, orig, depth + 1)
            self._emit(child.tail, acc, orig)

    def _change_mark(self, el: etree._Element) -> None:
        cid = el.get(f"{{{TEXT}}}change-id") or ""
        change = self.changes.get(cid)
        if change is None or change.kind != "ins":
            return
        if etree.QName(el).localname == "change-start":
            self._open_insertions.add(cid)
        else:
            self._open_insertions.discard(cid)

    def _deleted(self, el: etree._Element) -> list[str]:
        change = self.changes.get(el.get(f"{{{TEXT}}}change-id") or "")
        return change.deleted if change is not None and change.kind == "del" else []

    def _note(self, el: etree._Element, depth: int) -> None:
        kind = "endnote" if el.get(f"{{{TEXT}}}note-class") == "endnote" else "footnote"
        body = el.find(f"{{{TEXT}}}note-body")
        if body is not None:
            outer = self._pending
            self._pending = []
            self.notes[kind] += [acc for acc, _orig in self.blocks(body, depth + 1) if acc]
            self._pending = outer

    def _annotation(self, el: etree._Element, depth: int) -> None:
        author = _squeeze(el.findtext(f"{{{DC}}}creator") or "") or None
        date = parse_ooxml_date(el.findtext(f"{{{DC}}}date"))
        lines = [acc for acc, _o in OdfWalker(read_object=self.read_object).blocks(el, depth + 1) if acc]
        if lines:
            comment = Comment(comment_id=el.get(f"{{{OFFICE}}}name") or str(len(self.comments) + 1), author=author,
                              date=date, text="\n".join(lines))
            self.comments.append(comment)
            self._anchoring.append(comment)

    def _object(self, el: etree._Element) -> list[tuple[str, str]]:
        href = (el.get(f"{{{XLINK}}}href") or "").removeprefix("./").strip("/")
        lines = self.read_object(href) if self.read_object and href else []
        return [(line, line) for line in lines]

    # ------------------------------------------------------------------ tables

    def table(self, el: etree._Element, depth: int = 0) -> list[tuple[str, str]]:
        """One line per row (cells joined by ``" | "``); repeats bounded by :data:`MAX_REPEAT`."""
        out: list[tuple[str, str]] = []
        for row in el.iter(f"{{{TABLE}}}table-row"):
            if _nearest_table(row) is not el:
                continue  # a row of a nested table is read with its cell
            acc_cells: list[str] = []
            orig_cells: list[str] = []
            for cell in row:
                if cell.tag != f"{{{TABLE}}}table-cell":
                    continue
                lines = self.blocks(cell, depth + 1)
                acc = " ".join(a for a, _o in lines if a)
                orig = " ".join(o for _a, o in lines if o)
                repeat = _repeat(cell, "number-columns-repeated") if acc or orig else 1
                acc_cells += [acc] * repeat
                orig_cells += [orig] * repeat
            line = (ROW_SEP.join(c for c in acc_cells if c), ROW_SEP.join(c for c in orig_cells if c))
            if line[0] or line[1]:
                out += [line] * _repeat(row, "number-rows-repeated")
        return out


def _repeat(el: etree._Element, attr: str) -> int:
    try:
        return max(1, min(int(el.get(f"{{{TABLE}}}{attr}") or 1), MAX_REPEAT))
    except ValueError:
        return 1


def _nearest_table(row: etree._Element) -> etree._Element | None:
    return next((a for a in row.iterancestors(f"{{{TABLE}}}table")), None)

