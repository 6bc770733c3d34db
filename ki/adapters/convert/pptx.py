"""PPTX/PPTM → ``StructuredDocument`` with python-pptx.

Spec: insertion-pipeline.md "Parse (convert)". Every slide, in deck order, is a ``slide:<n>`` part
(:mod:`ki.adapters.convert.sections`) labelled ``Slide <n>: <title>``: its title first, then the text of every
shape in z-order — text frames (one line per paragraph), tables (one line per row, cells joined by
``" | "``), the shapes inside groups (at any depth) and the text inside SmartArt-free graphic frames.
Text the slide masters and used layouts draw on every slide (shapes that are not placeholders) is the
``textbox:master`` part. A slide's speaker notes are a ``notes:<n>`` part; the rest of the notes pages' text —
their header and footer (placeholders in a deck PowerPoint saved, plain text boxes in one LibreOffice converted
from ``.ppt``) and any text box on them — and the text of the notes and handout masters (their text boxes, the
header, footer, date and number typed into them; not their prompts) are the ``notes:pages`` part, each line
once, without the slide-number and date fields. A slide's comments (classic and modern) are comments
(``slide<n>:<id>``); hidden slides are read and named in ``metadata["hidden_slides"]``.
Charts, SmartArt and embedded documents are read from the package as for DOCX (:mod:`ki.adapters.convert.ooxml_parts`).

Failure contract (``UnsupportedDocument.reason``): ``empty``, ``password_required`` (an encrypted package),
``corrupt`` (not a readable zip, no presentation part, malformed XML).
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile
from collections.abc import Callable
from typing import Any

from lxml import etree

from ki.adapters.convert.model import Comment, StructuredDocument
from ki.adapters.convert.ooxml_blocks import ROW_SEP
from ki.adapters.convert.ooxml_ns import parse_ooxml_date, split_tag
from ki.adapters.convert.ooxml_package import OoxmlPackage, open_package
from ki.adapters.convert.ooxml_parts import package_parts
from ki.adapters.convert.ooxml_props import core_title
from ki.adapters.convert.sections import Section, assemble
from ki.core.errors import UnsupportedDocument

CONVERTER = "ki.pptx"
CONVERTER_VERSION = "2"
#: Groups nested deeper than this are not descended into (a hostile deck's recursion).
MAX_GROUP_DEPTH = 32
#: Field types (``a:fld/@type`` prefixes) whose text the viewer computes: a slide number, a date.
DISPLAY_FIELDS = ("slidenum", "datetime")


def _squeeze(text: str) -> str:
    return " ".join(text.replace("\v", " ").split())


def _paragraph_text(paragraph: Any, fields: bool) -> str:
    """A paragraph's text; with ``fields=False`` without the :data:`DISPLAY_FIELDS` (their text is a cached
    rendering: ``‹#›``, ``<number>``, a date)."""
    if fields:
        return paragraph.text if hasattr(paragraph, "text") else ""
    out: list[str] = []
    for child in paragraph._p:
        name = split_tag(child.tag)[1]
        if name == "br":
            out.append("\v")
        elif name == "r" or (name == "fld" and not (child.get("type") or "").lower().startswith(DISPLAY_FIELDS)):
            out.append("".join(t.text or "" for t in child if split_tag(t.tag)[1] == "t"))
    return "".join(out)


def _frame_lines(frame: Any, fields: bool = True) -> list[str]:
    return [t for t in (_squeeze(_paragraph_text(p, fields)) for p in frame.paragraphs) if t]


def shape_lines(shape: Any, depth: int = 0, *, fields: bool = True) -> list[str]:
    """The text of one shape: a group's members, a text frame's paragraphs, a table's rows (cells ``" | "``;
    a merged cell once, the cells it spans are skipped). ``fields=False`` leaves the slide-number and date
    fields out (:data:`DISPLAY_FIELDS`)."""
    if depth > MAX_GROUP_DEPTH:
        return []
    lines: list[str] = []
    members = getattr(shape, "shapes", None)
    if members is not None and _is_group(shape):
        for member in members:
            lines += shape_lines(member, depth + 1, fields=fields)
        return lines
    if getattr(shape, "has_text_frame", False):
        lines += _frame_lines(shape.text_frame, fields)
    if getattr(shape, "has_table", False):
        for row in shape.table.rows:
            cells = [_squeeze(cell.text) for cell in row.cells if not getattr(cell, "is_spanned", False)]
            if any(cells):
                lines.append(ROW_SEP.join(c for c in cells if c))
    return lines


def _is_group(shape: Any) -> bool:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    try:
        return shape.shape_type == MSO_SHAPE_TYPE.GROUP
    except (NotImplementedError, KeyError, ValueError, AttributeError):
        return False


