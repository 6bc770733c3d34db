"""OpenDocument text, spreadsheets and presentations (``.odt``, ``.ods``, ``.odp``, ``.odg`` and their
templates) → ``StructuredDocument``, from ``content.xml`` with lxml.

Spec: insertion-pipeline.md "Parse (convert)"; OASIS OpenDocument 1.3. The body is walked by
:class:`ki.adapters.convert.odf_walk.OdfWalker`:

* text (``office:text``): ``text`` is the accepted view, one line per paragraph or table row;
  ``original_text`` the view before the tracked changes (None without any); notes are ``footnote`` /
  ``endnote`` parts, annotations comments, tracked insertions and deletions revisions (a deletion's text
  is found as struck text, like a DOCX's);
* spreadsheets (``office:spreadsheet``): each sheet a ``sheet:<name>`` part (:mod:`ki.adapters.convert.sections`) —
  the displayed cell text, so a formula's saved result, never recomputed; hidden sheets
  (``table:display="false"``) read and named in ``metadata["hidden_sheets"]``; cell annotations comments;
* presentations and drawings (``office:presentation``, ``office:drawing``): each page a ``slide:<n>``
  part, its speaker notes (``presentation:notes``) a ``notes:<n>`` part.

Headers and footers of the master pages (``styles.xml``; a presentation's footer frames) are ``header`` /
``footer`` parts; embedded ODF objects (``Object 1/content.xml``: a chart's table, a formula) are read at
their place. Zip access goes through the package guards of :class:`ki.adapters.convert.ooxml_package.OoxmlPackage`
(member size caps, no entities, no network).

Failure contract (``UnsupportedDocument.reason``): ``empty``; ``password_required`` (the manifest gives
encryption data); ``corrupt`` (not a zip, no ``content.xml``, malformed XML, no office body).
"""

from __future__ import annotations

from typing import Any

from lxml import etree

from ki.adapters.convert.encryption import check_password
from ki.adapters.convert.model import StructuredDocument
from ki.adapters.convert.odf_walk import DC, DRAW, OFFICE, PRESENTATION, TABLE, OdfWalker
from ki.adapters.convert.ooxml_package import OoxmlPackage
from ki.adapters.convert.sections import Section, assemble, section_key
from ki.core.errors import UnsupportedDocument

CONVERTER = "ki.odf"
CONVERTER_VERSION = "1"
STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
_FORMATS = {"text": "odt", "spreadsheet": "ods", "presentation": "odp", "drawing": "odg"}
MAX_OBJECT_DEPTH = 2


def _xml(pkg: OoxmlPackage, name: str) -> etree._Element:
    try:
        return pkg.xml(name)
    except etree.XMLSyntaxError as exc:
        raise UnsupportedDocument(f"{pkg.filename}: {name} is not well-formed XML ({exc})", reason="corrupt") from exc


def _object_reader(pkg: OoxmlPackage, depth: int):
    """Lines of an embedded ODF object (``Object 1`` → ``Object 1/content.xml``), nested at most
    :data:`MAX_OBJECT_DEPTH` deep; a missing or malformed object reads as nothing (with a warning)."""

    def read(href: str) -> list[str]:
        name = f"{href}/content.xml"
        if depth >= MAX_OBJECT_DEPTH or not pkg.has(name):
            return []
        root = pkg.optional_xml(name)
        body = root.find(f"{{{OFFICE}}}body") if root is not None else None
        if body is None:
            return []
        walker = OdfWalker(read_object=_object_reader(pkg, depth + 1))
        return [acc for acc, _o in walker.blocks(body) if acc]

    return read


def _hidden_table_styles(root: etree._Element) -> set[str]:
    hidden = set()
    for style in root.iter(f"{{{STYLE}}}style"):
        props = style.find(f"{{{STYLE}}}table-properties")
        if props is not None and props.get(f"{{{TABLE}}}display") == "false":
            hidden.add(style.get(f"{{{STYLE}}}name") or "")
    return hidden


def _sheets(kind_el: etree._Element, walker: OdfWalker, hidden_styles: set[str]) -> tuple[list[Section], list[str]]:
    sections: list[Section] = []
    hidden: list[str] = []
    taken: dict[str, str] = {}
    for table in kind_el.iter(f"{{{TABLE}}}table"):
        if next(table.iterancestors(f"{{{TABLE}}}table"), None) is not None:
            continue
        name = table.get(f"{{{TABLE}}}name") or f"Sheet{len(sections) + 1}"
        is_hidden = (table.get(f"{{{TABLE}}}style-name") or "") in hidden_styles
        if is_hidden:
            hidden.append(name)
        section = Section(section_key("sheet", name, taken), f"Sheet: {name}" + (" (hidden)" if is_hidden else ""))
        taken[section.key] = name
        section.lines = [acc for acc, _o in walker.table(table) if acc]
        sections.append(section)
    return sections, hidden


def _pages(kind_el: etree._Element, walker: OdfWalker) -> tuple[list[Section], dict[str, str]]:
    sections: list[Section] = []
    notes: dict[str, str] = {}
    for number, page in enumerate(kind_el.iter(f"{{{DRAW}}}page"), start=1):
        title = ""
        for frame in page:
            if frame.get(f"{{{PRESENTATION}}}class") == "title":
                title = " ".join(a for a, _o in walker.blocks(frame) if a)
                break
        label = f"Slide {number}" + (f": {title}" if title else "")
        section = Section(f"slide:{number}", label)
        for child in page:
            if child.tag == f"{{{PRESENTATION}}}notes":
                text = "\n".join(a for a, _o in walker.blocks(child) if a)
                if text:
                    notes[f"notes:{number}"] = text
            else:
                section.lines += [a for a, _o in walker.blocks(_holder(child)) if a]
        sections.append(section)
    return sections, notes


