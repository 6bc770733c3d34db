"""Document properties of an OOXML package (``docProps/core.xml``): the title.

ECMA-376 Part 2 §11 (core properties, ``dc:title``); shared by the DOCX, XLSX and PPTX converters.
"""

from __future__ import annotations

from ki.adapters.convert.ooxml_package import OoxmlPackage

_DC_NS = "http://purl.org/dc/elements/1.1/"


def core_title(pkg: OoxmlPackage) -> str | None:
    """The package's ``dc:title`` (whitespace squeezed), or None when absent or empty."""
    name = next((r.part for r in pkg.rels("") if r.kind == "core-properties" and r.part), None)
    if name is None and pkg.has("docProps/core.xml"):
        name = "docProps/core.xml"
    root = pkg.optional_xml(name)
    if root is None:
        return None
    el = root.find(f"{{{_DC_NS}}}title")
    title = " ".join((el.text or "").split()) if el is not None else ""
    return title or None
