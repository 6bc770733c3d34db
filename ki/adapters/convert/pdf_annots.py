"""Annotations and form fields of a PDF page, as text of their own (ISO 32000-1 §12.5, §12.7).

Notes (``Text``), free text, highlights and the other markup annotations carry their text in
``/Contents`` (author ``/T``, subject ``/Subj``); a text-markup annotation (highlight, underline,
strike-out, squiggly) also names the page text it covers (its quadrilaterals, read back through
the text page). A ``Popup`` only shows its parent's contents and is skipped; links carry no
text. Widgets are form fields: ``name: value`` with the field's alternate (user-facing) name when
it has one; a check box or radio button gives its export value when checked.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

_SKIPPED = frozenset({pdfium_c.FPDF_ANNOT_POPUP, pdfium_c.FPDF_ANNOT_LINK, pdfium_c.FPDF_ANNOT_WIDGET,
                      pdfium_c.FPDF_ANNOT_XFAWIDGET})
_MARKUP = frozenset({pdfium_c.FPDF_ANNOT_HIGHLIGHT, pdfium_c.FPDF_ANNOT_UNDERLINE, pdfium_c.FPDF_ANNOT_STRIKEOUT,
                     pdfium_c.FPDF_ANNOT_SQUIGGLY})
_CHECKABLE = frozenset({pdfium_c.FPDF_FORMFIELD_CHECKBOX, pdfium_c.FPDF_FORMFIELD_RADIOBUTTON})
MAX_VALUE_CHARS = 20_000  # one annotation's text is cut here


@dataclass
class PageNotes:
    """What one page's annotations say: annotation lines, form field lines, and the field names seen."""

    annotations: list[str] = field(default_factory=list)
    fields: list[str] = field(default_factory=list)
    field_names: set[str] = field(default_factory=set)
    widgets: int = 0


def _utf16(buffer: ctypes.Array, size: int) -> str:
    raw = bytes(memoryview(buffer).cast("B"))[: max(0, size - 2)]
    return raw.decode("utf-16-le", "replace").replace("\x00", "").strip()[:MAX_VALUE_CHARS]


def _string(annot, key: str) -> str:
    size = pdfium_c.FPDFAnnot_GetStringValue(annot, key.encode("ascii"), None, 0)
    if size <= 2:
        return ""
    buffer = (pdfium_c.FPDF_WCHAR * (size // 2))()
    pdfium_c.FPDFAnnot_GetStringValue(annot, key.encode("ascii"), buffer, size)
    return _utf16(buffer, size)


def _form_string(getter, formenv, annot) -> str:
    size = getter(formenv, annot, None, 0)
    if size <= 2:
        return ""
    buffer = (pdfium_c.FPDF_WCHAR * (size // 2))()
    getter(formenv, annot, buffer, size)
    return _utf16(buffer, size)


def _covered_text(annot, textpage) -> str:
    """The page text under a text-markup annotation's quadrilaterals (§12.5.6.10)."""
    pieces = []
    quad = pdfium_c.FS_QUADPOINTSF()
    for i in range(pdfium_c.FPDFAnnot_CountAttachmentPoints(annot)):
        if not pdfium_c.FPDFAnnot_GetAttachmentPoints(annot, i, ctypes.byref(quad)):
            continue
        xs, ys = (quad.x1, quad.x2, quad.x3, quad.x4), (quad.y1, quad.y2, quad.y3, quad.y4)
        left, right, bottom, top = min(xs), max(xs), min(ys), max(ys)
        size = pdfium_c.FPDFText_GetBoundedText(textpage, left, top, right, bottom, None, 0)
        if size <= 0:
            continue
        buffer = (ctypes.c_ushort * (size + 1))()
        pdfium_c.FPDFText_GetBoundedText(textpage, left, top, right, bottom, buffer, size)
        pieces.append(bytes(memoryview(buffer).cast("B"))[: 2 * size].decode("utf-16-le", "replace"))
    return " ".join(" ".join(pieces).split())


def page_notes(pdf: pdfium.PdfDocument, page: pdfium.PdfPage, textpage: pdfium.PdfTextPage | None) -> PageNotes:
    """Read every annotation of ``page`` (call with the PDFium lock held; forms initialised when any).

    Returns: a :class:`PageNotes`; annotation lines are ``[author] contents`` (``covered text: contents``
    for text markup), form lines ``name: value``. Raises nothing for content.
    """
    notes = PageNotes()
    formenv = pdf.formenv
    for i in range(pdfium_c.FPDFPage_GetAnnotCount(page)):
        annot = pdfium_c.FPDFPage_GetAnnot(page, i)
        if not annot:
            continue
        try:
            subtype = pdfium_c.FPDFAnnot_GetSubtype(annot)
            if subtype == pdfium_c.FPDF_ANNOT_WIDGET:
                notes.widgets += 1
                _field(notes, formenv, annot)
                continue
            if subtype in _SKIPPED:
                continue
            contents = " ".join(_string(annot, "Contents").split())
            covered = _covered_text(annot, textpage) if subtype in _MARKUP and textpage is not None else ""
            subject = " ".join(_string(annot, "Subj").split())
            text = ": ".join(t for t in (covered, contents) if t) or subject
            if not text:
                continue
            author = " ".join(_string(annot, "T").split())
            notes.annotations.append(f"[{author}] {text}" if author else text)
        finally:
            pdfium_c.FPDFPage_CloseAnnot(annot)
    return notes


def _field(notes: PageNotes, formenv, annot) -> None:
    if formenv is None:
        return
    name = _form_string(pdfium_c.FPDFAnnot_GetFormFieldName, formenv, annot)
    if name:
        notes.field_names.add(name)
    kind = pdfium_c.FPDFAnnot_GetFormFieldType(formenv, annot)
    if kind in _CHECKABLE:
        value = _form_string(pdfium_c.FPDFAnnot_GetFormFieldExportValue, formenv, annot) \
            if pdfium_c.FPDFAnnot_IsChecked(formenv, annot) else ""
    else:
        value = _form_string(pdfium_c.FPDFAnnot_GetFormFieldValue, formenv, annot)
    value = " ".join(value.split())
    if not value or value.lower() == "off":
        return
    label = _form_string(pdfium_c.FPDFAnnot_GetFormFieldAlternateName, formenv, annot) or name
    line = f"{label}: {value}" if label else value
    if line not in notes.fields:  # a radio group's widgets share one field
        notes.fields.append(line)
