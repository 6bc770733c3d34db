"""Issue 20 item 2: DOCX/PPTX/XLSX charts, SmartArt, altChunk and embedded objects.

Two kinds of input: the public Tika files of ``tests/fixtures/ooxml`` (each MANIFEST clause one
test), and packages built here from ECMA-376 Part 1 (chart §21.2, diagram data §21.4, altChunk
§17.17.2.1, embedded packages §15.2.11) so every chunk format and embedding kind is covered.
PPTX and XLSX go through ki's own converters (openpyxl, python-pptx), which add the same parts.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from ki.adapters.convert.docx import convert_docx
from ki.adapters.convert.embedded import extract_embedded, may_embed
from ki.adapters.convert.formats import sniff_format
from ki.adapters.convert.model import StructuredDocument
from ki.adapters.convert.pptx import convert_pptx
from ki.adapters.convert.router import convert_bytes
from ki.adapters.convert.xlsx import convert_xlsx
from ki.config.settings import KiConfig
from ki.core.errors import UnsupportedDocument
from tests.helpers.manifest import Manifest, document, quoted

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ooxml"


def _convert(data: bytes, name: str) -> StructuredDocument:
    if name.endswith(".docx"):
        return convert_docx(data, name)
    return convert_pptx(data, name) if name.endswith(".pptx") else convert_xlsx(data, name)


MANIFEST = Manifest("", _convert, root=FIXTURES)


def _part(doc: StructuredDocument, kind: str) -> str:
    return "\n".join(text for key, text in doc.parts.items() if key.split(":", 1)[0] == kind)


def _children(path: Path) -> dict[str, StructuredDocument | UnsupportedDocument]:
    out: dict[str, StructuredDocument | UnsupportedDocument] = {}
    fmt = path.suffix.lstrip(".")
    for part in extract_embedded(fmt, path.read_bytes(), path.name):
        try:
            out[part.name] = convert_bytes(part.data, part.name, KiConfig())
        except UnsupportedDocument as exc:
            out[part.name] = exc
    return out


def check_clause(path: Path, clause: str) -> None:
    doc = document(MANIFEST.result(path))
    if clause.startswith("chart contains"):
        assert quoted(clause) in _part(doc, "chart")
    elif clause.startswith("smartart contains"):
        assert quoted(clause) in _part(doc, "smartart")
    elif clause.startswith("text contains"):
        assert quoted(clause) in doc.text
    elif clause == "body empty":
        assert not doc.text.strip()
    elif clause.startswith("embedded:"):
        names = [n.strip() for n in clause.split(":", 1)[1].split("|")]
        assert doc.parts["embedded_name"].split("\n") == names
        assert [p.name for p in extract_embedded(path.suffix.lstrip("."), path.read_bytes(), path.name)] == names
    elif clause.startswith("child"):
        name = clause.split('"')[1]
        child = _children(path)[name]
        assert isinstance(child, StructuredDocument), child
        assert clause.rsplit('"', 2)[1] in child.text
    else:
        pytest.fail(f"uninterpreted clause {clause!r}")


@pytest.mark.parametrize(("rel", "clause"), MANIFEST.cases())
def test_manifest_clause(rel: str, clause: str) -> None:
    check_clause(FIXTURES / rel, clause)


def test_every_clause_is_interpreted() -> None:
    MANIFEST.assert_interpreted(("chart contains", "smartart contains", "text contains", "body empty", "embedded:",
                                 "child "), min_rows=11)


# ---------------------------------------------------------------------------- packages built from the spec

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"


def _docx(body: str, parts: dict[str, bytes | str], rels: list[tuple[str, str, str]]) -> bytes:
    """A DOCX whose ``document.xml`` body is ``body``; ``rels`` are (id, type suffix, target)."""
    rel_xml = "".join(f'<Relationship Id="{i}" Type="{REL}/{t}" Target="{target}"/>' for i, t, target in rels)
    files: dict[str, bytes | str] = {
        "[Content_Types].xml": '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
        'content-types"><Default Extension="xml" ContentType="application/xml"/>'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Override PartName="/word/chunk.bin" ContentType="text/plain"/></Types>',
        "_rels/.rels": f'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
        f'relationships"><Relationship Id="r1" Type="{REL}/officeDocument" Target="word/document.xml"/>'
        "</Relationships>",
        "word/document.xml": f'<?xml version="1.0"?><w:document xmlns:w="{W}" xmlns:r="{R}"><w:body>{body}'
        "</w:body></w:document>",
        "word/_rels/document.xml.rels": '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats'
        f'.org/package/2006/relationships">{rel_xml}</Relationships>',
        **parts,
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return out.getvalue()


def _p(text: str) -> str:
    return f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>"


MHT = (b"MIME-Version: 1.0\r\nContent-Type: multipart/related; boundary=\"b\"\r\n\r\n--b\r\n"
       b"Content-Type: text/html; charset=\"windows-1252\"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"
       b"<html><body><p>Imported M=FCnchen clause</p></body></html>\r\n--b--\r\n")
CHUNKS = {
    "html": (b"<html><body><p>Imported <b>HTML</b> clause</p></body></html>", "Imported HTML clause"),
    "htm": (b"<p>Second&nbsp;HTML chunk</p>", "Second\xa0HTML chunk"),
    "mht": (MHT, "Imported M\xfcnchen clause"),
    "rtf": (rb"{\rtf1\ansi {\b Imported} RTF clause\par}", "Imported RTF clause"),
    "txt": (b"Imported plain text clause\nsecond line", "Imported plain text clause\nsecond line"),
    "bin": (b"Typed by its content type", "Typed by its content type"),  # [Content_Types] says text/plain
}


@pytest.mark.parametrize("ext", sorted(CHUNKS))
def test_alt_chunk_of_every_format_is_body_text_in_place(ext: str) -> None:
    data, text = CHUNKS[ext]
    docx = _docx(_p("Before the chunk.") + '<w:altChunk r:id="c1"/>' + _p("After the chunk."),
                 {f"word/chunk.{ext}": data}, [("c1", "aFChunk", f"chunk.{ext}")])
    doc = convert_docx(docx, "chunk.docx")
    assert doc.text == f"Before the chunk.\n{text}\nAfter the chunk."
    assert doc.metadata["alt_chunks"] == 1 and not doc.warnings


def test_alt_chunk_docx_nested_and_missing_part_warns() -> None:
    inner = _docx(_p("Inner package text."), {}, [])
    docx = _docx('<w:altChunk r:id="c1"/><w:altChunk r:id="c2"/>', {"word/inner.docx": inner},
                 [("c1", "aFChunk", "inner.docx"), ("c2", "aFChunk", "missing.html")])
    doc = convert_docx(docx, "nested.docx")
    assert doc.text == "Inner package text."
    assert any("c2" in w and "not in the package" in w for w in doc.warnings)


CHART = """<?xml version="1.0"?><c:chartSpace xmlns:c="http://schemas.openxmlformats.org/drawingml/2006/chart"
 xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><c:chart>
