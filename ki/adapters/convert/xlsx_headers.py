"""The page headers and footers of XLSX worksheets (``headerFooter``, ECMA-376 Part 1 §18.3.1.46).

openpyxl's read-only mode streams cells and skips them. ``headerFooter`` follows ``sheetData`` in a worksheet
part (§18.3.1.99 gives the element order), so only the bytes after ``</sheetData>`` are parsed: the member is
inflated in chunks and nothing before that tag is kept (a million-row sheet costs one inflate, not a parse).
The formatting codes of §18.3.1.46 (``&L``/``&C``/``&R`` sections, ``&P`` page, ``&"font"``, ``&12`` …) are
dropped; each section becomes a line.
"""

from __future__ import annotations

import re
import zipfile
import zlib

from lxml import etree

from ki.adapters.convert.ooxml_ns import split_tag
from ki.adapters.convert.ooxml_package import MAX_MEMBER_BYTES, OoxmlPackage

_END = b"</sheetData>"
_CHUNK = 1 << 20
_SECTION = re.compile(r"&[LCR]")
_CODE = re.compile(r'&(?:"[^"]*"|\d+|K[0-9A-Fa-f]{6}|K\d\d[+-]\d{3}|[PNDTFAZGBIUESXYO])')


def _tail(pkg: OoxmlPackage, part: str) -> bytes:
    """The bytes of worksheet ``part`` after ``</sheetData>`` (b"" when absent or unreadable)."""
    info = pkg.names.get(part.lower())
    if info is None or info.file_size > MAX_MEMBER_BYTES:
        return b""
    window = b""
    try:
        with pkg.zip.open(info) as fh:
            while chunk := fh.read(_CHUNK):
                window = window[-len(_END):] + chunk if _END not in window else window + chunk
                at = window.find(_END)
                if at >= 0 and len(window) - at > 1 << 22:
                    break  # the rest of a worksheet after its cells is small; a hostile one is cut
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, NotImplementedError):
        return b""
    at = window.find(_END)
    return window[at + len(_END):] if at >= 0 else b""


def header_footer_lines(text: str) -> list[str]:
    """The lines of one header or footer string: one per ``&L``/``&C``/``&R`` section, codes dropped."""
    lines = []
    for section in _SECTION.split(text.replace("&&", "\x00")):
        line = " ".join(_CODE.sub(" ", section).replace("\x00", "&").split())
        if line:
            lines.append(line)
    return lines


def headers_footers(pkg: OoxmlPackage, parts: list[str]) -> dict[str, str]:
    """``header`` / ``footer`` parts of the worksheets ``parts`` (odd, even and first-page variants), each line
    once; {} when none has any."""
    found: dict[str, list[str]] = {"header": [], "footer": []}
    for part in parts:
        tail = _tail(pkg, part)
        start = tail.find(b"<headerFooter")
        end = tail.find(b"</headerFooter>", start)
        if start < 0 or end < 0:
            continue
        fragment = tail[start:end + len(b"</headerFooter>")]
        fragment = re.sub(rb"<headerFooter\b", b'<headerFooter xmlns="urn:x"', fragment, count=1)
        try:
            root = etree.fromstring(fragment, etree.XMLParser(resolve_entities=False, no_network=True))
        except etree.XMLSyntaxError:
            pkg.warnings.append(f"headers and footers of {part} are not well-formed XML; skipped")
            continue
        for el in root:
            local = split_tag(el.tag)[1].lower()
            kind = "header" if local.endswith("header") else "footer" if local.endswith("footer") else None
            if kind and el.text:
                found[kind] += header_footer_lines(el.text)
    return {k: "\n".join(dict.fromkeys(v)) for k, v in found.items() if v}
