"""Tables of a WordprocessingML part: rows and cells, with their revision marks.

Implements the table rules of conversion.md section 6: a row is one line (its kept cells joined by
``ROW_SEP``); deleted/inserted rows (``w:trPr/w:del|w:ins``) and cells (``w:tcPr/w:cellDel|w:cellIns``)
leave the accepted/original view, and a row or cell revision's text is the row or cell it removed or
added. Content controls, ``customXml`` and ``mc:AlternateContent`` around rows and cells are read
through. A mixin of :class:`ki.adapters.convert.ooxml_walk.OoxmlWalker`, whose state and block walk it uses.
"""

from __future__ import annotations

from lxml import etree

from ki.adapters.convert.ooxml_blocks import ROW_SEP, Block, RevisionRecord
from ki.adapters.convert.ooxml_ns import MC_NS, RANGE_MARKERS, W_NS, split_tag, w_children


class TableWalk:
    """The table level of :class:`ki.adapters.convert.ooxml_walk.OoxmlWalker` (rows, cells, their revisions)."""

    def _table(self, tbl: etree._Element, block: Block) -> None:
        block.flush()
        for child in tbl:
            ns, local = split_tag(child.tag)
            if ns in W_NS:
                if local == "tr":
                    self._row(child, block)
                elif local in ("tblPr", "tblGrid"):
                    self._props(child, "x", self._loose)
                elif local in ("sdt", "customXml"):
                    inner = w_children(child, "sdtContent") if local == "sdt" else [child]
                    for content in inner:
                        self._table(content, block)
                elif local in RANGE_MARKERS:
                    self._range(child, local)
            elif ns == MC_NS and local == "AlternateContent":
                branch = self._choice(child)
                if branch is not None:
                    self._table(branch, block)

    def _row(self, tr: etree._Element, block: Block) -> None:
        saved = self._para
        self._para = None
        revs: list[RevisionRecord] = self._take_loose()
        marks: set[str] = set()
        row_revs: list[RevisionRecord] = []
        cells: list[tuple[str | None, str | None]] = []
        for child in tr:
            ns, local = split_tag(child.tag)
            if ns in W_NS and local == "trPr":
                start = len(revs)
                marks |= self._props(child, "tr", revs)
                row_revs = [r for r in revs[start:] if r.kind in ("row_ins", "row_del")]
            elif ns in W_NS and local == "tblPrEx":
                self._props(child, "x", revs)
        deleting, inserting = "del" in marks, "ins" in marks
        self._deleted += deleting
        self._inserted += inserting
        try:
            self._cells(tr, cells, revs)
        finally:
            self._deleted -= deleting
            self._inserted -= inserting
            self._para = saved
        acc = self._row_text([c[0] for c in cells])
        orig = self._row_text([c[1] for c in cells])
        for rev in row_revs:
            rev.explicit_text = orig if rev.kind == "row_del" else acc
        block.add_line(None if deleting else acc, None if inserting else orig, revs)

    @staticmethod
    def _row_text(cells: list[str | None]) -> str:
        kept = [c for c in cells if c is not None]
        return ROW_SEP.join(kept) if any(kept) else ""

    def _cells(self, el: etree._Element, cells: list, revs: list[RevisionRecord]) -> None:
        for child in el:
            ns, local = split_tag(child.tag)
            if ns in W_NS:
                if local == "tc":
                    cells.append(self._cell(child, revs))
                elif local in ("sdt", "customXml"):
                    inner = w_children(child, "sdtContent") if local == "sdt" else [child]
                    for content in inner:
                        self._cells(content, cells, revs)
                elif local in RANGE_MARKERS:
                    self._range(child, local)
            elif ns == MC_NS and local == "AlternateContent":
                branch = self._choice(child)
                if branch is not None:
                    self._cells(branch, cells, revs)

    def _cell(self, tc: etree._Element, revs: list[RevisionRecord]) -> tuple[str | None, str | None]:
        marks: set[str] = set()
        cell_revs: list[RevisionRecord] = []
        for child in tc:
            ns, local = split_tag(child.tag)
            if ns in W_NS and local == "tcPr":
                start = len(revs)
                marks |= self._props(child, "tc", revs)
                cell_revs = [r for r in revs[start:] if r.kind in ("cell_ins", "cell_del")]
        deleting, inserting = "cellDel" in marks, "cellIns" in marks
        self._deleted += deleting
        self._inserted += inserting
        sub = Block()
        try:
            self._blocks(tc, sub)
        finally:
            self._deleted -= deleting
            self._inserted -= inserting
        acc, orig, inner = sub.joined()
        revs.extend(inner)
        for rev in cell_revs:
            rev.explicit_text = orig if rev.kind == "cell_del" else acc
        return (None if deleting else acc), (None if inserting else orig)
