"""XLSX/XLSM → ``StructuredDocument`` with openpyxl in read-only (streaming) mode.

Spec: insertion-pipeline.md "Parse (convert)"; conversion.md section 6 (package guards). Every sheet, in
workbook order, is a ``sheet:<name>`` part (:mod:`ki.adapters.convert.sections`): one line per row, its non-empty
cells joined by ``" | "``. Cell values are the values Excel saved (a formula's cached result, never
recomputed: ``data_only``); a merged range's value lives in its first cell only, so it is read once.
Hidden and very hidden sheets are read and named in ``metadata["hidden_sheets"]`` and in their label line.
Cell comments (notes) are comments (``Sheet!B2``), page headers and footers ``header`` / ``footer`` parts
(:mod:`ki.adapters.convert.xlsx_headers`), text boxes and shapes of the sheets' drawings are
``textbox:<n>`` parts, charts and SmartArt ``chart:<n>`` / ``smartart:<n>`` parts, and embedded documents
become child documents (:mod:`ki.adapters.convert.embedded`). A shared workbook's revision log is read as revisions
(:mod:`ki.adapters.convert.xlsx_revisions`).

Bounded: rows are streamed; after :data:`MAX_CELLS` non-empty cells the rest of the workbook is not read,
and ``metadata["truncated"]`` says where it stopped (the sheet, the row, the cap).

Failure contract (``UnsupportedDocument.reason``): ``empty``, ``password_required`` (an encrypted package),
``corrupt`` (not a readable zip, no workbook part, malformed workbook XML).
"""

from __future__ import annotations

import datetime as dt
import io
import warnings
import zipfile
from typing import Any

from lxml import etree

from ki.adapters.convert.model import Comment, StructuredDocument
from ki.adapters.convert.ooxml_blocks import ROW_SEP
from ki.adapters.convert.ooxml_graphics import drawing_text_parts
from ki.adapters.convert.ooxml_package import OoxmlPackage, open_package
from ki.adapters.convert.ooxml_parts import package_parts
from ki.adapters.convert.ooxml_props import core_title
from ki.adapters.convert.sections import Section, assemble, section_key
from ki.adapters.convert.xlsx_headers import headers_footers
from ki.adapters.convert.xlsx_revisions import read_revisions
from ki.core.errors import UnsupportedDocument

CONVERTER = "ki.xlsx"
CONVERTER_VERSION = "1"
#: Non-empty cells read from one workbook; beyond it the rest is not read and the cap is recorded.
MAX_CELLS = 5_000_000
_S_NS = ("http://schemas.openxmlformats.org/spreadsheetml/2006/main",
         "http://purl.oclc.org/ooxml/spreadsheetml/main")
_R_ATTR = ("{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id",
           "{http://purl.oclc.org/ooxml/officeDocument/relationships}id")


