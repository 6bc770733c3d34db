"""Legacy Excel workbooks (``.xls``, BIFF2–BIFF8, Excel 2.0 to 2003) read natively with xlrd (BSD).

Every sheet in workbook order under a ``Sheet: <name>`` line (a hidden sheet is read and marked
``(hidden)``), one line per row with its non-empty cells separated by tabs: the value Excel last computed
(a formula's cached result; nothing is recomputed), dates as ISO dates, whole numbers without ``.0``,
booleans as ``TRUE``/``FALSE``, error cells as their Excel code (``#DIV/0!``). A merged range's value
appears once (its other cells are empty in the file). Cell notes become comments anchored to their cell
(``Sheet1!B3``). Bounded: at most :data:`MAX_CELLS` cells are read; the cap is recorded.
"""

from __future__ import annotations

import datetime as dt

from ki.adapters.convert.model import Comment, StructuredDocument
from ki.core.errors import UnsupportedDocument

CONVERTER = "ki.xls"
CONVERTER_VERSION = "1"
MAX_CELLS = 5_000_000


def _cell_text(book, cell) -> str:
    import xlrd

    kind, value = cell.ctype, cell.value
    if kind in (xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK):
        return ""
    if kind == xlrd.XL_CELL_NUMBER:
        return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(value)
    if kind == xlrd.XL_CELL_DATE:
        try:
            when = xlrd.xldate_as_datetime(value, book.datemode)
        except (ValueError, OverflowError, xlrd.xldate.XLDateError):
            return repr(value)
        return when.date().isoformat() if when.time() == dt.time() else when.isoformat(sep=" ")
    if kind == xlrd.XL_CELL_BOOLEAN:
        return "TRUE" if value else "FALSE"
    if kind == xlrd.XL_CELL_ERROR:
        return xlrd.error_text_from_code.get(value, "#ERR")
    return str(value).strip()


def convert_xls(data: bytes, filename: str) -> StructuredDocument:
    """Convert an ``.xls`` workbook (format ``xls``).

    ``metadata``: ``sheets`` (names in order), ``hidden_sheets``, ``cells`` (non-empty cells read),
    ``truncated`` (the :data:`MAX_CELLS` cap was reached).

    Raises:
        UnsupportedDocument: ``password_required`` (an encrypted workbook: ``FILEPASS``), ``corrupt``
            (xlrd cannot read it), ``empty_text`` (no sheet at all; a workbook of empty sheets is a document:
            its sheet names are its text).
    """
    import xlrd

    try:
        book = xlrd.open_workbook(file_contents=data, formatting_info=False, on_demand=True,
                                  logfile=_Discard())
    except xlrd.biffh.XLRDError as exc:
        if "encrypted" in str(exc).lower() or "password" in str(exc).lower():
            raise UnsupportedDocument(f"{filename}: the workbook is password-protected",
                                      reason="password_required", details={"encrypted": True}) from exc
        raise UnsupportedDocument(f"{filename}: not a readable Excel workbook ({exc})", reason="corrupt") from exc
    except (ValueError, IndexError, KeyError, AssertionError, EOFError, OSError) as exc:
        raise UnsupportedDocument(f"{filename}: not a readable Excel workbook ({exc})", reason="corrupt") from exc
    blocks: list[str] = []
    comments: list[Comment] = []
    hidden: list[str] = []
    cells = 0
    truncated = False
    for index, name in enumerate(book.sheet_names()):
        sheet = book.sheet_by_index(index)
        if sheet.visibility:
            hidden.append(name)
        lines = [f"Sheet: {name}" + (" (hidden)" if sheet.visibility else "")]
        for r in range(sheet.nrows):
            values = [_cell_text(book, c) for c in sheet.row(r)]
            while values and not values[-1]:
                values.pop()
            if any(values):
                cells += sum(1 for v in values if v)
                lines.append("\t".join(values))
            if cells >= MAX_CELLS:
                truncated = True
                break
        for (row, col), note in sorted(getattr(sheet, "cell_note_map", {}).items()):
            comments.append(Comment(comment_id=f"{name}!{xlrd.cellname(row, col)}", author=note.author or None,
                                    text=note.text or "", anchor_text=_anchor(book, sheet, row, col)))
        blocks.append("\n".join(lines))
        book.unload_sheet(index)
        if truncated:
            break
    if not blocks:
        raise UnsupportedDocument(f"{filename}: the workbook holds no sheet", reason="empty_text")
    props = getattr(book, "user_name", None)
    return StructuredDocument(
        text="\n\n".join(blocks) + "\n", format="xls", converter=CONVERTER, converter_version=CONVERTER_VERSION,
        comments=comments, warnings=[f"only the first {MAX_CELLS} cells were read"] if truncated else [],
        metadata={"sheets": book.sheet_names(), "hidden_sheets": hidden, "cells": cells, "truncated": truncated,
                  "last_author": props or None})


def _anchor(book, sheet, row: int, col: int) -> str | None:
    try:
        return _cell_text(book, sheet.cell(row, col)) or None
    except IndexError:
        return None


class _Discard:
    """xlrd's log sink: its warnings about odd records are not ki's to print."""

    def write(self, _text: str) -> int:
        return 0
