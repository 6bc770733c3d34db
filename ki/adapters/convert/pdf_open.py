"""Opening a PDF with PDFium: the header check, the process-wide lock, classified open errors.

Shared by the text-layer converter (:mod:`ki.adapters.convert.pdf`) and OCR (:mod:`ki.adapters.convert.ocr`).
PDFium is not thread-safe, so every call into it holds :data:`PDFIUM_LOCK`. pypdfium2 tells
*Incorrect password* (``password_required``) apart from *Data format error* (``corrupt``)
(conversion.md section 7.1).
"""

from __future__ import annotations

import threading

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from ki.adapters.convert.formats import PDF_HEADER_WINDOW, pdf_header_offset
from ki.core.errors import UnsupportedDocument

#: Held around every call into PDFium (it is not thread-safe).
PDFIUM_LOCK = threading.Lock()

# pypdfium2 PdfiumError.err_code values (FPDF_ERR_*).
_ERR_PASSWORD = pdfium_c.FPDF_ERR_PASSWORD
_ERR_SECURITY = pdfium_c.FPDF_ERR_SECURITY


def pdf_body(data: bytes, filename: str) -> tuple[bytes, int]:
    """The PDF from its ``%PDF-`` header on, and how many junk bytes preceded it.

    Junk before ``%PDF-`` within the first 1 KB (a print-spooler job ticket, a UTF-8 BOM) is cut off.

    Raises:
        UnsupportedDocument: ``empty`` (0 bytes); ``corrupt`` (no ``%PDF-`` in the first 1 KB,
            ``details={"magic": <first 8 bytes, hex>}``).
    """
    if not data:
        raise UnsupportedDocument(f"{filename}: 0 bytes", reason="empty")
    offset = pdf_header_offset(data)
    if offset < 0:
        raise UnsupportedDocument(
            f"{filename}: not a PDF (no %PDF- header in the first {PDF_HEADER_WINDOW} bytes)",
            reason="corrupt",
            details={"magic": data[:8].hex()},
        )
    return (data[offset:] if offset else data), offset


def open_pdf(body: bytes, filename: str) -> pdfium.PdfDocument:
    """Open a PDF with the empty user password (call with :data:`PDFIUM_LOCK` held).

    Raises:
        UnsupportedDocument: ``password_required`` (a user password is needed), ``encrypted``
            (an unsupported security handler), ``corrupt`` (anything else PDFium refuses);
            ``details`` carry ``pdfium_error`` and ``err_code``.
    """
    try:
        return pdfium.PdfDocument(body, password=None)
    except pdfium.PdfiumError as exc:
        code = getattr(exc, "err_code", None)
        details = {"pdfium_error": str(exc), "err_code": code}
        if code == _ERR_PASSWORD:
            raise UnsupportedDocument(
                f"{filename}: a user password is required", reason="password_required", details=details
            ) from exc
        if code == _ERR_SECURITY:
            raise UnsupportedDocument(
                f"{filename}: unsupported security handler", reason="encrypted", details=details
            ) from exc
        raise UnsupportedDocument(
            f"{filename}: PDFium cannot open it: {exc}", reason="corrupt", details=details
        ) from exc