<c:title><c:tx><c:rich><a:p><a:r><a:t>Fees per quarter</a:t></a:r></a:p></c:rich></c:tx></c:title>
<c:plotArea><c:barChart>
 <c:ser><c:tx><c:v>Hourly</c:v></c:tx>
  <c:cat><c:strLit><c:pt idx="0"><c:v>Q1</c:v></c:pt><c:pt idx="1"><c:v>Q2</c:v></c:pt></c:strLit></c:cat>
  <c:val><c:numLit><c:pt idx="0"><c:v>1200</c:v></c:pt><c:pt idx="1"><c:v>900</c:v></c:pt></c:numLit></c:val></c:ser>
 <c:ser><c:tx><c:strRef><c:f>Sheet1!$C$1</c:f>
  <c:strCache><c:pt idx="0"><c:v>Fixed</c:v></c:pt></c:strCache></c:strRef></c:tx>
  <c:val><c:numRef><c:f>x</c:f><c:numCache><c:pt idx="1"><c:v>300</c:v></c:pt></c:numCache></c:numRef></c:val></c:ser>
</c:barChart>
<c:valAx><c:title><c:tx><c:rich><a:p><a:r><a:t>EUR</a:t></a:r></a:p></c:rich></c:tx></c:title></c:valAx>
</c:plotArea></c:chart></c:chartSpace>"""
DIAGRAM = """<?xml version="1.0"?><dgm:dataModel xmlns:dgm="http://schemas.openxmlformats.org/drawingml/2006/diagram"
 xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><dgm:ptLst>
