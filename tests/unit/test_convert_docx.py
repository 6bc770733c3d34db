"""ki.adapters.convert.docx against cases R05-R07, every ``docx/`` row of the real corpus MANIFEST, and built packages.

Each MANIFEST clause becomes one test. Clauses that describe the file rather than
ki's output are not turned into tests (see ``FILE_FACTS``); clauses ki cannot meet
are listed in ``EXPECTED_UNMET`` (strict xfail, so meeting one later is noticed).
An unknown clause fails ``test_every_clause_is_interpreted``.
"""

from __future__ import annotations

import io
import re
import struct
import time
import zipfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ki.adapters.convert.docx import convert_docx
from ki.adapters.convert.model import StructuredDocument
from ki.adapters.convert.ooxml_package import MAX_MEMBER_BYTES
from ki.core.errors import UnsupportedDocument
from tests.helpers.manifest import Manifest, document, quoted

FOLDER = "docx"

# Clauses about the file itself, not about ki's output:
#   zip member: X / zip member X contains "..."   package layout (altChunk/embedding/signature parts)
#   magic: ...                                   the first bytes (such files must still convert or quarantine)
#   namespace: strict                            the XML namespace flavour (the text clause checks the outcome)
#   password "x" / decrypted text contains       facts about the decrypted file; ki never receives passwords
FILE_FACTS = ("zip member", "magic:", "namespace:", "password ", "decrypted text contains")

# (path, clause) -> why ki does not meet it (strict xfail: the clause must keep failing).
EXPECTED_UNMET: dict[tuple[str, str], str] = {
    ("docx/tika_testAltChunkHTML.docx", 'text lacks "Example of a table"'): (
        "superseded by issue 20 item 2: an altChunk's imported HTML is converted into the body, so the text is there"
    ),
}
MANIFEST = Manifest(FOLDER, convert_docx, file_facts=FILE_FACTS, expected_unmet=EXPECTED_UNMET)


def _number(clause: str) -> int:
    return int(re.search(r"(\d+)\s*$", clause).group(1))


def _names(clause: str) -> list[str]:
    """``authors: A | B`` → sorted names; an empty name (anonymous author) stays as ``""``."""
    return sorted(name.strip() for name in clause.split(":", 1)[1].split("|"))


_PART_CLAUSES = {"header": "header", "footer": "footer", "footnote": "footnotes", "endnote": "endnotes"}
_COUNTS = {"tables:": "tables", "sdt:": "sdt", "numbered paragraphs:": "numbered_paragraphs", "sections:": "sections"}


def check_clause(result: StructuredDocument | UnsupportedDocument, clause: str) -> None:
    """Assert one MANIFEST clause against a conversion result (document or quarantine)."""
    head = clause.split(" ", 1)[0]
    if clause.startswith("quarantine:"):
        assert isinstance(result, UnsupportedDocument), "expected a quarantine"
        assert result.reason == clause.split(":", 1)[1].strip()
    elif clause.startswith(("text count", "original count")):
        doc = document(result)
        text = doc.text if head == "text" else (doc.original_text or "")
        assert text.count(quoted(clause)) == _number(clause)
    elif clause.startswith("text contains"):
        assert quoted(clause) in document(result).text
    elif clause.startswith("text lacks"):
        assert quoted(clause) not in document(result).text
    elif clause.startswith("original contains"):
        assert quoted(clause) in (document(result).original_text or "")
    elif clause.startswith("original lacks"):
        assert quoted(clause) not in (document(result).original_text or "")
    elif clause.startswith("revisions:"):
        wanted = {k.strip(): int(v) for k, v in (item.split("=") for item in clause.split(":", 1)[1].split(","))}
        assert dict(Counter(r.kind for r in document(result).revisions)) == wanted
    elif clause.startswith("revisions without date:"):
        assert sum(r.date is None for r in document(result).revisions) == _number(clause)
    elif clause.startswith("revision authors:"):
        assert sorted({r.author or "" for r in document(result).revisions}) == _names(clause)
    elif clause.startswith("comments:"):
        assert len(document(result).comments) == _number(clause)
    elif clause.startswith("comment contains"):
        assert any(quoted(clause) in c.text for c in document(result).comments)
    elif clause.startswith("comment authors:"):
        assert sorted({c.author or "" for c in document(result).comments}) == _names(clause)
    elif clause.startswith("comment replies:"):
        assert sum(c.parent_id is not None for c in document(result).comments) == _number(clause)
    elif clause.startswith("comments resolved:"):
        assert sum(c.resolved for c in document(result).comments) == _number(clause)
    elif clause.startswith("comments without date:"):
        assert sum(c.date is None for c in document(result).comments) == _number(clause)
    elif head in _PART_CLAUSES and clause.startswith(f"{head} contains"):
        assert quoted(clause) in document(result).parts.get(_PART_CLAUSES[head], "")
    elif clause.startswith(tuple(_COUNTS)):
        key = next(v for k, v in _COUNTS.items() if clause.startswith(k))
        assert document(result).metadata[key] == _number(clause)
    else:
        pytest.fail(f"uninterpreted clause {clause!r}")


