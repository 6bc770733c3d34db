"""DOCX/DOCM → ``StructuredDocument``: a raw-OOXML pass with ``zipfile`` + lxml.

Spec: conversion.md section 6 (raw-OOXML rules). This module handles the package
(part discovery, comments, core properties, counts); the zip and its relationships are
:mod:`ki.adapters.convert.ooxml_package`, the body walk :mod:`ki.adapters.convert.ooxml_walk`.

Failure contract (``UnsupportedDocument.reason``):
    ``empty`` (0 bytes), ``password_required`` (OLE2/CFB container holding an
    ``EncryptedPackage`` stream: encrypted OOXML), ``unsupported_format`` (OLE2/CFB without
    one: a legacy binary Word file), ``corrupt`` (not a zip, truncated zip, zip bomb,
    unreadable member, no main document part, malformed main document XML).
A dangling relationship (``Target="NULL"`` or a missing part) is a warning, never a failure.
"""

from __future__ import annotations

import posixpath
import re

from lxml import etree

from ki.adapters.convert.docx_altchunk import alt_chunk_reader
from ki.adapters.convert.formats import CFB_MAGIC
from ki.adapters.convert.model import Comment, Revision, StructuredDocument
from ki.adapters.convert.ooxml_blocks import PartText
from ki.adapters.convert.ooxml_ns import W14_NS, W_NS, parse_ooxml_date, split_tag, w_attr, w_children
from ki.adapters.convert.ooxml_package import OoxmlPackage, Relationship
from ki.adapters.convert.ooxml_parts import package_parts
from ki.adapters.convert.ooxml_props import core_title
from ki.adapters.convert.ooxml_walk import OoxmlWalker
from ki.core.errors import UnsupportedDocument

CONVERTER = "ki.docx"
CONVERTER_VERSION = "2"  # 2: altChunk content, charts, SmartArt, embedded names

_ENCRYPTED_STREAM = "encryptedpackage".encode("utf-16-le")  # CFB directory names are UTF-16LE

_RELS_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
_W15_NS = "http://schemas.microsoft.com/office/word/2012/wordml"
_W16CID_NS = "http://schemas.microsoft.com/office/word/2016/wordml/cid"
_W16CEX_NS = "http://schemas.microsoft.com/office/word/2018/wordml/cex"


def convert_docx(data: bytes, filename: str, *, depth: int = 0) -> StructuredDocument:
    """Convert a DOCX/DOCM package to a :class:`StructuredDocument` (format ``docx``, converter ``ki.docx``).

    ``text`` is the accepted view (tracked insertions kept, deletions dropped), one line per
    paragraph and one per table row (cells joined by ``" | "``); ``original_text`` is the view
    before the revisions, or None when the package has no revision. Headers, footers, footnotes
    and endnotes go to ``parts``; revisions, comments (threads via ``commentsExtended.xml``,
    resolved via ``w15:done``) and counts (``tables``, ``sdt``, ``numbered_paragraphs``,
    ``sections``: element counts of the main document XML) are filled in. A ``w:altChunk``'s
    imported content (HTML, MHT, RTF, text, DOCX; :mod:`ki.adapters.convert.docx_altchunk`) is body text at
    its place; charts and SmartArt become ``chart:<n>`` / ``smartart:<n>`` parts
    (:mod:`ki.adapters.convert.ooxml_graphics`); the names of embedded documents (each converted as a child
    document, :mod:`ki.adapters.convert.embedded`) go to the ``embedded_name`` part.

    Args:
        depth: nesting depth of altChunk DOCX packages (callers leave it 0).

    Raises:
        UnsupportedDocument: reason ``empty``, ``password_required``, ``unsupported_format`` or
            ``corrupt`` (see the module docstring).
    """
    if not data:
        raise UnsupportedDocument(f"{filename}: empty file (0 bytes)", reason="empty")
    if data[:4] == CFB_MAGIC:
        _raise_cfb(data, filename)
    pkg = OoxmlPackage(data, filename)
    main = _main_part(pkg)
    try:
        root = pkg.xml(main)
    except etree.XMLSyntaxError as exc:
        raise UnsupportedDocument(f"{filename}: {main} is not well-formed XML ({exc})", reason="corrupt") from exc
    ns, local = split_tag(root.tag)
    if ns not in W_NS or local != "document":
        raise UnsupportedDocument(f"{filename}: {main} is not a WordprocessingML document", reason="corrupt")
    pkg.check_dangling()
    doc_rels = pkg.rels(main)
    chunk_warnings: list[str] = []

    def nested(chunk: bytes, name: str) -> StructuredDocument:
        return convert_docx(chunk, name, depth=depth + 1)

    walker = OoxmlWalker(alt_chunk_reader(pkg, doc_rels, chunk_warnings, nested, depth=depth))
    try:
        body = walker.walk_body(root, "document")
        parts = _secondary_parts(pkg, walker, doc_rels, root)
        comments = _comments(pkg, walker, doc_rels)
    except RecursionError as exc:
        raise UnsupportedDocument(f"{filename}: markup nested too deeply", reason="corrupt") from exc
    side, embedded = package_parts(pkg)
    parts.update(side)

    warnings = list(pkg.warnings) + chunk_warnings
    title = core_title(pkg)
    metadata = _counts(pkg, root, doc_rels)
    metadata["revisions"] = len(walker.revisions)
    metadata["comments"] = len(comments)
    if walker.alt_chunks:
        metadata["alt_chunks"] = len(walker.alt_chunks)
    metadata["embedded_objects"] = embedded
    if title:
        metadata["title"] = title
    return StructuredDocument(
        text="\n".join(body.accepted),
        original_text="\n".join(body.original) if walker.revisions else None,
        format="docx",
        converter=CONVERTER,
        converter_version=CONVERTER_VERSION,
        title=title,
        parts=parts,
        revisions=[
            Revision(
                kind=r.kind,
                text=r.text,
                author=r.author,
                date=r.date,
                revision_id=r.revision_id,
                part=r.part,
                paragraph=r.paragraph,
                container=r.container,
                move_name=r.move_name,
            )
            for r in walker.revisions
        ],
        comments=comments,
        warnings=warnings,
        metadata=metadata,
    )