def master_text(deck: Any) -> str:
    """The text a deck's slide masters and the layouts its slides use draw on every slide: their shapes that are
    not placeholders (a firm's name, a confidentiality line). Placeholders there hold only prompts ("Click to edit
    Master title style") and the footers the slides repeat; each line once."""
    lines: list[str] = []
    used = {id(slide.slide_layout) for slide in deck.slides}
    for master in deck.slide_masters:
        sources = [master, *(layout for layout in master.slide_layouts if id(layout) in used)]
        for source in sources:
            for shape in source.shapes:
                if not getattr(shape, "is_placeholder", False):
                    lines += shape_lines(shape)
    return "\n".join(dict.fromkeys(lines))


#: The placeholders of a notes or handout master whose typed text is the pages' own (fields dropped).
_PAGE_PLACEHOLDERS = ("HEADER", "FOOTER", "DATE", "SLIDE_NUMBER")
#: LibreOffice's stand-in for a field it did not fill (``<date/time>``, ``<number>``, ``<footer>``): no text.
_STAND_IN = re.compile(r"<[\w/ -]{1,20}>")


def _page_lines(shapes: Any, keep: Callable[[Any], bool]) -> list[str]:
    """The lines of the ``shapes`` that ``keep`` accepts, without display fields and LibreOffice's stand-ins."""
    lines: list[str] = []
    for shape in shapes:
        if keep(shape):
            lines += [t for t in (_squeeze(_STAND_IN.sub(" ", line)) for line in shape_lines(shape, fields=False))
                      if t]
    return lines


def notes_page(notes_slide: Any) -> tuple[list[str], list[str]]:
    """One notes page's text: (the speaker notes — the body placeholder's paragraphs —, every other text on the
    page: header, footer, text boxes, tables), without the slide picture and the slide-number/date fields."""
    from pptx.enum.shapes import PP_PLACEHOLDER

    body = notes_slide.notes_placeholder
    notes = _frame_lines(body.text_frame, fields=False) if body is not None else []
    rest = _page_lines(notes_slide.shapes, lambda shape: not (
        (body is not None and shape.shape_id == body.shape_id)
        or (getattr(shape, "is_placeholder", False) and shape.placeholder_format.type == PP_PLACEHOLDER.SLIDE_IMAGE)))
    return notes, rest


def page_master_lines(deck: Any) -> list[str]:
    """The text of the notes master and the handout master: their text boxes and what was typed into their
    header, footer, date and number placeholders (not the notes-body prompt, not the fields)."""
    from pptx.enum.shapes import PP_PLACEHOLDER
    from pptx.opc.constants import RELATIONSHIP_TYPE as RT
    from pptx.oxml import parse_xml
    from pptx.oxml.ns import qn
    from pptx.shapes.shapetree import MasterShapes

    wanted = {getattr(PP_PLACEHOLDER, name) for name in _PAGE_PLACEHOLDERS}
    lines: list[str] = []
    for rel in deck.part.rels.values():
        if rel.is_external or rel.reltype not in (RT.NOTES_MASTER, RT.HANDOUT_MASTER):
            continue
        part = rel.target_part  # python-pptx has no class for a handout master: parse its XML
        root = part._element if hasattr(part, "_element") else parse_xml(part.blob)
        common = root.find(qn("p:cSld"))
        if common is None or common.find(qn("p:spTree")) is None:
            continue
        lines += _page_lines(MasterShapes(common.spTree, None), lambda shape: not getattr(
            shape, "is_placeholder", False) or shape.placeholder_format.type in wanted)
    return lines


def _authors(pkg: OoxmlPackage) -> dict[str, str]:
    """Comment author id → name, from ``commentAuthors.xml`` (classic) and ``authors.xml`` (modern)."""
    out: dict[str, str] = {}
    for lower, info in pkg.names.items():
        if lower.endswith(("commentauthors.xml", "/authors.xml")):
            root = pkg.optional_xml(info.filename)
            for el in root.iter() if root is not None else ():
                if split_tag(el.tag)[1] in ("cmAuthor", "author") and el.get("id") is not None:
                    out[el.get("id") or ""] = el.get("name") or ""
    return out