@pytest.mark.parametrize(("rel", "clause"), MANIFEST.cases())
def test_manifest_clause(real_corpus: Path, rel: str, clause: str) -> None:
    check_clause(MANIFEST.result(real_corpus / rel), clause)


def test_every_clause_is_interpreted(real_corpus: Path) -> None:
    known = (
        "quarantine:", "text count", "original count", "text contains", "text lacks", "original contains",
        "original lacks", "revisions:", "revisions without date:", "revision authors:", "comments:",
        "comment contains", "comment authors:", "comment replies:", "comments resolved:", "comments without date:",
        "header contains", "footer contains", "footnote contains", "endnote contains", *_COUNTS,
    )  # fmt: skip
    MANIFEST.assert_interpreted(known, min_rows=29)


def test_every_row_converts_or_quarantines_with_known_reason(real_corpus: Path) -> None:
    for row in MANIFEST.rows():
        result = MANIFEST.result(real_corpus / row["path"])
        if isinstance(result, UnsupportedDocument):
            assert result.reason in {"password_required", "corrupt"}, row["path"]
            continue
        assert result.format == "docx" and result.converter == "ki.docx"
        result.model_dump_json()  # every string encodes to UTF-8
        assert (result.original_text is None) == (not result.revisions), row["path"]


def test_corpus_converts_fast(real_corpus: Path) -> None:
    started = time.perf_counter()
    for row in MANIFEST.rows():
        try:
            convert_docx((real_corpus / row["path"]).read_bytes(), row["path"])
        except UnsupportedDocument:
            pass
    assert time.perf_counter() - started < 5.0


# ---------------------------------------------------------------------------- cases R05-R07


def _case(cases_dir: Path, prefix: str) -> StructuredDocument:
    (folder,) = cases_dir.glob(f"{prefix}-*")
    return convert_docx((folder / "input.docx").read_bytes(), "input.docx")


def test_r05_tracked_changes_accepted_original_and_revisions(cases_dir: Path) -> None:
    doc = _case(cases_dir, "R05")
    assert doc.text.split("\n") == [
        "The Tenant shall pay a monthly rent of EUR 1,350 per month.",
        "Payment terms are set out in Schedule C.",
        "Either party may terminate with 30 days notice.",
    ]
    assert doc.original_text.split("\n") == [
        "The Tenant shall pay a monthly rent of EUR 1,200 per month.",
        "Payment terms are set out in Schedule B.",
        "",
    ]
    for present in ("EUR 1,350", "Schedule C"):
        assert present in doc.text
    for absent in ("EUR 1,200", "Schedule B"):
        assert absent not in doc.text
    rita, malte = datetime(2024, 3, 1, 10, tzinfo=UTC), datetime(2024, 3, 2, 15, 30, tzinfo=UTC)
    got = [(r.kind, r.text, r.author, r.date, r.revision_id, r.paragraph, r.container) for r in doc.revisions]
    assert got == [
        ("del", "EUR 1,200", "Rita Okonkwo", rita, "1", 0, None),
        ("ins", "EUR 1,350", "Rita Okonkwo", rita, "2", 0, None),
        ("del", "B", "Rita Okonkwo", rita, "3", 1, "hyperlink:rId10"),
        ("ins", "C", "Rita Okonkwo", rita, "4", 1, "hyperlink:rId10"),
        ("ins", "Either party may terminate with 30 days notice.", "Malte Feld", malte, "5", 2, None),
    ]
    assert {r.part for r in doc.revisions} == {"document"}
    assert doc.format == "docx" and doc.converter == "ki.docx" and doc.warnings == []


