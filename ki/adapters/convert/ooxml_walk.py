"""Walker over WordprocessingML part trees: accepted/original text, revisions, comment anchors.

Implements the raw-OOXML rules of conversion.md section 6 for one parsed part
(``w:document``, ``w:hdr``, ``w:ftr``, ``w:footnotes``, ``w:endnotes``, ``w:comment``):

* accepted view = normal runs + ``w:ins`` + ``w:moveTo``; original view = normal runs +
  ``w:del`` + ``w:moveFrom``. Both move halves hold ``w:t``, so the views are decided by the
  enclosing wrapper, never by the text element;
* a paragraph whose mark is deleted (``w:pPr/w:rPr/w:del|w:moveFrom``) merges with the next
  paragraph of the same container, so a paragraph whose runs and mark are all gone vanishes
  from the accepted view (the mirror rule applies to inserted marks in the original view);
* deleted/inserted rows (``w:trPr/w:del|w:ins``) and cells (``w:tcPr/w:cellDel|w:cellIns``)
  leave the accepted/original view;
* ``mc:AlternateContent`` is read through its first ``mc:Choice`` only (the ``mc:Fallback``
  repeats text boxes as VML);
* text inside content controls, hyperlinks, smart tags, simple fields and text boxes is text;
* a ``w:altChunk`` (imported HTML/MHT/RTF/text/DOCX content) is converted by the caller's
  ``alt_chunk`` function and its lines take the chunk's place in both views.

Both Transitional and Strict (purl.oclc.org) namespaces are accepted. The walker never
raises on unknown markup: unknown elements are searched for text recursively.
"""

from __future__ import annotations

from collections.abc import Callable

from lxml import etree

from ki.adapters.convert.ooxml_blocks import Block, Para, PartText, RevisionRecord
from ki.adapters.convert.ooxml_ns import (
    M_NS,
    MC_NS,
    RANGE_MARKERS,
    W_NS,
    node_text,
    parse_ooxml_date,
    r_id,
    split_tag,
    w_attr,
    w_children,
)
from ki.adapters.convert.ooxml_tables import TableWalk

_RUN_WRAPPERS = ("ins", "del", "moveFrom", "moveTo")
_DELETING = ("del", "moveFrom")
_NOTE_SKIP_TYPES = ("separator", "continuationSeparator", "continuationNotice")
# W elements whose subtree never contributes text (properties, field codes, markers).
_SKIP = frozenset(
    {
        "pPr",
        "sdtPr",
        "sdtEndPr",
        "smartTagPr",
        "customXmlPr",
        "instrText",
        "delInstrText",
        "fldData",
        "fldChar",
        "sym",
        "softHyphen",
        "subDoc",
        "bookmarkStart",
        "bookmarkEnd",
        "proofErr",
        "permStart",
        "permEnd",
        "commentReference",
        "annotationRef",
        "footnoteReference",
        "endnoteReference",
        "footnoteRef",
        "endnoteRef",
        "lastRenderedPageBreak",
    }
)


