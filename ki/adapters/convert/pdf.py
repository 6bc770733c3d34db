"""PDF text layer with pypdfium2 (built-in converter, conversion.md section 7.1).

pypdfium2 (Apache-2.0/BSD-3, PDFium BSD-3) was measured as the fastest text-layer
extractor and the only one that opened every malformed public fixture. It tells
*Incorrect password* (``password_required``) apart from *Data format error*
(``corrupt``). Opening, the lock and page text are shared with OCR in
:mod:`ki.adapters.convert.pdf_open`.
"""

from __future__ import annotations

from typing import Any

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from ki.adapters.convert.model import StructuredDocument
from ki.adapters.convert.pdf_annots import page_notes
from ki.adapters.convert.pdf_open import PDFIUM_LOCK, open_pdf, pdf_body
from ki.adapters.convert.pdf_text import textpage_text
from ki.core.errors import UnsupportedDocument

PAGE_SEPARATOR = "\f"


def convert_pdf(data: bytes, filename: str) -> StructuredDocument:
    """Extract the text layer of a PDF, page by page.

    Args:
        data: the file's bytes. Junk before ``%PDF-`` within the first 1 KB (a print-spooler
            job ticket, a UTF-8 BOM) is cut off before opening.
        filename: used only in error messages.

    Returns:
        ``StructuredDocument(format="pdf", converter="ki.pdf")`` whose ``text`` is the pages'
        text joined with a form feed (``"\\f"``, one per page boundary, so page ``i`` is
        ``text.split("\\f")[i]``); line ends are ``"\\n"``. ``pages`` is the page count and
        ``title`` the Info dictionary title (None when blank). ``metadata`` holds
        ``page_chars`` (characters per page, in page order), ``encrypted`` (True when the
        file is encrypted but opened with the empty user password), ``form_fields``
        (distinct AcroForm field names seen on widget annotations), ``embedded_files``
        (attachment count), ``header_offset`` (bytes skipped before ``%PDF-``) and
        ``pages_without_text`` (indexes of text-less pages that draw something, the pages OCR may
        read; a page that draws nothing but annotations is not one).
        ``parts`` holds ``annotation:p<n>`` (notes, free text, highlights with the text they cover)
        and ``form_field:p<n>`` (``name: value``) per page (:mod:`ki.adapters.convert.pdf_annots`); the page
        text itself comes from :mod:`ki.adapters.convert.pdf_text` (hyphenation, letter spacing, right-to-left
        spacing, presentation forms).

    Raises:
        UnsupportedDocument: reason ``empty`` (0 bytes); ``corrupt`` (no ``%PDF-`` header in
            the first 1 KB, PDFium "Data format error", or every page unreadable);
            ``password_required`` (a non-empty user password is needed); ``encrypted``
            (an unsupported security handler); ``needs_ocr`` (no page has text but at
            least one page has an image; ``details={"pages": n, "image_pages": k, "parts": …}``, the
            annotation parts OCR must keep); ``empty_text`` (the document opens but no page has
            text, annotations, form values or images, e.g. zero pages or blank pages).
    """
    body, offset = pdf_body(data, filename)
    with PDFIUM_LOCK:
        return _convert_locked(body, filename, offset)


def _convert_locked(body: bytes, filename: str, offset: int) -> StructuredDocument:
    pdf = open_pdf(body, filename)
    try:
        n_pages = len(pdf)
        encrypted = pdfium_c.FPDF_GetSecurityHandlerRevision(pdf) != -1
        form_type = pdf.get_formtype()
        forms = form_type == pdfium_c.FORMTYPE_ACRO_FORM
        warnings: list[str] = []
        if forms:
            try:
                pdf.init_forms()  # must precede get_page so widget field names resolve
            except pdfium.PdfiumError as exc:
                warnings.append(f"form environment: {exc}")
        metadata: dict[str, Any] = {
            "encrypted": encrypted,
            "embedded_files": pdf.count_attachments(),
            "header_offset": offset,
            "form_type": int(form_type),
        }
        if encrypted:
            metadata["permissions"] = int(pdfium_c.FPDF_GetDocPermissions(pdf))
        title = (pdf.get_metadata_value("Title") or "").strip() or None

        texts: list[str] = []
        page_chars: list[int] = []
        parts: dict[str, str] = {}
        field_names: set[str] = set()
        widget_count = 0
        failed_pages: list[int] = []
        noted_pages: set[int] = set()
        image_pages = 0
        for index in range(n_pages):  # one page open at a time
            text = ""
            try:
                page = pdf.get_page(index)
                try:
                    textpage = page.get_textpage()
                    try:
                        text = textpage_text(textpage)
                        notes = page_notes(pdf, page, textpage) if pdfium_c.FPDFPage_GetAnnotCount(page) else None
                    finally:
                        textpage.close()
                    if not text.strip() and _has_image(page):
                        image_pages += 1
                    if not text.strip() and notes is not None and pdfium_c.FPDFPage_CountObjects(page) == 0:
                        noted_pages.add(index)  # draws nothing but annotations, whose text is read
                    if notes is not None:
                        widget_count += notes.widgets
                        field_names |= notes.field_names
                        if notes.annotations:
                            parts[f"annotation:p{index + 1}"] = "\n".join(notes.annotations)
                        if notes.fields:
                            parts[f"form_field:p{index + 1}"] = "\n".join(notes.fields)
                finally:
                    page.close()
            except pdfium.PdfiumError as exc:
                failed_pages.append(index)
                warnings.append(f"page {index + 1}: {exc}")
            texts.append(text)
            page_chars.append(len(text))
    finally:
        pdf.close()

    if n_pages and len(failed_pages) == n_pages:
        raise UnsupportedDocument(
            f"{filename}: no page could be loaded", reason="corrupt", details={"pages": n_pages}
        )
    if not any(t.strip() for t in texts):
        if image_pages:
            raise UnsupportedDocument(
                f"{filename}: no text layer on any of {n_pages} page(s)",
                reason="needs_ocr",
                details={"pages": n_pages, "image_pages": image_pages, "parts": parts},
            )
        if not parts:  # a page whose only text is in annotations or fields is not empty
            raise UnsupportedDocument(
                f"{filename}: {n_pages} page(s) without text, annotations or images",
                reason="empty_text",
                details={"pages": n_pages},
            )

    metadata["page_chars"] = page_chars
    metadata["form_fields"] = len(field_names) or widget_count
    empty_pages = [i for i, t in enumerate(texts) if not t.strip() and i not in noted_pages]
    if empty_pages:
        metadata["pages_without_text"] = empty_pages
    if failed_pages:
        metadata["failed_pages"] = failed_pages
    return StructuredDocument(
        text=PAGE_SEPARATOR.join(texts),
        format="pdf",
        converter="ki.pdf",
        title=title,
        pages=n_pages,
        parts=parts,
        warnings=warnings,
        metadata=metadata,
    )


def _has_image(page: pdfium.PdfPage) -> bool:
    for _ in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE]):
        return True
    return False
