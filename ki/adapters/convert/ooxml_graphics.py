"""Text of DrawingML graphic parts in an OOXML package: charts and SmartArt diagrams.

A chart's text lives in its own part (``word/charts/chart1.xml``,
``ppt/charts/…``, ``xl/charts/…``: ECMA-376 Part 1 §21.2, namespace ``c``), never in the
document body, so a body walk cannot find it: its title, axis titles, series names, category
labels and values become a small table (``chart:<n>`` parts). A SmartArt diagram keeps its text in
the data model part (``…/diagrams/data1.xml``, §21.4, ``dgm:pt/dgm:t``); the ``drawing*.xml``
beside it repeats the same text as shapes and is not read. Office 2016 ``chartEx`` parts (``cx``)
give their labels and values in reading order. Transitional and Strict namespaces are both read
(elements are matched by local name).
"""

from __future__ import annotations

import posixpath
import re

from lxml import etree

from ki.adapters.convert.ooxml_blocks import ROW_SEP
from ki.adapters.convert.ooxml_ns import split_tag
from ki.adapters.convert.ooxml_package import OoxmlPackage

_CHART_PART = re.compile(r"^(?:word|ppt|xl)/charts/(chart(?:ex)?)(\d*)\.xml$", re.IGNORECASE)
_DIAGRAM_PART = re.compile(r"^(?:word|ppt|xl)/diagrams/data(\d*)\.xml$", re.IGNORECASE)
_AXES = ("catAx", "valAx", "dateAx", "serAx")
#: SmartArt points that are connections or presentation shapes, not content (§21.4.7.1 ST_PtType).
_NON_CONTENT_POINTS = frozenset({"parTrans", "sibTrans", "pres"})
MAX_CHART_ROWS = 2000  # categories kept per chart (a chart over a 100k-row sheet keeps its head)


def _children(el: etree._Element, local: str) -> list[etree._Element]:
    return [c for c in el if split_tag(c.tag)[1] == local]


def _child(el: etree._Element | None, *path: str) -> etree._Element | None:
    for local in path:
        if el is None:
            return None
        el = next(iter(_children(el, local)), None)
    return el


def _paragraphs(el: etree._Element) -> list[str]:
    """DrawingML paragraphs (``a:p``) under ``el``, each as the joined text of its ``a:t`` runs."""
    out = []
    for p in el.iter():
        if split_tag(p.tag)[1] != "p":
            continue
        text = "".join(t.text or "" for t in p.iter() if split_tag(t.tag)[1] == "t")
        text = " ".join(text.split())
        if text:
            out.append(text)
    return out


def _points(el: etree._Element | None) -> dict[int, str]:
    """``c:pt idx`` → value of a string/number cache or literal under ``el``; levels joined with `` / ``."""
    if el is None:
        return {}
    out: dict[int, list[str]] = {}
    for pt in el.iter():
        if split_tag(pt.tag)[1] != "pt":
            continue
        try:
            idx = int(pt.get("idx", ""))
        except ValueError:
            continue
        v = _child(pt, "v")
        value = " ".join((v.text or "").split()) if v is not None else ""
        if value:
            out.setdefault(idx, []).append(value)
    return {i: " / ".join(reversed(vs)) if len(vs) > 1 else vs[0] for i, vs in out.items()}


def _title(el: etree._Element | None) -> str:
    """A ``c:title``: rich text paragraphs, else its string reference cache."""
    title = _child(el, "title")
    if title is None:
        return ""
    tx = _child(title, "tx")
    if tx is None:
        return ""
    rich = _child(tx, "rich")
    if rich is not None:
        return " ".join(_paragraphs(rich))
    return " ".join(_points(tx).values())


