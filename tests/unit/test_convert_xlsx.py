"""XLSX details on workbooks built here from ECMA-376 Part 1 §18 (SpreadsheetML): cached formula values,
merged ranges, hidden sheets, the cell cap, a shared workbook's revision log, shapes; and the ODF/OOXML
readers inside the isolated conversion workers."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import openpyxl
import pytest

from ki.adapters.convert import xlsx
from ki.adapters.convert.router import convert_bytes
from ki.adapters.convert.xlsx import cell_text, convert_xlsx
from ki.config.settings import KiConfig
from ki.core.errors import UnsupportedDocument

S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
PR = "http://schemas.openxmlformats.org/package/2006/relationships"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats"


def _package(sheets: list[tuple[str, str, str]], extra: dict[str, str] | None = None,
             dimension: str = "") -> bytes:
    """An XLSX whose sheets are ``(name, state, sheetData xml)``; ``extra`` parts are added as they are;
    ``dimension`` is each sheet's declared ``<dimension ref>`` (none when empty)."""
    wb_sheets = "".join(f'<sheet name="{n}" sheetId="{i + 1}" state="{st}" r:id="rId{i + 1}"/>'
                        for i, (n, st, _) in enumerate(sheets))
    rels = "".join(f'<Relationship Id="rId{i + 1}" Type="{R}/worksheet" Target="worksheets/sheet{i + 1}.xml"/>'
                   for i in range(len(sheets)))
    files = {
        "[Content_Types].xml": '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
        'content-types"><Default Extension="xml" ContentType="application/xml"/><Default Extension="rels" '
        'ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Override PartName="/xl/workbook.'
        'xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
        + "".join(f'<Override PartName="/xl/worksheets/sheet{i + 1}.xml" ContentType="application/vnd.'
                  'openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>' for i in range(len(sheets)))
        + "</Types>",
        "_rels/.rels": f'<Relationships xmlns="{PR}"><Relationship Id="rId1" Type="{R}/officeDocument" '
        'Target="xl/workbook.xml"/></Relationships>',
        "xl/workbook.xml": f'<workbook xmlns="{S}" xmlns:r="{R}"><sheets>{wb_sheets}</sheets></workbook>',
        "xl/_rels/workbook.xml.rels": f'<Relationships xmlns="{PR}">{rels}</Relationships>',
    }
    for i, (_n, _st, data) in enumerate(sheets):
        dim = f'<dimension ref="{dimension}"/>' if dimension else ""
        files[f"xl/worksheets/sheet{i + 1}.xml"] = (f'<worksheet xmlns="{S}">{dim}<sheetData>{data}</sheetData>'
                                                    "</worksheet>")
    files.update(extra or {})
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, body in files.items():
            z.writestr(name, body)
    return buf.getvalue()


def test_formula_cells_give_their_saved_value_never_a_recomputed_one() -> None:
    rows = ('<row r="1"><c r="A1"><v>1</v></c><c r="B1"><v>2</v></c>'
            '<c r="C1"><f>A1+B1</f><v>99</v></c><c r="D1" t="str"><f>"x"&amp;A1</f><v>saved text</v></c></row>')
    doc = convert_xlsx(_package([("Calc", "visible", rows)]), "calc.xlsx")
    assert doc.parts["sheet:Calc"] == "1 | 2 | 99 | saved text"
    assert "A1+B1" not in doc.text and "| 3 |" not in doc.text


def test_merged_range_is_read_once_and_hidden_sheets_are_read_and_marked() -> None:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Deal"
    ws["A1"] = "Closing schedule"
    ws.merge_cells("A1:D2")
    ws["A3"] = "Signing"
    secret = wb.create_sheet("Fees")
    secret["B2"] = "Success fee 2%"
    secret.sheet_state = "hidden"
    buf = io.BytesIO()
    wb.save(buf)
    doc = convert_xlsx(buf.getvalue(), "deal.xlsx")
    assert doc.parts["sheet:Deal"] == "Closing schedule\nSigning"
    assert doc.parts["sheet:Fees"] == "Success fee 2%"
    assert doc.metadata["hidden_sheets"] == ["Fees"] and "Sheet: Fees (hidden)" in doc.text
    assert doc.body_parts == ["sheet:Deal", "sheet:Fees"]


def test_a_huge_sheet_is_streamed_up_to_the_cell_cap_and_the_cap_is_recorded(monkeypatch) -> None:
    monkeypatch.setattr(xlsx, "MAX_CELLS", 250)
    rows = "".join(f'<row r="{r}"><c r="A{r}"><v>{r}</v></c><c r="B{r}" t="inlineStr"><is><t>row {r}</t></is></c>'
                   "</row>" for r in range(1, 1001))
    doc = convert_xlsx(_package([("Big", "visible", rows), ("After", "visible", '<row r="1"><c r="A1"><v>7</v>'
                                                                                 "</c></row>")]), "big.xlsx")
    assert doc.metadata["truncated"] == {"sheet": "Big", "row": 125, "cells": 250, "cap": 250}
    assert doc.parts["sheet:Big"].splitlines()[-1] == "125 | row 125"
    assert "sheet:After" not in doc.parts and doc.metadata["sheets"] == ["Big", "After"]
    assert any("stopped after 250 cells" in w for w in doc.warnings)