def _raise_cfb(data: bytes, filename: str) -> None:
    """An OLE2/CFB file is never a zip: encrypted OOXML if it holds ``EncryptedPackage`` (any casing)."""
    if _ENCRYPTED_STREAM in data.lower():
        raise UnsupportedDocument(
            f"{filename}: password-protected (encrypted OOXML in an OLE2 container)",
            reason="password_required",
            details={"container": "cfb", "encrypted": True},
        )
    raise UnsupportedDocument(
        f"{filename}: OLE2 container without EncryptedPackage (a legacy binary Word file, not DOCX)",
        reason="unsupported_format",
        details={"container": "cfb"},
    )


def _main_part(pkg: OoxmlPackage) -> str:
    for rel in pkg.rels(""):
        if rel.kind == "officeDocument" and rel.part:
            return rel.part
    if pkg.has("word/document.xml"):
        return pkg.names["word/document.xml"].filename
    raise UnsupportedDocument(f"{pkg.filename}: no main document part (word/document.xml)", reason="corrupt")


def _natural(name: str) -> list:
    return [int(tok) if tok.isdigit() else tok for tok in re.split(r"(\d+)", name.lower())]


def _secondary_parts(
    pkg: OoxmlPackage, walker: OoxmlWalker, doc_rels: list[Relationship], root: etree._Element
) -> dict[str, str]:
    """Headers and footers (each part walked, all concatenated), footnotes, endnotes."""
    parts: dict[str, str] = {}
    for kind in ("header", "footer"):
        texts = []
        names = sorted({r.part for r in doc_rels if r.kind == kind and r.part}, key=_natural)
        for name in names:
            part_root = pkg.optional_xml(name)
            if part_root is not None:
                stem = posixpath.splitext(posixpath.basename(name))[0]
                texts.append(_joined(walker.walk_body(part_root, stem)))
        text = "\n".join(t for t in texts if t)
        if text:
            parts[kind] = text
    for kind in ("footnotes", "endnotes"):
        name = next((r.part for r in doc_rels if r.kind == kind and r.part), None)
        part_root = pkg.optional_xml(name)
        if part_root is not None:
            text = _joined(walker.walk_notes(part_root, kind))
            if text:
                parts[kind] = text
    return parts


def _joined(part: PartText) -> str:
    return "\n".join(part.accepted).strip()


def _comments(pkg: OoxmlPackage, walker: OoxmlWalker, doc_rels: list[Relationship]) -> list[Comment]:
    """Comments with thread parents (``w15:paraIdParent``) and resolved state (``w15:done``).

    ``commentsExtended.xml`` is keyed by the ``w14:paraId`` of each comment's last paragraph;
    a missing ``w:date`` is taken from ``commentsExtensible.xml`` (``w16cex:dateUtc``) via
    ``commentsIds.xml`` when those parts exist, else left None.
    """
    name = next((r.part for r in doc_rels if r.kind == "comments" and r.part), None)
    root = pkg.optional_xml(name)
    if root is None:
        return []
    raw = []
    para_to_id: dict[str, str] = {}
    for el in w_children(root, "comment"):
        cid = w_attr(el, "id") or ""
        paras = [p for p in el.iter() if split_tag(p.tag)[1] == "p" and split_tag(p.tag)[0] in W_NS]
        para_id = paras[-1].get(f"{{{W14_NS}}}paraId") if paras else None
        if para_id:
            para_to_id[para_id.upper()] = cid
        text = "\n".join(walker.walk_comment(el).accepted).strip()
        raw.append((cid, el, text, para_id))

    extended = {}
    ext_root = pkg.optional_xml(next((r.part for r in doc_rels if r.kind == "commentsExtended" and r.part), None))
    if ext_root is not None:
        for ex in ext_root.iter(f"{{{_W15_NS}}}commentEx"):
            pid = (ex.get(f"{{{_W15_NS}}}paraId") or "").upper()
            extended[pid] = (ex.get(f"{{{_W15_NS}}}paraIdParent"), ex.get(f"{{{_W15_NS}}}done"))
    utc_dates = _extensible_dates(pkg, doc_rels)

    comments = []
    for cid, el, text, para_id in raw:
        parent, done = extended.get((para_id or "").upper(), (None, None))
        date = parse_ooxml_date(w_attr(el, "date")) or utc_dates.get((para_id or "").upper())
        comments.append(
            Comment(
                comment_id=cid,
                author=w_attr(el, "author"),
                date=date,
                text=text,
                anchor_text=walker.anchor_text(cid),
                parent_id=para_to_id.get(parent.upper()) if parent else None,
                resolved=done in ("1", "true"),
            )
        )
    return comments


