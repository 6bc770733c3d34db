"""The revision log of a shared XLSX workbook (``xl/revisions``) as revisions, like a DOCX's tracked changes.

ECMA-376 Part 1 §18.11 (shared workbook revisions): ``revisionHeaders.xml`` lists each saved revision set
(``userName``, ``dateTime``) with the ``revisionLog*.xml`` part holding its changes. A cell change
(``rcc``) carries the old cell (``oc``) and the new one (``nc``): the old value is a ``del`` revision (its text
is found as struck text), the new one an ``ins``; an inserted or deleted row or column (``rrc``) carries the
cells it removed. Revisions name their sheet (``part`` = ``sheet:<name>``) and cell (``container``).
Values are inline strings (``is/t``) or plain values (``v``); a shared-string index cannot be resolved in a
log (Excel writes inline strings there) and is kept as the number it is.
"""

from __future__ import annotations

from ki.adapters.convert.model import Revision
from ki.adapters.convert.ooxml_ns import parse_ooxml_date, split_tag
from ki.adapters.convert.ooxml_package import OoxmlPackage

MAX_REVISIONS = 20_000


def _sheet_names(pkg: OoxmlPackage) -> dict[str, str]:
    main = next((r.part for r in pkg.rels("") if r.kind == "officeDocument" and r.part), None)
    root = pkg.optional_xml(main)
    if root is None:
        return {}
    return {el.get("sheetId") or "": el.get("name") or "" for el in root.iter() if split_tag(el.tag)[1] == "sheet"}


def _cell_value(cell) -> str:
    for el in cell.iter():
        local = split_tag(el.tag)[1]
        if local == "is":
            return " ".join("".join(t.text or "" for t in el.iter() if split_tag(t.tag)[1] == "t").split())
        if local == "v":
            return " ".join((el.text or "").split())
    return ""


def read_revisions(pkg: OoxmlPackage) -> list[Revision]:
    """Every cell value a shared workbook's revision log records as replaced (``del``) or entered (``ins``).

    Returns [] for a workbook without ``xl/revisions/revisionHeaders.xml``; at most :data:`MAX_REVISIONS`.
    """
    headers_part = next((info.filename for lower, info in pkg.names.items()
                         if lower.endswith("revisions/revisionheaders.xml")), None)
    root = pkg.optional_xml(headers_part)
    if headers_part is None or root is None:
        return []
    sheets = _sheet_names(pkg)
    logs = {r.rid: r.part for r in pkg.rels(headers_part)}
    out: list[Revision] = []
    for header in (el for el in root.iter() if split_tag(el.tag)[1] == "header"):
        rid = next((v for k, v in header.attrib.items() if split_tag(k)[1] == "id" and k.startswith("{")), None)
        log = pkg.optional_xml(logs.get(rid or ""))
        if log is None:
            continue
        author, date = header.get("userName"), parse_ooxml_date(header.get("dateTime"))
        for change in (el for el in log.iter() if split_tag(el.tag)[1] == "rcc"):
            sheet = sheets.get(change.get("sId") or "", change.get("sId") or "")
            for cell in change:
                kind = {"oc": "del", "nc": "ins"}.get(split_tag(cell.tag)[1])
                value = _cell_value(cell) if kind else ""
                if kind and value:
                    out.append(Revision(kind=kind, text=value, author=author, date=date,
                                        revision_id=change.get("rId"), part=f"sheet:{sheet}",
                                        container=cell.get("r")))
                if len(out) >= MAX_REVISIONS:
                    return out
    return out