def chart_text(root: etree._Element) -> str:
    """Text of one chart part (``c:chartSpace``): title and axis titles, then a table.

    The table has one row per category (``category | value | value …``) after a header row of
    series names (`` | name | name …``) when any series is named; categories beyond
    :data:`MAX_CHART_ROWS` are dropped. A ``cx:chartSpace`` (chartEx) yields its labels and values
    one per line. Returns ``""`` when the chart holds no text.
    """
    if split_tag(root.tag)[0].endswith("chartex"):
        return _chartex_text(root)
    chart = _child(root, "chart")
    if chart is None:
        return ""
    lines = [t for t in [_title(chart)] if t]
    plot = _child(chart, "plotArea")
    if plot is None:
        return "\n".join(lines)
    lines += [t for t in (_title(axis) for local in _AXES for axis in _children(plot, local)) if t]
    names: list[str] = []
    columns: list[dict[int, str]] = []
    categories: dict[int, str] = {}
    for group in plot:
        if not split_tag(group.tag)[1].endswith("Chart"):
            continue
        for ser in _children(group, "ser"):
            names.append(" ".join(_points(_child(ser, "tx")).values()) or _text(_child(ser, "tx", "v")))
            for local in ("cat", "xVal"):
                for idx, label in _points(_child(ser, local)).items():
                    categories.setdefault(idx, label)
            columns.append(_points(_child(ser, "val") if _child(ser, "val") is not None else _child(ser, "yVal")))
    if any(names):
        lines.append(ROW_SEP.join(["", *names]).strip())
    rows = sorted(set(categories).union(*columns))[:MAX_CHART_ROWS]
    for idx in rows:
        cells = [categories.get(idx, ""), *(col.get(idx, "") for col in columns)]
        if any(cells):
            lines.append(ROW_SEP.join(cells).strip())
    return "\n".join(lines)


def _text(el: etree._Element | None) -> str:
    return " ".join(" ".join(el.itertext()).split()) if el is not None else ""


def _chartex_text(root: etree._Element) -> str:
    lines: list[str] = []
    for el in root.iter():
        local = split_tag(el.tag)[1]
        if local in ("t", "v") and el.text and el.text.strip():
            value = " ".join(el.text.split())
            if not lines or lines[-1] != value:
                lines.append(value)
    return "\n".join(lines[: MAX_CHART_ROWS * 4])


def smartart_text(root: etree._Element) -> str:
    """Text of one SmartArt data model (``dgm:dataModel``): one line per paragraph of each content point."""
    lines: list[str] = []
    for pt_list in _children(root, "ptLst"):
        for pt in _children(pt_list, "pt"):
            if pt.get("type") in _NON_CONTENT_POINTS:
                continue
            body = _child(pt, "t")
            if body is not None:
                lines += _paragraphs(body)
    return "\n".join(lines)


def _number(name: str) -> int:
    digits = re.search(r"(\d+)\.xml$", name)
    return int(digits.group(1)) if digits else 0


def graphic_parts(pkg: OoxmlPackage) -> dict[str, str]:
    """``chart:<n>`` and ``smartart:<n>`` parts of every chart and SmartArt data part in the package.

    ``<n>`` is the part's number (``chart3.xml`` → ``chart:3``; a ``chartEx2.xml`` → ``chart:ex2``).
    A malformed part is skipped with a warning on ``pkg.warnings``; nothing raises for content.
    """
    found: list[tuple[str, int, str, str]] = []
    for lower, info in pkg.names.items():
        chart = _CHART_PART.match(lower)
        diagram = _DIAGRAM_PART.match(lower)
        if chart:
            prefix = "ex" if chart.group(1).lower() == "chartex" else ""
            found.append(("chart", _number(lower), f"chart:{prefix}{chart.group(2) or 0}", info.filename))
        elif diagram:
            found.append(("smartart", _number(lower), f"smartart:{diagram.group(1) or 0}", info.filename))
    parts: dict[str, str] = {}
    for kind, _n, key, name in sorted(found, key=lambda f: (f[0], f[1], f[2])):
        root = pkg.optional_xml(name)
        if root is None:
            continue
        text = chart_text(root) if kind == "chart" else smartart_text(root)
        if text.strip():
            parts[key if key not in parts else f"{key}:{posixpath.basename(name)}"] = text
    return parts


_DRAWING_PART = re.compile(r"^(?:xl/drawings|word/drawings)/drawing(\d*)\.xml$", re.IGNORECASE)


def drawing_text_parts(pkg: OoxmlPackage, folder: str) -> dict[str, str]:
    """``textbox:<n>`` parts: the text of the shapes and text boxes in ``<folder>/drawings/drawing<n>.xml``
    (a worksheet's drawing: ECMA-376 §20.5, every ``a:p`` of every shape's ``txBody``); empty drawings give none.

    A malformed drawing is skipped with a warning on ``pkg.warnings``.
    """
    parts: dict[str, str] = {}
    found = sorted((_number(lower), info.filename) for lower, info in pkg.names.items()
                   if _DRAWING_PART.match(lower) and lower.startswith(folder.lower() + "/"))
    for n, name in found:
        root = pkg.optional_xml(name)
        if root is None:
            continue
        lines = [line for body in root.iter() if split_tag(body.tag)[1] == "txBody" for line in _paragraphs(body)]
        if lines:
            parts[f"textbox:{n}"] = "\n".join(lines)
    return parts