def _extensible_dates(pkg: OoxmlPackage, doc_rels: list[Relationship]) -> dict:
    """paraId → ``w16cex:dateUtc`` via ``commentsIds.xml`` (paraId → durableId) and ``commentsExtensible.xml``."""
    ids_root = pkg.optional_xml(next((r.part for r in doc_rels if r.kind == "commentsIds" and r.part), None))
    cex_root = pkg.optional_xml(next((r.part for r in doc_rels if r.kind == "commentsExtensible" and r.part), None))
    if ids_root is None or cex_root is None:
        return {}
    by_durable = {}
    for el in cex_root.iter(f"{{{_W16CEX_NS}}}commentExtensible"):
        date = parse_ooxml_date(el.get(f"{{{_W16CEX_NS}}}dateUtc"))
        if date is not None:
            by_durable[(el.get(f"{{{_W16CEX_NS}}}durableId") or "").upper()] = date
    out = {}
    for el in ids_root.iter(f"{{{_W16CID_NS}}}commentId"):
        durable = (el.get(f"{{{_W16CID_NS}}}durableId") or "").upper()
        if durable in by_durable:
            out[(el.get(f"{{{_W16CID_NS}}}paraId") or "").upper()] = by_durable[durable]
    return out


def _counts(pkg: OoxmlPackage, root: etree._Element, doc_rels: list[Relationship]) -> dict:
    """Element counts of the main document XML, as measured for the corpus oracle.

    ``tables``/``sdt`` count every ``w:tbl``/``w:sdt`` element (nested ones and the
    ``mc:Fallback`` copies included); ``sections`` counts ``w:sectPr`` outside ``w:sectPrChange``;
    ``numbered_paragraphs`` counts ``w:p`` whose effective ``w:numId`` (direct, else through the
    paragraph style chain of ``styles.xml``) is present and not ``0``.
    """
    w = f"{{{split_tag(root.tag)[0]}}}"
    style_num = _style_numbering(pkg, doc_rels)
    default_style = style_num.pop(None, None)
    numbered = 0
    for p in root.iter(f"{w}p"):
        ppr = p.find(f"{w}pPr")
        num_id = None
        style = None
        if ppr is not None:
            num = ppr.find(f"{w}numPr/{w}numId")
            num_id = num.get(f"{w}val") if num is not None else None
            ps = ppr.find(f"{w}pStyle")
            style = ps.get(f"{w}val") if ps is not None else None
        if num_id is None:
            num_id = style_num.get(style) if style else default_style
        if num_id not in (None, "0"):
            numbered += 1
    sections = sum(1 for s in root.iter(f"{w}sectPr") if split_tag(s.getparent().tag)[1] != "sectPrChange")
    return {
        "tables": sum(1 for _ in root.iter(f"{w}tbl")),
        "sdt": sum(1 for _ in root.iter(f"{w}sdt")),
        "numbered_paragraphs": numbered,
        "sections": sections,
    }


def _style_numbering(pkg: OoxmlPackage, doc_rels: list[Relationship]) -> dict:
    """Paragraph styleId → effective numId through ``w:basedOn``; key None = the default paragraph style."""
    root = pkg.optional_xml(next((r.part for r in doc_rels if r.kind == "styles" and r.part), None))
    if root is None:
        return {}
    own: dict[str, str | None] = {}
    based: dict[str, str | None] = {}
    default = None
    for st in w_children(root, "style"):
        if w_attr(st, "type") not in (None, "paragraph"):
            continue
        sid = w_attr(st, "styleId")
        if not sid:
            continue
        if w_attr(st, "default") in ("1", "true"):
            default = sid
        num_id = None
        for ppr in w_children(st, "pPr"):
            for num_pr in w_children(ppr, "numPr"):
                for num in w_children(num_pr, "numId"):
                    num_id = w_attr(num, "val")
        own[sid] = num_id
        parents = w_children(st, "basedOn")
        based[sid] = w_attr(parents[0], "val") if parents else None
    resolved: dict = {}
    for sid in own:
        seen, cur, value = set(), sid, None
        while cur is not None and cur not in seen and cur in own:
            seen.add(cur)
            if own[cur] is not None:
                value = own[cur]
                break
            cur = based.get(cur)
        resolved[sid] = value
    resolved[None] = resolved.get(default) if default else None
    return resolved
