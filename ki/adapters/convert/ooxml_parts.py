"""What an OOXML package (DOCX, PPTX, XLSX) holds beside its main text, whoever converts the text.

Charts and SmartArt (``chart:<n>``, ``smartart:<n>``, :mod:`ki.adapters.convert.ooxml_graphics`) and the names of
embedded documents (``embedded_name``; the documents themselves become children, :mod:`ki.adapters.convert.embedded`),
added by ki's DOCX, XLSX and PPTX converters alike.
"""

from __future__ import annotations

from ki.adapters.convert.ooxml_embedded import embedded_files
from ki.adapters.convert.ooxml_graphics import graphic_parts
from ki.adapters.convert.ooxml_package import OoxmlPackage


def package_parts(pkg: OoxmlPackage) -> tuple[dict[str, str], int]:
    """``(parts, embedded_count)``: chart/SmartArt parts plus ``embedded_name`` (one name per line)."""
    parts = graphic_parts(pkg)
    names = [name for name, _ in embedded_files(pkg)]
    if names:
        parts["embedded_name"] = "\n".join(names)
    return parts, len(names)