class OoxmlWalker(TableWalk):
    """Walks the parts of one DOCX package, collecting text, revisions and comment anchors.

    One instance per package: ``revisions`` accumulates over every walked part in walk order,
    and comment anchors may span parts of the body. Methods never raise on unknown markup.
    """

    def __init__(self, alt_chunk: Callable[[str], list[str] | None] | None = None) -> None:
        """``alt_chunk(r_id)`` converts a ``w:altChunk``'s imported part to lines of text (None: not converted)."""
        self._alt_chunk = alt_chunk
        self.revisions: list[RevisionRecord] = []
        self.alt_chunks: list[str] = []
        self.anchors: dict[str, tuple[list[str], list[str]]] = {}
        self._part = "document"
        self._para: Para | None = None
        self._loose: list[RevisionRecord] = []
        self._open_revs: list[RevisionRecord] = []
        self._containers: list[str] = []
        self._deleted = 0
        self._inserted = 0
        self._moves: dict[str, dict[str | None, str | None]] = {"moveFrom": {}, "moveTo": {}}
        self._open_comments: dict[str, None] = {}

    # ------------------------------------------------------------------ parts

    def walk_body(self, root: etree._Element, part: str) -> PartText:
        """Walk ``w:document`` (its ``w:body``), ``w:hdr`` or ``w:ftr``: one line per paragraph/row."""
        self._part = part
        block = Block()
        container = root
        for child in root:
            ns, local = split_tag(child.tag)
            if local == "body" and ns in W_NS:
                container = child
                break
        self._blocks(container, block)
        block.add_line(None, None, self._take_loose())
        return block.finish()

    def walk_notes(self, root: etree._Element, part: str) -> PartText:
        """Walk ``w:footnotes``/``w:endnotes``, skipping separator notes; all notes in one line list."""
        self._part = part
        block = Block()
        for note in root:
            ns, local = split_tag(note.tag)
            if ns not in W_NS or local not in ("footnote", "endnote"):
                continue
            if w_attr(note, "type") in _NOTE_SKIP_TYPES:
                continue
            self._blocks(note, block)
            block.flush()
        block.add_line(None, None, self._take_loose())
        return block.finish()

    def walk_comment(self, comment: etree._Element) -> PartText:
        """Walk one ``w:comment`` of ``comments.xml`` (revisions get part ``comments``)."""
        self._part = "comments"
        saved = self._open_comments
        self._open_comments = {}  # ranges inside comment bodies are not anchors
        block = Block()
        self._blocks(comment, block)
        block.add_line(None, None, self._take_loose())
        self._open_comments = saved
        return block.finish()

    def anchor_text(self, comment_id: str) -> str | None:
        """Accepted text between ``commentRangeStart`` and ``commentRangeEnd`` (else the original text)."""
        pieces = self.anchors.get(comment_id)
        if not pieces:
            return None
        for view in pieces:
            text = " ".join("".join(view).split())
            if text:
                return text
        return None

    # ------------------------------------------------------------------ helpers

    def _take_loose(self) -> list[RevisionRecord]:
        loose, self._loose = self._loose, []
        return loose

    def _new_rev(self, kind: str, el: etree._Element, attach: list[RevisionRecord] | None = None) -> RevisionRecord:
        rev = RevisionRecord(
            kind=kind,
            author=w_attr(el, "author"),
            date=parse_ooxml_date(w_attr(el, "date")),
            revision_id=w_attr(el, "id"),
            part=self._part,
            container=self._containers[-1] if self._containers else None,
        )
        self.revisions.append(rev)
        if attach is not None:
            attach.append(rev)
        elif self._para is not None:
            self._para.revs.append(rev)
        else:
            self._loose.append(rev)
        return rev

    def _current_move(self, kind: str) -> str | None:
        names = self._moves[kind]
        return next(reversed(names.values()), None) if names else None

    def _emit(self, text: str) -> None:
        if not text:
            return
        para = self._para
        if para is not None:
            if not self._deleted:
                para.acc.append(text)
            if not self._inserted:
                para.orig.append(text)
        for rev in self._open_revs:
            rev.pieces.append(text)
        for cid in self._open_comments:
            acc, orig = self.anchors[cid]
            if not self._deleted:
                acc.append(text)
            if not self._inserted:
                orig.append(text)

    def _range(self, el: etree._Element, local: str) -> None:
        rid = w_attr(el, "id")
        if local == "commentRangeStart":
            if rid is not None and self._part != "comments":
                self._open_comments[rid] = None
                self.anchors.setdefault(rid, ([], []))
        elif local == "commentRangeEnd":
            self._open_comments.pop(rid or "", None)
        else:
            kind = local[: -len("RangeStart")] if local.endswith("RangeStart") else local[: -len("RangeEnd")]
            if local.endswith("RangeStart"):
                self._moves[kind][rid] = w_attr(el, "name")
            else:
                self._moves[kind].pop(rid, None)

    @staticmethod
    def _choice(alt: etree._Element) -> etree._Element | None:
        """The branch of ``mc:AlternateContent`` to read: first ``mc:Choice``, else ``mc:Fallback``."""
        fallback = None
        for child in alt:
            ns, local = split_tag(child.tag)
            if ns != MC_NS:
                continue
            if local == "Choice":
                return child
            if local == "Fallback" and fallback is None:
                fallback = child
        return fallback

    def _props(self, el: etree._Element, where: str, attach: list[RevisionRecord] | None = None) -> set[str]:
        """Revisions recorded in a property element; returns the mark kinds (ins/del/...) found.

        ``where``: ``p`` (pPr), ``pr`` (paragraph-mark rPr), ``tr``, ``tc``, ``num`` or ``x``.
        """
        marks: set[str] = set()
        for child in el:
            ns, local = split_tag(child.tag)
            if ns not in W_NS:
                continue
            if local.endswith("Change"):
                kind = local if local in ("rPrChange", "pPrChange") else "other_format"
                self._new_rev(kind, child, attach)
            elif where == "pr" and local in _RUN_WRAPPERS:
                self._new_rev("para_" + local, child, attach)
                marks.add(local)
            elif where == "tr" and local in ("ins", "del"):
                self._new_rev("row_" + local, child, attach)
                marks.add(local)
            elif where == "tc" and local in ("cellIns", "cellDel"):
                self._new_rev("cell_ins" if local == "cellIns" else "cell_del", child, attach)
                marks.add(local)
            elif where == "tc" and local == "cellMerge":
                self._new_rev("other_format", child, attach)
            elif where == "num" and local == "ins":
                self._new_rev("other_format", child, attach)
            elif where == "p" and local == "rPr":
                marks |= self._props(child, "pr", attach)
            elif local == "numPr":
                self._props(child, "num", attach)
            elif local in ("sectPr", "rPr"):
                self._props(child, "x", attach)
        return marks

    # ------------------------------------------------------------------ block level

    def _blocks(self, el: etree._Element, block: Block) -> None:
        for child in el:
            ns, local = split_tag(child.tag)
            if ns in W_NS:
                if local == "p":
                    self._paragraph(child, block)
                elif local == "tbl":
                    self._table(child, block)
                elif local == "sdt":
                    self._with_container("sdt", child, "sdtContent", self._blocks, block)
                elif local == "customXml":
                    self._blocks(child, block)
                elif local in RANGE_MARKERS:
                    self._range(child, local)
                elif local == "altChunk":
                    self._alt_chunk_lines(r_id(child) or "", block)
                elif local == "sectPr":
                    self._props(child, "x")
                elif local in _RUN_WRAPPERS:
                    # Block-level wrapper (rare): its paragraphs follow the wrapper's view.
                    self._wrapped(child, local, lambda e: self._blocks(e, block))
            elif ns == MC_NS and local == "AlternateContent":
                branch = self._choice(child)
                if branch is not None:
                    self._blocks(branch, block)

    def _alt_chunk_lines(self, rid: str, block: Block) -> None:
        """An imported chunk is body content at its position (ECMA-376 Part 1 §17.17.2.1)."""
        self.alt_chunks.append(rid)
        lines = self._alt_chunk(rid) if self._alt_chunk is not None else None
        for line in lines or ():
            block.add_line(None if self._deleted else line, None if self._inserted else line, [])

    def _with_container(self, label, el, content_local, walk, target) -> None:
        self._containers.append(label)
        try:
            for content in w_children(el, content_local):
                walk(content, target)
        finally:
            self._containers.pop()

    def _wrapped(self, el: etree._Element, local: str, walk) -> None:
        rev = self._new_rev(local, el)
        if local in ("moveFrom", "moveTo"):
            rev.move_name = self._current_move(local)
        deleting = local in _DELETING
        if deleting:
            self._deleted += 1
        else:
            self._inserted += 1
        self._open_revs.append(rev)
        try:
            walk(el)
        finally:
            self._open_revs.pop()
            if deleting:
                self._deleted -= 1
            else:
                self._inserted -= 1

    def _paragraph(self, p: etree._Element, block: Block) -> None:
        saved = self._para
        para = self._para = Para()
        marks: set[str] = set()
        mark_revs: list[RevisionRecord] = []
        try:
            for child in p:
                ns, local = split_tag(child.tag)
                if local == "pPr" and ns in W_NS:
                    start = len(self.revisions)
                    marks = self._props(child, "p")
                    mark_revs = [r for r in self.revisions[start:] if r.kind in ("para_moveFrom", "para_moveTo")]
                else:
                    self._inline_child(child, ns, local)
            for rev in mark_revs:  # the mark sits at the paragraph end, inside the move range
                rev.move_name = self._current_move(rev.kind[len("para_") :])
        finally:
            self._para = saved
        for cid in self._open_comments:
            for view in self.anchors[cid]:
                view.append("\n")
        block.acc.extend(para.pre_acc)
        block.orig.extend(para.pre_orig)
        block.add_paragraph(
            "".join(para.acc),
            "".join(para.orig),
            acc_mark=not (marks & {"del", "moveFrom"}) and not self._deleted,
            orig_mark=not (marks & {"ins", "moveTo"}) and not self._inserted,
            revs=para.revs,
        )

    def _text_box(self, txbx: etree._Element) -> None:
        """A text box: its lines go before the anchoring paragraph's line (same container)."""
        para = self._para
        sub = Block()
        self._containers.append("txbx")
        self._para = None
        try:
            self._blocks(txbx, sub)
            sub.add_line(None, None, self._take_loose())
            sub.flush()
        finally:
            self._para = para
            self._containers.pop()
        if para is None:
            return
        for text, revs in sub.acc:
            para.pre_acc.append((None if self._deleted else text, revs))
        if not self._inserted:
            para.pre_orig.extend(sub.orig)

    # ------------------------------------------------------------------ inline level

    def _inline(self, el: etree._Element) -> None:
        for child in el:
            ns, local = split_tag(child.tag)
            self._inline_child(child, ns, local)

    def _inline_child(self, child: etree._Element, ns: str, local: str) -> None:
        if not local:
            return
        if ns in W_NS:
            if local == "r":
                self._run(child)
            elif local in _RUN_WRAPPERS:
                self._wrapped(child, local, self._inline)
            elif local == "hyperlink":
                rid = r_id(child)
                anchor = w_attr(child, "anchor")
                label = f"hyperlink:{rid}" if rid else (f"hyperlink:#{anchor}" if anchor else "hyperlink")
                self._containers.append(label)
                try:
                    self._inline(child)
                finally:
                    self._containers.pop()
            elif local == "sdt":
                self._with_container("sdt", child, "sdtContent", lambda e, _t: self._inline(e), None)
            elif local in ("smartTag", "fldSimple", "customXml"):
                self._containers.append(local)
                try:
                    self._inline(child)
                finally:
                    self._containers.pop()
            elif local == "txbxContent":
                self._text_box(child)
            elif local in RANGE_MARKERS:
                self._range(child, local)
            elif local in ("t", "delText"):
                self._text(child, local)
            elif local not in _SKIP:
                self._inline(child)
        elif ns == MC_NS:
            if local == "AlternateContent":
                branch = self._choice(child)
                if branch is not None:
                    self._inline(branch)
        elif ns in M_NS and local == "t":
            self._emit(node_text(child))
        else:
            self._inline(child)  # DrawingML / VML wrappers around text boxes

    def _text(self, el: etree._Element, local: str) -> None:
        if local == "delText" and not self._deleted:
            self._deleted += 1  # stray delText outside w:del is still deleted text
            try:
                self._emit(node_text(el))
            finally:
                self._deleted -= 1
        else:
            self._emit(node_text(el))

    def _run(self, r: etree._Element) -> None:
        for child in r:
            ns, local = split_tag(child.tag)
            if ns in W_NS:
                if local in ("t", "delText"):
                    self._text(child, local)
                elif local in ("tab", "ptab"):
                    self._emit("\t")
                elif local in ("br", "cr"):
                    self._emit(" ")
                elif local == "noBreakHyphen":
                    self._emit("-")
                elif local == "rPr":
                    self._props(child, "x")
                elif local == "ruby":
                    for base in w_children(child, "rubyBase"):
                        self._inline(base)
                elif local not in _SKIP:
                    self._inline_child(child, ns, local)
            else:
                self._inline_child(child, ns, local)
