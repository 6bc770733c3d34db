"""ki.adapters.convert.rtf against every ``rtf/`` row of the real corpus MANIFEST, plus built edge cases.

Each MANIFEST clause becomes one test. Clauses that describe the file rather than
ki's output are not turned into tests (see ``FILE_FACTS``); clauses ki cannot meet
would be listed in ``EXPECTED_UNMET`` (strict xfail). An unknown clause fails
``test_every_clause_is_interpreted``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ki.adapters.convert.model import StructuredDocument
from ki.adapters.convert.rtf import convert_rtf
from ki.core.errors import UnsupportedDocument
from tests.helpers.manifest import Manifest, document, quoted

FOLDER = "rtf"

# Clauses about the file itself, not about ki's output:
#   raw contains "x"  bytes present in the RTF source (\bin, the annotation text, header and
#                     footnote text). ki's handling of those is asserted by the tests below.
FILE_FACTS = ("raw contains", "magic:", "bom:", "meta charset:", "password ", "eof markers")

EXPECTED_UNMET: dict[tuple[str, str], str] = {}
MANIFEST = Manifest(FOLDER, convert_rtf, file_facts=FILE_FACTS, expected_unmet=EXPECTED_UNMET)


def check_clause(result: StructuredDocument | UnsupportedDocument, clause: str) -> None:
    """Assert one MANIFEST clause against a conversion result (document or quarantine)."""
    if clause.startswith("quarantine:"):
        assert isinstance(result, UnsupportedDocument), "expected a quarantine"
        assert result.reason == clause.split(":", 1)[1].strip()
    elif clause == "text empty":
        assert isinstance(result, UnsupportedDocument) and result.reason == "empty_text"
    elif clause.startswith("text contains"):
        assert quoted(clause) in document(result).text
    elif clause.startswith("text lacks"):
        assert quoted(clause) not in document(result).text
    elif clause == "no lone surrogates":
        doc = document(result)
        for value in (doc.text, *doc.parts.values(), *(c.text for c in doc.comments)):
            value.encode("utf-8")
    else:
        pytest.fail(f"uninterpreted clause {clause!r}")


@pytest.mark.parametrize(("rel", "clause"), MANIFEST.cases())
def test_manifest_clause(real_corpus: Path, rel: str, clause: str) -> None:
    check_clause(MANIFEST.result(real_corpus / rel), clause)


def test_every_clause_is_interpreted(real_corpus: Path) -> None:
    known = ("quarantine:", "text empty", "text contains", "text lacks", "no lone surrogates")
    MANIFEST.assert_interpreted(known, min_rows=1)


def test_every_row_converts_or_is_empty_text(real_corpus: Path) -> None:
    for row in MANIFEST.rows():
        result = MANIFEST.result(real_corpus / row["path"])
        if isinstance(result, UnsupportedDocument):
            assert result.reason == "empty_text", row["path"]
        else:
            assert result.format == "rtf" and result.converter == "ki.rtf"
            result.text.encode("utf-8")


def test_comment_goes_to_comments_not_text(real_corpus: Path) -> None:
    doc = document(MANIFEST.result(real_corpus / "rtf/tika_testComment.rtf"))
    assert "Here is a comment" not in doc.text
    assert [(c.author, c.text) for c in doc.comments] == [("Michael McCandless", "Here is a comment")]


def test_header_footer_footnote_become_parts(real_corpus: Path) -> None:
    doc = document(MANIFEST.result(real_corpus / "rtf/tika_testRTFVarious.rtf"))
    assert "This is the header text" in doc.parts["header"]
    assert "This is the footer text" in doc.parts["footer"]
    assert "This is a footnote." in doc.parts["footnotes"]
    assert "This is a footnote." not in doc.text


def test_table_cells_are_tab_separated(real_corpus: Path) -> None:
    doc = document(MANIFEST.result(real_corpus / "rtf/tika_testRTFTableCellSeparation.rtf"))
    assert doc.text.split("\n") == ["a\tb", "c\td", "ä\të", "ö\tü"]
    assert " ".join(doc.text.split()) == "a b c d ä ë ö ü"  # Tika's expectation


def test_code_page_and_title_are_recorded(real_corpus: Path) -> None:
    polish = document(MANIFEST.result(real_corpus / "rtf/tika_testRTFWindowsCodepage1250.rtf"))
    assert polish.encoding == "cp1250"
    japanese = document(MANIFEST.result(real_corpus / "rtf/tika_testRTF-ms932.rtf"))
    assert japanese.encoding == "cp932" and japanese.title == "タイトル"


def test_embedded_objects_do_not_become_text(real_corpus: Path) -> None:
    result = MANIFEST.result(real_corpus / "rtf/tika_testRTFEmbeddedFiles.rtf")
    assert isinstance(result, UnsupportedDocument) and result.reason == "empty_text"
    assert result.details["objects"] == 14 and result.details["pictures"] == 28


def test_bin_payload_is_skipped_in_real_file(real_corpus: Path) -> None:
    result = MANIFEST.result(real_corpus / "rtf/tika_testBinControlWord.rtf")
    assert isinstance(result, UnsupportedDocument) and result.reason == "empty_text"
    assert result.details["bin_bytes"] == 10


def test_bin_payload_with_braces_never_becomes_text() -> None:
    payload = b"}}{\\\xff\x00"
    data = b"{\\rtf1\\ansi Before {\\*\\objdata \\bin6 " + payload + b"} After\\par}"
    doc = convert_rtf(data, "bin.rtf")
    assert doc.text.split() == ["Before", "After"]
    assert doc.metadata["bin_bytes"] == 6


def test_escaped_backslash_bin_is_literal_text() -> None:
    doc = convert_rtf(b"{\\rtf1\\ansi lit \\\\bin3 abc\\par}", "lit.rtf")
    assert doc.text == "lit \\bin3 abc"


def test_ansicpg_applies_to_fcharset0_fonts_and_raw_bytes() -> None:
    cyrillic = "Привет".encode("cp1251")
    escaped = b"".join(b"\\'%02x" % b for b in cyrillic)
    data = (
        b"{\\rtf1\\ansi\\ansicpg1251{\\fonttbl{\\f0\\fswiss\\fcharset0 Arial;}}\\f0 "
        + escaped
        + b" "
        + cyrillic
        + b"\\par}"
    )
    doc = convert_rtf(data, "ru.rtf")
    assert doc.text == "Привет Привет" and doc.encoding == "cp1251"


def test_lone_surrogates_become_replacement_characters() -> None:
    doc = convert_rtf(b"{\\rtf1\\ansi\\uc0 a\\u-10240 b\\u-10240\\u-8398 c}", "u.rtf")
    assert doc.text == "a\ufffdb\U00010332c"  # the space after \uN is its delimiter


def test_zero_bytes_is_empty() -> None:
    with pytest.raises(UnsupportedDocument) as info:
        convert_rtf(b"", "zero.rtf")
    assert info.value.reason == "empty"


def test_not_rtf_is_corrupt() -> None:
    with pytest.raises(UnsupportedDocument) as info:
        convert_rtf(b"plain text named .rtf", "fake.rtf")
    assert info.value.reason == "corrupt"


def test_only_control_words_is_empty_text() -> None:
    with pytest.raises(UnsupportedDocument) as info:
        convert_rtf(b"{\\rtf1\\ansi{\\fonttbl{\\f0 Arial;}}\\par\\par}", "blank.rtf")
    assert info.value.reason == "empty_text"


def test_utf8_bom_before_signature_is_accepted() -> None:
    assert convert_rtf(b"\xef\xbb\xbf{\\rtf1\\ansi Hi\\par}", "bom.rtf").text == "Hi"


def test_star_inside_a_group_keeps_the_rest_of_the_group() -> None:
    """Issue 20 item 5: ``\\*`` marks an ignorable destination only as the first control of a group."""
    rtf = (rb"{\rtf1\ansi{\fonttbl{\f0 Arial;}}{\*\generator Word;}"
           rb"{\b Clause 7 \* survives the star} and {\i a second \*\foo group} stays."
           rb"{ \*\userprops ignorable after a space}{\\* literal star}\par}")
    doc = convert_rtf(rtf, "star.rtf")
    assert doc.text == "Clause 7  survives the star and a second group stays. \\* literal star"
    assert "Word" not in doc.text and "ignorable" not in doc.text
