"""What an OOXML package (DOCX, PPTX, XLSX) holds beside its main text, whoever converts the text.

Issue 20 item 2: charts and SmartArt (``chart:<n>``, ``smartart:<n>``, :mod:`ki.convert.ooxml_graphics`)
and the names of embedded documents (``embedded_name``; the documents themselves become children,
:mod:`ki.convert.embedded`). ki's DOCX converter adds them itself; for PPTX and XLSX, which Docling
Serve converts, the router adds them to Docling's result (:func:`add_package_parts`).
"""

from __future__ import annotations

from ki.convert.formats import ZIP_MAGIC
from ki.convert.model import StructuredDocument
from ki.convert.ooxml_embedded import embedded_files
from ki.convert.ooxml_graphics import graphic_parts
from ki.convert.ooxml_package import OoxmlPackage
from ki.errors import UnsupportedDocument


def package_parts(pkg: OoxmlPackage) -> tuple[dict[str, str], int]:
    """``(parts, embedded_count)``: chart/SmartArt parts plus ``embedded_name`` (one name per line)."""
    parts = graphic_parts(pkg)
    names = [name for name, _ in embedded_files(pkg)]
    if names:
        parts["embedded_name"] = "\n".join(names)
    return parts, len(names)


def add_package_parts(doc: StructuredDocument, data: bytes, filename: str) -> StructuredDocument:
    """Add :func:`package_parts` of an OOXML file to ``doc`` (a Docling result); anything else is returned as is.

    A package ki cannot read is left to its converter's verdict (a warning, never an error).
    """
    if not data.startswith(ZIP_MAGIC):
        return doc
    try:
        pkg = OoxmlPackage(data, filename)
        parts, count = package_parts(pkg)
    except UnsupportedDocument as exc:
        doc.warnings.append(f"charts, SmartArt and embedded objects not read: {exc}")
        return doc
    for key, text in parts.items():
        doc.parts.setdefault(key, text)
    doc.metadata["embedded_objects"] = count
    doc.warnings.extend(pkg.warnings)
    return doc