<dgm:pt modelId="0" type="doc"/>
<dgm:pt modelId="1"><dgm:t><a:p><a:r><a:t>Claim filed</a:t></a:r></a:p></dgm:t></dgm:pt>
<dgm:pt modelId="2" type="parTrans"><dgm:t><a:p><a:r><a:t>connector text</a:t></a:r></a:p></dgm:t></dgm:pt>
<dgm:pt modelId="3"><dgm:t><a:p><a:r><a:t>Hearing</a:t></a:r><a:r><a:t> set</a:t></a:r></a:p></dgm:t></dgm:pt>
</dgm:ptLst></dgm:dataModel>"""


def test_chart_becomes_a_table_and_smartart_its_points() -> None:
    docx = _docx(_p("Body."), {"word/charts/chart2.xml": CHART, "word/diagrams/data1.xml": DIAGRAM}, [])
    doc = convert_docx(docx, "graphics.docx")
    assert doc.parts["chart:2"] == "Fees per quarter\nEUR\n| Hourly | Fixed\nQ1 | 1200 |\nQ2 | 900 | 300"
    assert doc.parts["smartart:1"] == "Claim filed\nHearing set"
    kinds = {p.kind for p in doc.textual_parts()}
    assert {"body", "chart", "smartart"} <= kinds


def _pdf_bytes() -> bytes:
    from tests.helpers.pdf_build import latin_pdf, text_lines

    return latin_pdf([text_lines(b"(Annexed expert report)")])


def test_embedded_documents_become_children_with_names() -> None:
    inner_docx = _docx(_p("Embedded letter of intent."), {}, [])
    xlsx = io.BytesIO()
    with zipfile.ZipFile(xlsx, "w") as z:
        z.writestr("xl/workbook.xml", "<workbook/>")
    parts = {
        "word/embeddings/Letter.docx": inner_docx,
        "word/embeddings/Report.pdf": _pdf_bytes(),
        "word/embeddings/Notes.txt": b"Plain annex text",
        "word/embeddings/Sheet.xlsx": xlsx.getvalue(),
        "word/embeddings/clip.wav": b"RIFF\x00\x00\x00\x00WAVEfmt ",  # media, not a document
        "word/media/image1.png": b"\x89PNG\r\n\x1a\n",  # an image of the body, not an embedding
    }
    docx = _docx(_p("See the annexes."), parts, [])
    doc = convert_docx(docx, "annexes.docx")
    assert doc.parts["embedded_name"] == "Letter.docx\nNotes.txt\nReport.pdf\nSheet.xlsx"
    assert doc.metadata["embedded_objects"] == 4 and may_embed(doc.model_dump(mode="json"))
    assert "embedded object word/embeddings/clip.wav skipped: not a document format ki reads" in doc.warnings
    children = extract_embedded("docx", docx, "annexes.docx")
    assert [(c.index, c.name, c.content_type) for c in children] == [
        (0, "Letter.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        (1, "Notes.txt", "text/plain"), (2, "Report.pdf", "application/pdf"),
        (3, "Sheet.xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    ]
    texts = {c.name: convert_bytes(c.data, c.name, KiConfig()).text for c in children[:3]}
    assert texts == {"Letter.docx": "Embedded letter of intent.", "Notes.txt": "Plain annex text",
                     "Report.pdf": "Annexed expert report"}
    assert sniff_format(children[3].data, children[3].name) == "xlsx"
    assert extract_embedded("office", docx, "annexes") == children  # fetch_child re-extracts via the router's name


def test_docx_without_embeddings_needs_no_second_read() -> None:
    doc = convert_docx(_docx(_p("Plain."), {}, []), "plain.docx")
    assert doc.metadata["embedded_objects"] == 0 and not may_embed(doc.model_dump(mode="json"))
    assert extract_embedded("docx", b"not a zip", "x.docx") == []


def test_containers_nested_too_deep_register_no_children() -> None:
    body = {"format": "docx", "metadata": {"embedded_objects": 2}}
    assert may_embed(body, "a.docx » b.docx » c.docx")
    assert not may_embed(body, "a.eml » b.docx » c.docx » d.docx » e.docx")


def _utf16(name: str) -> bytes:
    return name.encode("utf-16-le")


def test_ole_stream_names_compare_case_insensitively_and_an_object_without_a_document_is_reported(
        real_corpus: Path) -> None:
    """MS-CFB names are case-insensitive: Tika's encrypted package stores ENCRYPTEDPACKAGE and is still
    the embedded (encrypted) document, a child. With that stream renamed (same length: the directory
    stays valid) it holds no document ki reads: no child, a warning naming the member and its streams."""
    ole = (real_corpus / "docx/tika_protected_upper_case.docx").read_bytes()
    assert ole.count(_utf16("ENCRYPTEDPACKAGE")) >= 1
    docx = _docx(_p("Siehe Anlage."), {"word/embeddings/oleObject1.bin": ole}, [])
    (child,) = extract_embedded("docx", docx, "anlage.docx")
    assert child.name == "oleObject1.docx" and child.data == ole
    equation = ole.replace(_utf16("ENCRYPTEDPACKAGE"), _utf16("EQUATION NATIVE_"))
    docx = _docx(_p("Siehe Formel."), {"word/embeddings/oleObject1.bin": equation}, [])
    doc = convert_docx(docx, "formula.docx")
    assert doc.metadata["embedded_objects"] == 0 and "embedded_name" not in doc.parts
    (warning,) = [w for w in doc.warnings if w.startswith("embedded object word/embeddings/oleObject1.bin")]
    assert "skipped: no document ki reads in it (streams " in warning and "EQUATION NATIVE_" in warning
    assert extract_embedded("docx", docx, "formula.docx") == []