def test_a_wrong_dimension_does_not_cut_rows_off() -> None:
    rows = "".join(f'<row r="{r}"><c r="A{r}"><v>{r * 11}</v></c></row>' for r in range(1, 6))
    data = _package([("S", "visible", rows)], dimension="A1:A1")
    assert convert_xlsx(data, "dim.xlsx").parts["sheet:S"].splitlines() == ["11", "22", "33", "44", "55"]


def test_revision_log_of_a_shared_workbook_becomes_revisions_with_the_old_value_struck() -> None:
    headers = (f'<headers xmlns="{S}" xmlns:r="{R}" guid="{{A}}"><header guid="{{B}}" dateTime="2024-03-01T10:00:00"'
               ' userName="Anna Berger" r:id="rId1"/></headers>')
    log = (f'<revisions xmlns="{S}"><rcc rId="1" sId="1"><oc r="B2" t="inlineStr"><is><t>EUR 10,000</t></is></oc>'
           '<nc r="B2" t="inlineStr"><is><t>EUR 12,500</t></is></nc></rcc></revisions>')
    extra = {"xl/revisions/revisionHeaders.xml": headers, "xl/revisions/revisionLog1.xml": log,
             "xl/revisions/_rels/revisionHeaders.xml.rels": f'<Relationships xmlns="{PR}"><Relationship Id="rId1" '
             f'Type="{R}/revisionLog" Target="revisionLog1.xml"/></Relationships>'}
    rows = '<row r="2"><c r="B2" t="inlineStr"><is><t>EUR 12,500</t></is></c></row>'
    doc = convert_xlsx(_package([("Fees", "visible", rows)], extra), "shared.xlsx")
    assert [(r.kind, r.text, r.author, r.part, r.container) for r in doc.revisions] == [
        ("del", "EUR 10,000", "Anna Berger", "sheet:Fees", "B2"), ("ins", "EUR 12,500", "Anna Berger", "sheet:Fees",
                                                                   "B2")]
    deleted = [p for p in doc.textual_parts() if p.kind == "deleted"]
    assert [(p.key, p.text, p.author) for p in deleted] == [("deleted:sheet:Fees", "EUR 10,000", "Anna Berger")]


def test_shapes_of_a_sheet_drawing_are_textbox_parts() -> None:
    drawing = ('<xdr:wsDr xmlns:xdr="http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing" '
               'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><xdr:twoCellAnchor><xdr:sp><xdr:txBody>'
               '<a:p><a:r><a:t>Draft - not for circulation</a:t></a:r></a:p></xdr:txBody></xdr:sp></xdr:twoCellAnchor>'
               "</xdr:wsDr>")
    doc = convert_xlsx(_package([("S", "visible", "")], {"xl/drawings/drawing1.xml": drawing}), "shape.xlsx")
    assert doc.parts["textbox:1"] == "Draft - not for circulation"


@pytest.mark.parametrize(("value", "text"), [(3.0, "3"), (0.1 + 0.2, "0.3"), (True, "TRUE"), (None, ""),
                                             (1e20, "1e+20"), ("  two\n words ", "two words")])
def test_cell_text(value, text) -> None:
    assert cell_text(value) == text


def test_damaged_and_encrypted_workbooks_say_so() -> None:
    with pytest.raises(UnsupportedDocument) as bad:
        convert_xlsx(b"PK\x03\x04 not really a zip", "bad.xlsx")
    assert bad.value.reason == "corrupt"
    with pytest.raises(UnsupportedDocument) as empty:
        convert_xlsx(b"", "empty.xlsx")
    assert empty.value.reason == "empty"


@pytest.mark.parametrize(("name", "phrase"), [("tika_testEXCEL.xlsx", "Numbers and their Squares"),
                                              ("tika_testPPT.pptx", "Different words to test against"),
                                              ("tika_testODFwithOOo3.odt", "with interesting features")])
def test_new_readers_run_in_the_isolated_workers(name: str, phrase: str) -> None:
    config = KiConfig()
    assert config.pipeline.convert.isolate
    doc = convert_bytes((FIXTURES / name).read_bytes(), name, config)
    assert phrase in doc.text


def test_header_and_footer_codes_are_dropped_and_sections_become_lines() -> None:
    from ki.adapters.convert.xlsx_headers import header_footer_lines

    assert header_footer_lines('&L&"Arial,Bold"&12Page &P of &N&C&KFF0000Smith && Partner&R&D &T') == [
        "Page of", "Smith & Partner"]