def test_r06_content_controls_text_in_order(cases_dir: Path) -> None:
    doc = _case(cases_dir, "R06")
    assert doc.text.split("\n") == [
        "Client: Harbor & Finch LLP",
        "Matter number: HF-2024-0193 (confidential)",
        "Counterparty: Meridian Freight Ltd",
        "Documents are available in the client portal.",
    ]
    assert doc.original_text is None and doc.revisions == []
    assert doc.metadata["sdt"] == 3 and doc.metadata["tables"] == 1


def test_r07_dangling_null_relationship_is_a_warning(cases_dir: Path) -> None:
    doc = _case(cases_dir, "R07")
    assert doc.text == "Engagement letter for matter HF-2024-0193.\nFee cap agreed at EUR 25,000 plus VAT."
    assert len(doc.warnings) == 1 and "rId5" in doc.warnings[0] and "NULL" in doc.warnings[0]


# ---------------------------------------------------------------------------- corpus specifics


def test_2006ml_moves_pair_by_name_and_deleted_rows_leave_accepted_view(real_corpus: Path) -> None:
    doc = document(MANIFEST.result(real_corpus / "docx/tika_testWORD_2006ml.docx"))
    moves = [r for r in doc.revisions if r.kind in ("moveFrom", "moveTo", "para_moveFrom", "para_moveTo")]
    assert {r.move_name for r in moves} == {"move468187193"}
    assert [r.text for r in moves if r.kind in ("moveFrom", "moveTo")] == ["Second paragraph here"] * 2
    assert all(r.date == datetime(2016, 11, 29, 12, 51, tzinfo=UTC) for r in moves)
    rows = [r for r in doc.revisions if r.kind == "row_del"]
    assert [r.text for r in rows] == ["Del r1c1 | Del r1c2", "Del r2c1 | Del r2c2", "R2c1 | R2c2"]
    assert "Del r1c1 | Del r1c2" in doc.original_text.split("\n")
    lines = doc.text.split("\n")
    assert "R1c1 | R1c2" in lines and "R4c1 | R3c2" in lines  # R3c1 replaced by R4c1 inside a kept row
    assert "The quick brown fox jumped over the lazy brown dog." in lines
    assert lines[doc.revisions[0].paragraph] == "The quick brown fox jumped over the lazy brown dog."
    assert doc.comments[0].anchor_text == "2" and doc.title == doc.metadata["title"] == "My Document Title"


def test_revisions_without_dates_and_nested_move(real_corpus: Path) -> None:
    doc = document(MANIFEST.result(real_corpus / "docx/tika_testWORD_missing_ooxml_bean1.docx"))
    assert [(r.kind, r.move_name) for r in doc.revisions] == [
        ("del", None),
        ("moveTo", "move256509658"),
        ("del", None),
        ("moveFrom", "move256509658"),
        ("ins", None),
        ("rPrChange", None),
    ]
    assert all(r.date is None and r.author == "Author" for r in doc.revisions)


def test_comment_thread_and_resolved(real_corpus: Path) -> None:
    thread = document(MANIFEST.result(real_corpus / "docx/docxfix_comment-thread.docx")).comments
    assert [(c.comment_id, c.parent_id, c.text, c.resolved) for c in thread] == [
        ("0", None, "A comment.", False),
        ("1", "0", "A reply comment.", False),
    ]
    assert thread[0].anchor_text == "dolor sit amet"
    (resolved,) = document(MANIFEST.result(real_corpus / "docx/docxfix_resolved-comment.docx")).comments
    assert resolved.resolved is True and resolved.date is None


