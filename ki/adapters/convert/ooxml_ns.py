"""OOXML names: the namespaces of WordprocessingML and friends (Transitional and Strict) and element helpers.

Shared by the DOCX walker, the package reader and the chart/SmartArt readers.
"""

from __future__ import annotations

from datetime import UTC, datetime

from lxml import etree

W_NS = (
    "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    "http://purl.oclc.org/ooxml/wordprocessingml/main",
)
R_NS = (
    "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "http://purl.oclc.org/ooxml/officeDocument/relationships",
)
M_NS = (
    "http://schemas.openxmlformats.org/officeDocument/2006/math",
    "http://purl.oclc.org/ooxml/officeDocument/math",
)
MC_NS = "http://schemas.openxmlformats.org/markup-compatibility/2006"
W14_NS = "http://schemas.microsoft.com/office/word/2010/wordml"
#: DrawingML (charts and diagrams hold their text in ``a:t``).
A_NS = (
    "http://schemas.openxmlformats.org/drawingml/2006/main",
    "http://purl.oclc.org/ooxml/drawingml/main",
)


_SPLIT_CACHE: dict[str, tuple[str, str]] = {}


def split_tag(tag: object) -> tuple[str, str]:
    """``"{ns}local"`` → ``(ns, local)``; comments, PIs and entities → ``("", "")``."""
    if not isinstance(tag, str):
        return "", ""
    hit = _SPLIT_CACHE.get(tag)
    if hit is None:
        if tag.startswith("{"):
            ns, _, local = tag[1:].partition("}")
            hit = (ns, local)
        else:
            hit = ("", tag)
        if len(_SPLIT_CACHE) < 4096:
            _SPLIT_CACHE[tag] = hit
    return hit


def w_attr(el: etree._Element, local: str, namespaces: tuple[str, ...] = W_NS) -> str | None:
    """Value of attribute ``w:<local>`` (Transitional or Strict), or None."""
    for ns in namespaces:
        value = el.get(f"{{{ns}}}{local}")
        if value is not None:
            return value
    return None


def r_id(el: etree._Element) -> str | None:
    """Value of ``r:id`` (Transitional or Strict relationships namespace), or None."""
    return w_attr(el, "id", R_NS)


def w_children(el: etree._Element, local: str) -> list[etree._Element]:
    """Direct children named ``w:<local>`` in either WordprocessingML namespace."""
    out = []
    for child in el:
        ns, name = split_tag(child.tag)
        if name == local and ns in W_NS:
            out.append(child)
    return out


def node_text(el: etree._Element) -> str:
    """Text of a leaf such as ``w:t``; unresolved entity references (never expanded) are dropped."""
    text = el.text or ""
    if len(el):
        text += "".join(child.tail or "" for child in el)
    return text


def parse_ooxml_date(value: str | None) -> datetime | None:
    """Parse ``w:date``/``w16cex:dateUtc`` (ISO 8601, often with ``Z``); None if absent or invalid.

    A naive timestamp is taken as UTC (Word writes local time with a ``Z`` anyway).
    """
    if not value or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


#: Range markers (moves, comments): they open or close a span wherever they stand.
RANGE_MARKERS = frozenset(
    {
        "moveFromRangeStart",
        "moveFromRangeEnd",
        "moveToRangeStart",
        "moveToRangeEnd",
        "commentRangeStart",
        "commentRangeEnd",
    }
)