def _slide_comments(pkg: OoxmlPackage, slide_part: str, number: int, authors: dict[str, str]) -> list[Comment]:
    """Classic (``p:cm``/``p:text``) and modern (``p188:cm``/``a:t``, with replies) comments of one slide."""
    out: list[Comment] = []
    for rel in pkg.rels(slide_part):
        if rel.kind != "comments" or not rel.part:
            continue
        root = pkg.optional_xml(rel.part)
        if root is None:
            continue
        for cm in (el for el in root.iter() if split_tag(el.tag)[1] in ("cm", "reply")):
            own = [t for t in cm.iter() if split_tag(t.tag)[1] in ("text", "t")
                   and not any(split_tag(a.tag)[1] == "reply" for a in t.iterancestors() if a is not cm
                               and cm in a.iterancestors())]
            text = "\n".join(_squeeze(t.text or "") for t in own if _squeeze(t.text or ""))
            if not text:
                continue
            parent = cm.getparent().getparent() if split_tag(cm.tag)[1] == "reply" else None
            cid = cm.get("idx") or cm.get("id") or str(len(out) + 1)
            out.append(Comment(comment_id=f"slide{number}:{cid}", author=authors.get(cm.get("authorId") or ""),
                               date=parse_ooxml_date(cm.get("dt") or cm.get("created")), text=text,
                               parent_id=(f"slide{number}:{parent.get('id') or parent.get('idx')}"
                                          if parent is not None else None)))
    return out


def _open(data: bytes, filename: str) -> Any:
    from pptx import Presentation
    from pptx.exc import PackageNotFoundError

    try:
        return Presentation(io.BytesIO(data))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, TypeError, AttributeError, IndexError,
            OSError, EOFError, etree.XMLSyntaxError) as exc:
        raise UnsupportedDocument(f"{filename}: not a readable presentation ({type(exc).__name__}: {exc})",
                                  reason="corrupt") from exc


def convert_pptx(data: bytes, filename: str) -> StructuredDocument:
    """Convert a PPTX/PPTM deck (format ``pptx``, converter ``ki.pptx``; see the module docstring).

    Returns a document whose ``text`` holds every slide under its label line, ``parts`` each slide
    (``slide:<n>``, listed in ``body_parts``), speaker notes (``notes:<n>``), charts, SmartArt and embedded
    names; ``comments`` the slide comments; ``metadata``: ``slides``, ``hidden_slides``, ``notes``,
    ``embedded_objects``.

    Raises:
        UnsupportedDocument: ``empty``, ``password_required`` or ``corrupt``.
    """
    pkg = open_package(data, filename, ".ppt")
    deck = _open(data, filename)
    authors = _authors(pkg)
    sections: list[Section] = []
    notes: dict[str, str] = {}
    comments: list[Comment] = []
    hidden: list[int] = []
    page_lines: list[str] = []  # the notes pages' text outside the speaker notes
    try:
        for number, slide in enumerate(deck.slides, start=1):
            title_shape = slide.shapes.title
            title = _squeeze(title_shape.text_frame.text) if title_shape is not None and \
                title_shape.has_text_frame else ""
            if slide._element.get("show") in ("0", "false"):
                hidden.append(number)
            label = f"Slide {number}" + (f": {title}" if title else "") + (" (hidden)" if number in hidden else "")
            section = Section(f"slide:{number}", label)
            if title:
                section.lines.append(title)
            for shape in slide.shapes:
                if title_shape is not None and shape.shape_id == title_shape.shape_id:
                    continue
                section.lines += shape_lines(shape)
            sections.append(section)
            if slide.has_notes_slide:
                speaker, rest = notes_page(slide.notes_slide)
                if speaker:
                    notes[f"notes:{number}"] = "\n".join(speaker)
                page_lines += rest
            comments += _slide_comments(pkg, posixpath.normpath(str(slide.part.partname).lstrip("/")), number,
                                        authors)
        master = master_text(deck)
        page_lines += page_master_lines(deck)
    except (KeyError, ValueError, TypeError, AttributeError, IndexError, zipfile.BadZipFile, OSError,
            etree.XMLSyntaxError) as exc:
        raise UnsupportedDocument(f"{filename}: a slide is unreadable ({type(exc).__name__}: {exc})",
                                  reason="corrupt") from exc
    parts: dict[str, str] = {}
    text, body_parts = assemble(sections, parts)
    parts.update(notes)
    if page_lines:
        parts["notes:pages"] = "\n".join(dict.fromkeys(page_lines))
    if master:
        parts["textbox:master"] = master
    side, embedded = package_parts(pkg)
    parts.update(side)
    metadata: dict[str, Any] = {"slides": len(sections), "hidden_slides": hidden, "notes": len(notes),
                                "comments": len(comments), "embedded_objects": embedded}
    return StructuredDocument(text=text, format="pptx", converter=CONVERTER, converter_version=CONVERTER_VERSION,
                              title=core_title(pkg), parts=parts, body_parts=body_parts, comments=comments,
                              warnings=list(pkg.warnings), metadata=metadata)