def cell_text(value: Any) -> str:
    """A cell's saved value as text: integers without ``.0``, floats to 15 significant digits, dates in ISO
    form (a midnight datetime as its date), booleans ``TRUE``/``FALSE``; None is ``""``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.15g}"
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat(sep=" ")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return " ".join(str(value).split())


def _sheet_parts(pkg: OoxmlPackage) -> dict[str, str]:
    """Sheet name → its worksheet part (``xl/worksheets/sheet1.xml``), from the workbook part and its rels."""
    main = next((r.part for r in pkg.rels("") if r.kind == "officeDocument" and r.part), None)
    root = pkg.optional_xml(main)
    if main is None or root is None:
        return {}
    rels = {r.rid: r.part for r in pkg.rels(main)}
    out: dict[str, str] = {}
    for el in root.iter(*(f"{{{ns}}}sheet" for ns in _S_NS)):
        rid = next((el.get(a) for a in _R_ATTR if el.get(a)), None)
        if rid and rels.get(rid):
            out[el.get("name") or ""] = rels[rid] or ""
    return out


def _comments(pkg: OoxmlPackage, sheet: str, part: str | None) -> list[Comment]:
    """The legacy comments (notes) of one worksheet part, ``comment_id`` = ``Sheet!A1``."""
    if not part:
        return []
    name = next((r.part for r in pkg.rels(part) if r.kind == "comments" and r.part), None)
    root = pkg.optional_xml(name)
    if root is None:
        return []
    authors = [" ".join("".join(a.itertext()).split()) for a in root.iter(*(f"{{{ns}}}author" for ns in _S_NS))]
    out = []
    for el in root.iter(*(f"{{{ns}}}comment" for ns in _S_NS)):
        texts = [t.text or "" for t in el.iter(*(f"{{{ns}}}t" for ns in _S_NS))]
        text = "\n".join(line.strip() for line in "".join(texts).splitlines() if line.strip())
        try:
            author = authors[int(el.get("authorId") or "")] or None
        except (ValueError, IndexError):
            author = None
        ref = el.get("ref") or "?"
        if text:
            out.append(Comment(comment_id=f"{sheet}!{ref}", author=author, text=text, anchor_text=f"{sheet}!{ref}"))
    return out


def _open_workbook(data: bytes, filename: str) -> Any:
    import openpyxl
    from openpyxl.utils.exceptions import InvalidFileException

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "extension not supported", "unknown style": nothing for the text
            return openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True, keep_links=False,
                                          keep_vba=False, rich_text=False)
    except (InvalidFileException, zipfile.BadZipFile, KeyError, ValueError, TypeError, IndexError, AttributeError,
            OSError, EOFError, etree.XMLSyntaxError, SyntaxError) as exc:
        raise UnsupportedDocument(f"{filename}: not a readable workbook ({type(exc).__name__}: {exc})",
                                  reason="corrupt") from exc


def convert_xlsx(data: bytes, filename: str) -> StructuredDocument:
    """Convert an XLSX/XLSM workbook (format ``xlsx``, converter ``ki.xlsx``; see the module docstring).

    Returns a document whose ``text`` holds every sheet under a ``Sheet: <name>`` line and whose ``parts``
    hold each sheet (``sheet:<name>``, listed in ``body_parts``), text boxes, charts, SmartArt and the names
    of embedded documents; ``comments`` the cell notes; ``metadata``: ``sheets``, ``hidden_sheets``,
    ``cells``, ``embedded_objects`` and, when the cap was hit, ``truncated``.

    Raises:
        UnsupportedDocument: ``empty``, ``password_required`` (an encrypted workbook) or ``corrupt`` (see the
            module docstring).
    """
    pkg = open_package(data, filename, ".xls")
    parts_by_sheet = _sheet_parts(pkg)
    wb = _open_workbook(data, filename)
    cells = 0
    truncated: dict[str, Any] | None = None
    keys: dict[str, str] = {}  # part key -> sheet name
    sections: list[Section] = []
    hidden: list[str] = []
    comments: list[Comment] = []
    try:
        for ws in wb.worksheets:
            name = ws.title
            state = getattr(ws, "sheet_state", "visible") or "visible"
            label = f"Sheet: {name}" + (f" ({state})" if state != "visible" else "")
            if state != "visible":
                hidden.append(name)
            section = Section(section_key("sheet", name, keys), label)
            keys[section.key] = name
            sections.append(section)
            comments += _comments(pkg, name, parts_by_sheet.get(name))
            if truncated is not None:
                continue
            if hasattr(ws, "reset_dimensions"):
                ws.reset_dimensions()  # a wrong <dimension> must not cut rows off
            for row_number, row in enumerate(ws.iter_rows(values_only=True), start=1):
                values = [t for t in (cell_text(v) for v in row) if t]
                if not values:
                    continue
                cells += len(values)
                section.lines.append(ROW_SEP.join(values))
                if cells >= MAX_CELLS:
                    truncated = {"sheet": name, "row": row_number, "cells": cells, "cap": MAX_CELLS}
                    break
    except (KeyError, ValueError, TypeError, IndexError, AttributeError, zipfile.BadZipFile, OSError, EOFError,
            etree.XMLSyntaxError, SyntaxError) as exc:
        raise UnsupportedDocument(f"{filename}: a worksheet is unreadable ({type(exc).__name__}: {exc})",
                                  reason="corrupt") from exc
    finally:
        wb.close()
    parts: dict[str, str] = {}
    text, body_parts = assemble(sections, parts)
    side, embedded = package_parts(pkg)
    parts.update(drawing_text_parts(pkg, "xl"))
    parts.update(headers_footers(pkg, list(parts_by_sheet.values())))
    parts.update(side)
    revisions = read_revisions(pkg)
    warnings_ = list(pkg.warnings)
    metadata: dict[str, Any] = {"sheets": [s.key.split(":", 1)[1] for s in sections], "hidden_sheets": hidden,
                                "cells": cells, "comments": len(comments), "embedded_objects": embedded,
                                "revisions": len(revisions)}
    if truncated is not None:
        metadata["truncated"] = truncated
        warnings_.append(f"{filename}: stopped after {MAX_CELLS:,} cells (sheet {truncated['sheet']!r}, row "
                         f"{truncated['row']}); the rest of the workbook is not read")
    title = core_title(pkg)
    return StructuredDocument(text=text, format="xlsx", converter=CONVERTER, converter_version=CONVERTER_VERSION,
                              title=title, parts=parts, body_parts=body_parts, comments=comments,
                              revisions=revisions, warnings=warnings_, metadata=metadata)