def _holder(el: etree._Element) -> list[etree._Element]:
    return [el]


def _master_parts(pkg: OoxmlPackage, content: etree._Element) -> dict[str, str]:
    """``header`` / ``footer`` parts: the master pages' headers and footers, a presentation's footer frames
    and ``presentation:footer-decl`` texts."""
    found: dict[str, list[str]] = {"header": [], "footer": []}
    roots = [content] + [r for r in [pkg.optional_xml("styles.xml")] if r is not None]
    walker = OdfWalker()
    for root in roots:
        for el in root.iter(f"{{{STYLE}}}master-page"):
            for child in el:
                local = etree.QName(child).localname
                kind = "header" if local.startswith("header") else "footer" if local.startswith("footer") else None
                if kind is None and child.get(f"{{{PRESENTATION}}}class") in ("header", "footer"):
                    kind = child.get(f"{{{PRESENTATION}}}class")
                if kind:
                    found[kind] += [a for a, _o in walker.blocks(_holder(child)) if a]
        for decl in root.iter(f"{{{PRESENTATION}}}footer-decl", f"{{{PRESENTATION}}}header-decl"):
            text = " ".join("".join(decl.itertext()).split())
            if text:
                found["header" if etree.QName(decl).localname.startswith("header") else "footer"].append(text)
    return {k: "\n".join(dict.fromkeys(v)) for k, v in found.items() if v}


def _title(pkg: OoxmlPackage) -> str | None:
    root = pkg.optional_xml("meta.xml") if pkg.has("meta.xml") else None
    el = next(root.iter(f"{{{DC}}}title"), None) if root is not None else None
    title = " ".join((el.text or "").split()) if el is not None else ""
    return title or None


def convert_odf(data: bytes, filename: str) -> StructuredDocument:
    """Convert an OpenDocument file (format ``odt``/``ods``/``odp``/``odg``, converter ``ki.odf``).

    See the module docstring for what goes where. ``metadata``: ``sheets`` / ``hidden_sheets`` or ``slides``,
    ``notes``, ``comments``, ``revisions``, ``objects`` (embedded ODF objects read).

    Raises:
        UnsupportedDocument: ``empty``, ``password_required`` or ``corrupt``.
    """
    if not data:
        raise UnsupportedDocument(f"{filename}: empty file (0 bytes)", reason="empty")
    check_password(data, filename)
    pkg = OoxmlPackage(data, filename)
    if not pkg.has("content.xml"):
        raise UnsupportedDocument(f"{filename}: no content.xml (not an OpenDocument package)", reason="corrupt")
    root = _xml(pkg, "content.xml")
    body = root.find(f"{{{OFFICE}}}body")
    kind_el = next((c for c in body if isinstance(c.tag, str)), None) if body is not None else None
    kind = etree.QName(kind_el).localname if kind_el is not None else ""
    if kind_el is None or kind not in _FORMATS:
        raise UnsupportedDocument(f"{filename}: content.xml has no text, spreadsheet or presentation body",
                                  reason="corrupt")
    try:
        return _convert(pkg, root, kind_el, kind, filename)
    except RecursionError as exc:
        raise UnsupportedDocument(f"{filename}: markup nested too deeply", reason="corrupt") from exc


def _convert(pkg: OoxmlPackage, root: etree._Element, kind_el: etree._Element, kind: str,
             filename: str) -> StructuredDocument:
    from ki.adapters.convert.odf_walk import TEXT

    walker = OdfWalker(kind_el.find(f"{{{TEXT}}}tracked-changes"), read_object=_object_reader(pkg, 0))
    parts: dict[str, str] = {}
    metadata: dict[str, Any] = {}
    body_parts: list[str] = []
    original = None
    if kind == "text":
        lines = walker.blocks(kind_el)
        text = "\n".join(a for a, _o in lines if a)
        revisions = walker.revisions()
        if revisions:
            original = "\n".join(o for _a, o in lines if o)
    else:
        revisions = []
        if kind == "spreadsheet":
            sections, hidden = _sheets(kind_el, walker, _hidden_table_styles(root))
            metadata.update(sheets=[s.key.split(":", 1)[1] for s in sections], hidden_sheets=hidden)
            notes: dict[str, str] = {}
        else:
            sections, notes = _pages(kind_el, walker)
            metadata["slides"] = len(sections)
        text, body_parts = assemble(sections, parts)
        parts.update(notes)
        metadata["notes"] = len(notes)
    for note_kind, note_lines in walker.notes.items():
        if note_lines:
            parts[note_kind] = "\n".join(note_lines)
    parts.update({k: v for k, v in _master_parts(pkg, root).items() if k not in parts})
    metadata.update(comments=len(walker.comments), revisions=len(revisions))
    return StructuredDocument(text=text, original_text=original, format=_FORMATS[kind], converter=CONVERTER,
                              converter_version=CONVERTER_VERSION, title=_title(pkg), parts=parts,
                              body_parts=body_parts, revisions=revisions, comments=walker.comments,
                              warnings=list(pkg.warnings), metadata=metadata)
