"""ki.adapters.convert.pdf against every ``pdf/`` row of the real corpus MANIFEST, plus generated edge cases.

Each MANIFEST clause becomes one test. Clauses that describe the file rather than
ki's output are not turned into tests (see ``FILE_FACTS``); clauses ki cannot meet
are listed in ``EXPECTED_UNMET`` (strict xfail, so meeting one later is noticed).
An unknown clause fails ``test_every_clause_is_interpreted``.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from ki.adapters.convert.model import StructuredDocument
from ki.adapters.convert.pdf import PAGE_SEPARATOR, convert_pdf
from ki.core.errors import UnsupportedDocument
from tests.helpers.manifest import Manifest, document, quoted

FOLDER = "pdf"

# Clauses about the file itself, not about ki's output:
#   magic: ...        the first bytes (checked implicitly: such files must still open or quarantine)
#   password "x"      the user password; ki never receives passwords
#   eof markers >= N  the number of %%EOF markers (incremental updates)
FILE_FACTS = ("magic:", "password ", "eof markers", "bom:", "raw contains", "meta charset:")

_LOCKED = "describes the decrypted file; without the password ki quarantines it as password_required"
EXPECTED_UNMET: dict[tuple[str, str], str] = {
    ("pdf/docling_2206.01062_pg3_password-1234.pdf", "pages: 1"): _LOCKED,
    (
        "pdf/docling_2206.01062_pg3_password-1234.pdf",
        'text contains "DocLayNet: A Large Human-Annotated Dataset"',
    ): _LOCKED,
    ("pdf/tika_testPDF_no_extract_no_accessibility_owner_user.pdf", 'text contains "Hello World"'): _LOCKED,
    ("pdf/tika_testPassword4Spaces.pdf", 'text contains "Just some text."'): _LOCKED,
}
MANIFEST = Manifest(FOLDER, convert_pdf, file_facts=FILE_FACTS, expected_unmet=EXPECTED_UNMET)


def _number(clause: str) -> int:
    return int(re.search(r"(\d+)\s*$", clause).group(1))


def check_clause(result: StructuredDocument | UnsupportedDocument, clause: str) -> None:
    """Assert one MANIFEST clause against a conversion result (document or quarantine)."""
    if clause.startswith("quarantine:"):
        assert isinstance(result, UnsupportedDocument), "expected a quarantine"
        assert result.reason == clause.split(":", 1)[1].strip()
    elif clause == "needs_ocr":
        assert isinstance(result, UnsupportedDocument) and result.reason == "needs_ocr"
    elif clause == "text empty":
        # Decision: a PDF that opens but has neither text nor images has nothing to OCR.
        assert isinstance(result, UnsupportedDocument) and result.reason == "empty_text"
    elif clause.startswith("pages:"):
        pages = result.details.get("pages") if isinstance(result, UnsupportedDocument) else result.pages
        assert pages == _number(clause)
    elif clause.startswith("text contains"):
        assert quoted(clause) in document(result).text
    elif clause.startswith("text lacks"):
        assert quoted(clause) not in document(result).text
    elif clause == "encrypted: yes":
        assert document(result).metadata["encrypted"] is True
    elif clause == "opens without password":
        document(result)
    elif clause.startswith("form fields >="):
        assert document(result).metadata["form_fields"] >= _number(clause)
    elif clause.startswith("embedded files >="):
        assert document(result).metadata["embedded_files"] >= _number(clause)
    else:
        pytest.fail(f"uninterpreted clause {clause!r}")


@pytest.mark.parametrize(("rel", "clause"), MANIFEST.cases())
def test_manifest_clause(real_corpus: Path, rel: str, clause: str) -> None:
    check_clause(MANIFEST.result(real_corpus / rel), clause)


def test_every_clause_is_interpreted(real_corpus: Path) -> None:
    known = (
        "quarantine:",
        "needs_ocr",
        "text empty",
        "pages:",
        "text contains",
        "text lacks",
        "encrypted: yes",
        "opens without password",
        "form fields >=",
        "embedded files >=",
    )
    MANIFEST.assert_interpreted(known, min_rows=1)


def test_every_row_converts_or_quarantines_with_known_reason(real_corpus: Path) -> None:
    for row in MANIFEST.rows():
        result = MANIFEST.result(real_corpus / row["path"])
        if isinstance(result, UnsupportedDocument):
            assert result.reason in {"password_required", "corrupt", "needs_ocr", "empty_text"}, row["path"]
        else:
            assert result.format == "pdf" and result.converter == "ki.pdf"
            result.text.encode("utf-8")  # no lone surrogates
            assert (
                result.pages == len(result.text.split(PAGE_SEPARATOR)) == len(result.metadata["page_chars"])
            )


def test_pages_are_form_feed_separated_with_per_page_counts(real_corpus: Path) -> None:
    doc = document(MANIFEST.result(real_corpus / "pdf/docling_multi_page.pdf"))
    pages = doc.text.split("\f")
    assert len(pages) == 5
    assert doc.metadata["page_chars"] == [len(p) for p in pages]
    assert "\r" not in doc.text


def test_junk_before_header_is_skipped(real_corpus: Path) -> None:
    ticket = document(MANIFEST.result(real_corpus / "pdf/tika_test-pdf-with-print-ticket-header.pdf"))
    assert ticket.metadata["header_offset"] > 0 and ticket.title == "Note"
    bom = document(MANIFEST.result(real_corpus / "pdf/tika_testPDF_bom.pdf"))
    assert bom.metadata["header_offset"] == 3


def test_owner_only_encryption_is_flagged_and_plain_files_are_not(real_corpus: Path) -> None:
    assert document(
        MANIFEST.result(real_corpus / "pdf/tika_testPDF_no_extract_yes_accessibility_owner_empty.pdf")
    ).metadata["encrypted"]
    assert document(MANIFEST.result(real_corpus / "pdf/docling_multi_page.pdf")).metadata["encrypted"] is False


def test_needs_ocr_details_carry_page_count(real_corpus: Path) -> None:
    result = MANIFEST.result(real_corpus / "pdf/docling_nemotron_multipage.pdf")
    assert isinstance(result, UnsupportedDocument)
    assert result.details["pages"] == 4 and result.details["image_pages"] == 4


def test_zero_bytes_is_empty() -> None:
    with pytest.raises(UnsupportedDocument) as info:
        convert_pdf(b"", "zero.pdf")
    assert info.value.reason == "empty"


@pytest.mark.parametrize(
    "data",
    [b"hello, not a pdf", b"x" * 2048 + b"%PDF-1.7\n", b"%PDF-1.7\n", b"%PDF-1.4\n1 0 obj\n<<"],
    ids=["text", "header-after-1KB", "header-only", "truncated"],
)
def test_not_a_pdf_or_truncated_is_corrupt(data: bytes) -> None:
    with pytest.raises(UnsupportedDocument) as info:
        convert_pdf(data, "bad.pdf")
    assert info.value.reason == "corrupt"


def test_truncated_real_pdf_is_corrupt(real_corpus: Path) -> None:
    data = (real_corpus / "pdf/docling_multi_page.pdf").read_bytes()
    with pytest.raises(UnsupportedDocument) as info:
        convert_pdf(data[: len(data) // 2], "half.pdf")
    assert info.value.reason == "corrupt"


def _generated_pdf(pages: int) -> bytes:
    pdf = pdfium.PdfDocument.new()
    try:
        for _ in range(pages):
            pdf.new_page(200, 200).close()
        buffer = io.BytesIO()
        pdf.save(buffer)
        return buffer.getvalue()
    finally:
        pdf.close()


def test_blank_pages_without_images_are_empty_text_not_ocr() -> None:
    with pytest.raises(UnsupportedDocument) as info:
        convert_pdf(_generated_pdf(3), "blank.pdf")
    assert info.value.reason == "empty_text"
    assert info.value.details == {"pages": 3}


def test_repeated_conversion_is_deterministic(real_corpus: Path) -> None:
    data = (real_corpus / "pdf/tika_testPDF_acroform3.pdf").read_bytes()
    first = convert_pdf(data, "a.pdf")
    for _ in range(20):  # every pdfium handle is closed; repeated opens must not drift or fail
        assert convert_pdf(data, "a.pdf") == first
    assert first.metadata["form_fields"] >= 1
