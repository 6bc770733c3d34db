"""Docling's input format for a file, and the name to upload it under.

Docling Serve skips a file whose name does not match ``from_formats`` (conversion.md section 9,
row 12), so a file without a known extension is recognised by its leading bytes
(:func:`ki.adapters.convert.formats.sniff_bytes`, the one sniffer) and uploaded with the matching
extension appended.
"""

from __future__ import annotations

import mimetypes
from pathlib import PurePath

from ki.adapters.convert.formats import sniff_bytes
from ki.core.errors import UnsupportedDocument

#: Docling ``InputFormat`` per file extension (docling ``FormatToExtensions``, the subset ki routes).
EXTENSION_FORMATS: dict[str, str] = {
    **dict.fromkeys(("docx", "dotx", "docm", "dotm"), "docx"),
    **dict.fromkeys(("doc", "dot"), "doc"),
    "rtf": "rtf",
    **dict.fromkeys(("pptx", "potx", "ppsx", "pptm", "potm", "ppsm"), "pptx"),
    **dict.fromkeys(("ppt", "pot", "pps"), "ppt"),
    "pdf": "pdf",
    **dict.fromkeys(("md", "markdown"), "md"),
    **dict.fromkeys(("html", "htm", "xhtml"), "html"),
    **dict.fromkeys(("mhtml", "mht"), "mhtml"),
    **dict.fromkeys(("jpg", "jpeg", "png", "tif", "tiff", "bmp", "webp", "gif"), "image"),
    **dict.fromkeys(("adoc", "asciidoc", "asc"), "asciidoc"),
    "csv": "csv",
    **dict.fromkeys(("xlsx", "xlsm", "xltx", "xltm"), "xlsx"),
    **dict.fromkeys(("xls", "xlt"), "xls"),
    **dict.fromkeys(("odt", "ott"), "odt"),
    **dict.fromkeys(("ods", "ots"), "ods"),
    **dict.fromkeys(("odp", "otp"), "odp"),
    **dict.fromkeys(("eml", "msg"), "email"),
    "epub": "epub",
    **dict.fromkeys(("tex", "latex"), "latex"),
    "vtt": "vtt",
}

#: Sniffed kind (:func:`ki.adapters.convert.formats.sniff_bytes`) → (Docling format, extension to append).
_SNIFFED: dict[str, tuple[str, str]] = {
    "pdf": ("pdf", "pdf"),
    **{kind: ("image", kind) for kind in ("png", "jpg", "tif", "gif", "bmp", "webp")},
    **{kind: (kind, kind) for kind in ("docx", "pptx", "xlsx", "odt", "ods", "odp", "epub")},
    "rtf": ("rtf", "rtf"),
    "html": ("html", "html"),
}


def detect_format(data: bytes, filename: str) -> tuple[str, str]:
    """Docling's input format for a file, and the filename to upload it under.

    The extension decides (docling's own extension table); a file without a known extension is
    recognised by its leading bytes (PDF, PNG/JPEG/TIFF/GIF/BMP/WebP, OOXML/ODF/EPUB zips, RTF,
    HTML) and uploaded with the matching extension appended.

    Returns:
        ``(format, upload_filename)``, e.g. ``("pptx", "deck.pptx")``.
    Raises:
        UnsupportedDocument: reason ``unsupported_format`` when neither tells a format Docling reads
            (e.g. an OLE2 container without extension).
    """
    name = PurePath(filename).name or "document"
    ext = PurePath(name).suffix.lower().lstrip(".")
    if ext in EXTENSION_FORMATS:
        return EXTENSION_FORMATS[ext], name
    sniffed = _SNIFFED.get(sniff_bytes(data) or "")
    if sniffed is None:
        raise UnsupportedDocument(
            f"{name}: Docling Serve cannot tell this file's format (extension {ext or 'none'!r}, "
            "leading bytes not recognised)",
            reason="unsupported_format",
            details={"extension": ext},
        )
    fmt, new_ext = sniffed
    return fmt, f"{name}.{new_ext}"


def mime_type(upload_name: str) -> str:
    """The MIME type sent with an upload (from its extension; ``application/octet-stream`` if unknown)."""
    return mimetypes.guess_type(upload_name)[0] or "application/octet-stream"
