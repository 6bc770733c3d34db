"""Formats no converter here reads, and what would read them — never advice that cannot help.

Spec: insertion-pipeline.md "Parse (convert)" (a quarantine names its reason); DESIGN.md capability rule
(a capability quarantine is released when the converter set grows). Docling Serve reads PDF, DOCX, PPTX,
XLSX, HTML, images and a few text formats — none of the formats below — so configuring it is never the
advice for them. Each message says what the file is, that nothing here reads it, and which component would.
"""

from __future__ import annotations

from pathlib import PurePath

from ki.core.errors import UnsupportedDocument

#: Router format (or, for ``office``, the file's extension) → what it is and what reads it.
_ADVICE = {
    "xps": "an XPS document: no converter here reads XPS (neither do ki's own converters nor Docling Serve); "
           "a tool that reads XPS (MuPDF's mutool, Windows' XPS viewer) can print it to PDF, which ki reads",
    "vsdx": "a Visio drawing: no converter here reads Visio (neither do ki's own converters nor Docling Serve); "
            "LibreOffice Draw reads it and can export it as PDF, which ki reads",
    ".vsd": "a Visio drawing: no converter here reads Visio (neither do ki's own converters nor Docling Serve); "
            "LibreOffice Draw reads it and can export it as PDF, which ki reads",
    "xlsb": "an Excel binary workbook (XLSB): no converter here reads it (neither openpyxl nor Docling Serve "
            "does); Excel or LibreOffice Calc can save it as XLSX, which ki reads",
    ".epub": "an EPUB book: no converter here reads EPUB (neither do ki's own converters nor Docling Serve)",
}
_GENERIC = "no converter here reads this format ({fmt}), and none ki can be configured with does"


def unreadable(fmt: str, filename: str) -> UnsupportedDocument:
    """The ``unsupported_format`` error for a file of router format ``fmt`` that nothing here reads.

    The message names the format and the component that would read it (:data:`_ADVICE`), or says none does;
    ``details["format"]`` is the router format, ``details["reader"]`` the advice.
    """
    ext = PurePath(filename).suffix.lower()
    advice = _ADVICE.get(fmt) or _ADVICE.get(ext) or _GENERIC.format(fmt=fmt if fmt != "office" else ext or fmt)
    name = f"{filename}: " if filename else ""
    return UnsupportedDocument(f"{name}{advice}", reason="unsupported_format",
                               details={"format": fmt, "reader": advice})