def test_text_boxes_read_once_and_strict_namespace(real_corpus: Path) -> None:
    doc = document(MANIFEST.result(real_corpus / "docx/tika_testWORD_text_box.docx"))
    assert doc.text.split("\n") == [
        "This text is inside of a text box in the body of the document.",
        "This text is directly in the body of the document.",
    ]
    assert document(MANIFEST.result(real_corpus / "docx/docling_Strict.docx")).text == "Some text"


def test_alt_chunk_html_is_body_text(real_corpus: Path) -> None:
    doc = document(MANIFEST.result(real_corpus / "docx/tika_testAltChunkHTML.docx"))
    assert doc.metadata["alt_chunks"] == 1 and not doc.warnings
    assert doc.text.split("\n")[:2] == ["Simple paragraph with a emphasized word.", "Example of a table:"]


# ---------------------------------------------------------------------------- built packages

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_NS = (
    f'xmlns:w="{_W}" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" '
    'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
    'xmlns:w14="http://schemas.microsoft.com/office/word/2010/wordml" '
    'xmlns:w15="http://schemas.microsoft.com/office/word/2012/wordml"'
)
_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"


def _docx(body: str, extra: dict[str, str] | None = None, rels: str = "", prolog: str = "") -> bytes:
    """A minimal package: ``body`` inside ``w:body``, ``extra`` parts, ``rels`` for document.xml."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(
            "[Content_Types].xml", '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>'
        )
        zf.writestr(
            "_rels/.rels",
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            f'<Relationship Id="rId1" Type="{_REL}/officeDocument" Target="word/document.xml"/></Relationships>',
        )
        zf.writestr("word/document.xml", f"{prolog}<w:document {_NS}><w:body>{body}</w:body></w:document>")
        zf.writestr(
            "word/_rels/document.xml.rels",
            f'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">{rels}</Relationships>',
        )
        for name, xml in (extra or {}).items():
            zf.writestr(name, xml)
    return buf.getvalue()


def _p(inner: str, ppr: str = "") -> str:
    return f"<w:p>{'<w:pPr>' + ppr + '</w:pPr>' if ppr else ''}{inner}</w:p>"


def _r(text: str) -> str:
    return f'<w:r><w:t xml:space="preserve">{text}</w:t></w:r>'


def _dr(text: str) -> str:
    return f'<w:r><w:delText xml:space="preserve">{text}</w:delText></w:r>'


def _rev(tag: str, rid: int, inner: str = "", author: str = "A") -> str:
    return f'<w:{tag} w:id="{rid}" w:author="{author}">{inner}</w:{tag}>'


def test_deleted_paragraph_mark_merges_and_fully_deleted_paragraph_vanishes() -> None:
    body = (
        _p(_r("Keep one")),
        _p(_rev("del", 1, _dr("Gone entirely")), "<w:rPr>" + _rev("del", 2) + "</w:rPr>"),
        _p(_r("Start of "), "<w:rPr>" + _rev("del", 3) + "</w:rPr>"),
        _p(_r("merged end")),
        _p(_rev("ins", 4, _r("New para")), "<w:rPr>" + _rev("ins", 5) + "</w:rPr>"),
        _p(_r("Last")),
    )
    doc = convert_docx(_docx("".join(body)), "t.docx")
    assert doc.text.split("\n") == ["Keep one", "Start of merged end", "New para", "Last"]
    assert doc.original_text.split("\n") == ["Keep one", "Gone entirely", "Start of ", "merged end", "Last"]
    kinds = [(r.kind, r.paragraph) for r in doc.revisions]
    assert kinds == [("para_del", 1), ("del", 1), ("para_del", 1), ("para_ins", 2), ("ins", 2)]
    assert all(r.date is None for r in doc.revisions)


def test_rows_cells_and_formatting_only_revisions() -> None:
    def tc(text: str, tcpr: str = "") -> str:
        return f"<w:tc>{'<w:tcPr>' + tcpr + '</w:tcPr>' if tcpr else ''}{_p(_r(text))}</w:tc>"

    table = (
        "<w:tbl><w:tblPr><w:tblW w:w='0' w:type='auto'/>"
        + _rev("tblPrChange", 9, "<w:tblPr/>")
        + "</w:tblPr>"
        + "<w:tr>" + tc("a1") + tc("b1") + "</w:tr>"
        + "<w:tr><w:trPr>" + _rev("ins", 10) + "</w:trPr>" + tc("new1") + tc("new2") + "</w:tr>"
        + "<w:tr>" + tc("a3") + tc("gone", _rev("cellDel", 11)) + "</w:tr>"
        + "</w:tbl>"
    )  # fmt: skip
    body = _p(_r("Intro"), _rev("pPrChange", 12, "<w:pPr/>")) + table
    body += _p("<w:r><w:rPr><w:b/>" + _rev("rPrChange", 13, "<w:rPr/>") + "</w:rPr><w:t>bold</w:t></w:r>")
    body += "<w:sectPr>" + _rev("sectPrChange", 14, "<w:sectPr/>") + "</w:sectPr>"
    doc = convert_docx(_docx(body), "t.docx")
    assert doc.text.split("\n") == ["Intro", "a1 | b1", "new1 | new2", "a3", "bold"]
    assert doc.original_text.split("\n") == ["Intro", "a1 | b1", "a3 | gone", "bold"]
    got = [(r.kind, r.text, r.paragraph) for r in doc.revisions]
    assert got == [
        ("pPrChange", "", 0),
        ("other_format", "", 1),
        ("row_ins", "new1 | new2", 2),
        ("cell_del", "gone", 3),
        ("rPrChange", "", 4),
        ("other_format", "", 5),
    ]
    assert doc.metadata["tables"] == 1 and doc.metadata["sections"] == 1


def test_containers_fallback_and_inline_markup() -> None:
    txbx = (
        "<w:r><mc:AlternateContent><mc:Choice Requires='wps'><w:drawing><w:txbxContent>"
        + _p(_rev("ins", 1, _r("boxed")))
        + "</w:txbxContent></w:drawing></mc:Choice><mc:Fallback><w:pict><w:txbxContent>"
        + _p(_rev("ins", 2, _r("boxed")))
        + "</w:txbxContent></w:pict></mc:Fallback></mc:AlternateContent></w:r>"
    )
    body = _p(_r("Anchor") + txbx)
    body += _p(
        "<w:smartTag w:element='place'>" + _rev("del", 3, _dr("Paris")) + _rev("ins", 4, _r("Rome")) + "</w:smartTag>"
        + _r(" ") + "<w:fldSimple w:instr='DATE'>" + _rev("ins", 5, _r("today")) + "</w:fldSimple>"
        + "<w:hyperlink w:anchor='sec2'>" + _r(" see") + "</w:hyperlink>"
        + "<w:sdt><w:sdtPr><w:alias w:val='x'/></w:sdtPr><w:sdtContent>" + _r(" ctl") + "</w:sdtContent></w:sdt>"
        + '<w:r><w:tab/><w:t>x</w:t><w:br/><w:instrText>PAGE</w:instrText><w:noBreakHyphen/></w:r>'
    )  # fmt: skip
    body += _p(_rev("ins", 6, _rev("del", 7, _dr("typo"), author="B")))  # inserted, then deleted by B
    doc = convert_docx(_docx(body), "t.docx")
    assert doc.text.split("\n") == ["boxed", "Anchor", "Rome today see ctl\tx -", ""]
    assert doc.original_text.split("\n") == ["", "Anchor", "Paris  see ctl\tx -", ""]
    got = [(r.kind, r.text, r.container, r.paragraph) for r in doc.revisions]
    assert got == [
        ("ins", "boxed", "txbx", 0),
        ("del", "Paris", "smartTag", 2),
        ("ins", "Rome", "smartTag", 2),
        ("ins", "today", "fldSimple", 2),
        ("ins", "typo", None, 3),
        ("del", "typo", None, 3),
    ]
    assert [r.author for r in doc.revisions][-2:] == ["A", "B"]


def test_comments_threads_anchor_and_extensible_dates() -> None:
    body = _p(_r("Before ") + '<w:commentRangeStart w:id="7"/>' + _r("anchored") + '<w:commentRangeEnd w:id="7"/>')
    comments = (
        f"<w:comments {_NS}>"
        '<w:comment w:id="7" w:author="Ann" w:date="2024-05-01T09:00:00Z">'
        '<w:p w14:paraId="0000000A">' + _r("First line") + "</w:p>"
        '<w:p w14:paraId="0000000B">' + _r("Root") + "</w:p></w:comment>"
        '<w:comment w:id="8" w:author="Bob"><w:p w14:paraId="0000000C">' + _r("Reply") + "</w:p></w:comment>"
        "</w:comments>"
    )
    extended = (
        f"<w15:commentsEx {_NS}>"
        '<w15:commentEx w15:paraId="0000000B" w15:done="1"/>'
        '<w15:commentEx w15:paraId="0000000C" w15:paraIdParent="0000000B" w15:done="0"/>'
        "</w15:commentsEx>"
    )
    cid = "http://schemas.microsoft.com/office/word/2016/wordml/cid"
    cex = "http://schemas.microsoft.com/office/word/2018/wordml/cex"
    ids = (
        f'<w16cid:commentsIds xmlns:w16cid="{cid}">'
        '<w16cid:commentId w16cid:paraId="0000000C" w16cid:durableId="77"/></w16cid:commentsIds>'
    )
    ext = (
        f'<w16cex:commentsExtensible xmlns:w16cex="{cex}">'
        '<w16cex:commentExtensible w16cex:durableId="77" w16cex:dateUtc="2024-05-02T08:00:00Z"/>'
        "</w16cex:commentsExtensible>"
    )
    rels = (
        f'<Relationship Id="rId1" Type="{_REL}/comments" Target="comments.xml"/>'
        '<Relationship Id="rId2" Type="http://schemas.microsoft.com/office/2011/relationships/commentsExtended" '
        'Target="commentsExtended.xml"/>'
        '<Relationship Id="rId3" Type="http://schemas.microsoft.com/office/2016/09/relationships/commentsIds" '
        'Target="commentsIds.xml"/>'
        '<Relationship Id="rId4" Type="http://schemas.microsoft.com/office/2018/08/relationships/commentsExtensible" '
        'Target="commentsExtensible.xml"/>'
    )
    extra = {
        "word/comments.xml": comments,
        "word/commentsExtended.xml": extended,
        "word/commentsIds.xml": ids,
        "word/commentsExtensible.xml": ext,
    }
    doc = convert_docx(_docx(body, extra, rels), "t.docx")
    root, reply = doc.comments
    assert (root.comment_id, root.text, root.anchor_text, root.resolved, root.parent_id) == (
        "7", "First line\nRoot", "anchored", True, None,
    )  # fmt: skip
    assert (reply.parent_id, reply.resolved, reply.anchor_text) == ("7", False, None)
    assert reply.date == datetime(2024, 5, 2, 8, tzinfo=UTC) and root.date == datetime(2024, 5, 1, 9, tzinfo=UTC)
    assert doc.text == "Before anchored" and doc.original_text is None


def test_headers_footers_notes_go_to_parts_not_text() -> None:
    def part(root: str, inner: str) -> str:
        return f"<w:{root} {_NS}>{inner}</w:{root}>"

    notes = (
        '<w:footnote w:type="separator" w:id="-1">' + _p("<w:r><w:separator/></w:r>") + "</w:footnote>"
        '<w:footnote w:id="1">' + _p(_r("Note text")) + "</w:footnote>"
    )
    extra = {
        "word/header2.xml": part("hdr", _p(_r("Head two"))),
        "word/header10.xml": part("hdr", _p(_r("Head ten"))),
        "word/footer1.xml": part("ftr", _p(_rev("del", 1, _dr("old")) + _r("Foot"))),
        "word/footnotes.xml": part("footnotes", notes),
    }
    rels = (
        f'<Relationship Id="rId1" Type="{_REL}/header" Target="header10.xml"/>'
        f'<Relationship Id="rId2" Type="{_REL}/header" Target="header2.xml"/>'
        f'<Relationship Id="rId3" Type="{_REL}/footer" Target="footer1.xml"/>'
        f'<Relationship Id="rId4" Type="{_REL}/footnotes" Target="footnotes.xml"/>'
        f'<Relationship Id="rId5" Type="{_REL}/endnotes" Target="missing.xml"/>'
    )
    doc = convert_docx(_docx(_p(_r("Body")), extra, rels), "t.docx")
    assert doc.text == "Body"
    assert doc.parts == {"header": "Head two\nHead ten", "footer": "Foot", "footnotes": "Note text"}
    assert [(r.kind, r.part, r.text) for r in doc.revisions] == [("del", "footer1", "old")]
    assert any("rId5" in w and "missing.xml" in w for w in doc.warnings)


def test_numbering_via_style_and_direct() -> None:
    styles = (
        f"<w:styles {_NS}>"
        '<w:style w:type="paragraph" w:styleId="Base"><w:pPr><w:numPr><w:numId w:val="3"/></w:numPr></w:pPr></w:style>'
        '<w:style w:type="paragraph" w:styleId="Child"><w:basedOn w:val="Base"/></w:style>'
        "</w:styles>"
    )
    rels = f'<Relationship Id="rId1" Type="{_REL}/styles" Target="styles.xml"/>'
    body = (
        _p(_r("direct"), '<w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr>')
        + _p(_r("via style"), '<w:pStyle w:val="Child"/>')
        + _p(_r("switched off"), '<w:pStyle w:val="Child"/><w:numPr><w:numId w:val="0"/></w:numPr>')
        + _p(_r("plain"))
    )
    doc = convert_docx(_docx(body, {"word/styles.xml": styles}, rels), "t.docx")
    assert doc.metadata["numbered_paragraphs"] == 2
    assert "1." not in doc.text


def test_core_title_and_entities_are_not_resolved(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    prolog = f'<?xml version="1.0"?><!DOCTYPE w:document [<!ENTITY xxe SYSTEM "file://{secret}">]>'
    core = (
        '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title> Lease  agreement </dc:title></cp:coreProperties>'
    )
    data = _docx(_p("<w:r><w:t>a &xxe; b</w:t></w:r>"), {"docProps/core.xml": core}, prolog=prolog)
    doc = convert_docx(data, "t.docx")
    assert doc.text == "a  b"  # the entity reference is dropped, never expanded
    assert doc.title == doc.metadata["title"] == "Lease agreement"


# ---------------------------------------------------------------------------- failures


def _reason(data: bytes) -> str:
    with pytest.raises(UnsupportedDocument) as info:
        convert_docx(data, "bad.docx")
    return info.value.reason


def test_failure_reasons() -> None:
    assert _reason(b"") == "empty"
    assert _reason(b"not a zip at all") == "corrupt"
    assert _reason(_docx(_p(_r("x")))[:200]) == "corrupt"  # truncated: no central directory
    no_doc = io.BytesIO()
    with zipfile.ZipFile(no_doc, "w") as zf:
        zf.writestr("word/other.xml", "<x/>")
    assert _reason(no_doc.getvalue()) == "corrupt"
    assert _reason(_docx("<w:p><w:r><w:t>unclosed</w:r></w:p>")) == "corrupt"


def test_cfb_containers() -> None:
    header = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504
    for name in ("EncryptedPackage", "ENCRYPTEDPACKAGE", "encryptedpackage"):
        assert _reason(header + name.encode("utf-16-le") + b"\x00" * 64) == "password_required"
    assert _reason(header + "WordDocument".encode("utf-16-le")) == "unsupported_format"  # legacy .doc


def test_zip_bomb_member_is_refused() -> None:
    data = bytearray(_docx(_p(_r("small"))))
    # Claim a huge uncompressed size for word/document.xml in the central directory.
    name = b"word/document.xml"
    pos = data.index(b"PK\x01\x02")
    while bytes(data[pos + 46 : pos + 46 + struct.unpack_from("<H", data, pos + 28)[0]]) != name:
        pos = data.index(b"PK\x01\x02", pos + 4)
    struct.pack_into("<I", data, pos + 24, MAX_MEMBER_BYTES + 1)
    assert _reason(bytes(data)) == "corrupt"
