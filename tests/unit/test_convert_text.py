"""ki.adapters.convert.text against every ``txt/`` row of the real corpus MANIFEST, plus built edge cases.

Each MANIFEST clause becomes one test. Every clause of the ``txt/`` rows is checked
against ki's output (``bom:`` against ``metadata["bom"]``); an unknown clause fails
``test_every_clause_is_interpreted``.
"""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from ki.adapters.convert.model import StructuredDocument
from ki.adapters.convert.text import convert_text, decode_text, fix_surrogates, sniff_wide
from ki.core.errors import UnsupportedDocument
from tests.helpers.manifest import Manifest, document, quoted

FOLDER = "txt"
KNOWN = ("quarantine:", "text contains", "encoding:", "not utf-8", "bom:")
MANIFEST = Manifest(FOLDER, convert_text)


def _codec(name: str) -> str:
    return codecs.lookup(name).name


def check_clause(result: StructuredDocument | UnsupportedDocument, clause: str) -> None:
    """Assert one MANIFEST clause against a conversion result (document or quarantine)."""
    value = clause.split(":", 1)[1].strip() if ":" in clause else ""
    if clause.startswith("quarantine:"):
        assert isinstance(result, UnsupportedDocument), "expected a quarantine"
        assert result.reason == value
    elif clause.startswith("text contains"):
        assert quoted(clause) in document(result).text
    elif clause.startswith("encoding:"):
        assert _codec(document(result).encoding) == _codec(value)
    elif clause == "not utf-8":
        assert _codec(document(result).encoding) != "utf-8"
    elif clause.startswith("bom:"):
        bom = document(result).metadata["bom"]
        assert (bom is None) if value == "none" else _codec(bom) == _codec(value)
    else:
        pytest.fail(f"uninterpreted clause {clause!r}")


@pytest.mark.parametrize(("rel", "clause"), MANIFEST.cases())
def test_manifest_clause(real_corpus: Path, rel: str, clause: str) -> None:
    check_clause(MANIFEST.result(real_corpus / rel), clause)


def test_every_clause_is_interpreted() -> None:
    MANIFEST.assert_interpreted(KNOWN, min_rows=8)


def test_every_row_converts_or_quarantines_as_expected(real_corpus: Path) -> None:
    for row in MANIFEST.rows():
        result = MANIFEST.result(real_corpus / row["path"])
        if "quarantine:" in row["expected"]:
            assert isinstance(result, UnsupportedDocument)
            continue
        doc = document(result)
        assert (doc.format, doc.converter) == ("txt", "ki.text")
        doc.text.encode("utf-8")
        assert "\r" not in doc.text and "\ufeff" not in doc.text and "\ufffd" not in doc.text


def test_exact_decodings(real_corpus: Path) -> None:
    russian = document(MANIFEST.result(real_corpus / "txt/tika_russian.cp866.txt"))
    assert russian.text.startswith("Однажды, в студеную зимнюю пору,")
    latin = document(MANIFEST.result(real_corpus / "txt/tika_multi-language.txt"))
    assert "doação" in latin.text and "\x80" not in latin.text
    utf16be = document(MANIFEST.result(real_corpus / "txt/unstructured_fake-text-utf-16-be.txt"))
    assert utf16be.text.startswith("This is a test document to use for unit tests.")
    assert "\x00" not in utf16be.text


@pytest.mark.parametrize(
    "data", [b"", b"   \r\n\t  ", codecs.BOM_UTF8, codecs.BOM_UTF16_LE + " \n".encode("utf-16-le")]
)
def test_empty_and_whitespace_only_are_empty(data: bytes) -> None:
    with pytest.raises(UnsupportedDocument) as info:
        convert_text(data, "blank.txt")
    assert info.value.reason == "empty"


@pytest.mark.parametrize(
    "data",
    [
        bytes(range(256)) * 40,
        bytes((i * 7919 + 13) % 256 for i in range(8192)),  # deterministic pseudo-random bytes
        b"\x00\x01\x02\x03PK\x03\x04" * 500,
    ],
    ids=["all-bytes", "pseudo-random", "zip-like"],
)
def test_binary_garbage_is_unsupported_format(data: bytes) -> None:
    with pytest.raises(UnsupportedDocument) as info:
        convert_text(data, "garbage.txt")
    assert info.value.reason == "unsupported_format"


@pytest.mark.parametrize(
    ("text", "codec", "expected"),
    [
        ("Grüße aus Köln\n", "utf-8-sig", "utf-8"),
        ("Grüße aus Köln\n", "utf-16", "utf-16-le"),
        ("Grüße aus Köln, schöne Straße\n", "utf-16-le", "utf-16-le"),
        ("Grüße aus Köln, schöne Straße\n", "utf-32-be", "utf-32-be"),
        ("Příliš žluťoučký kůň úpěl ďábelské ódy a řekl sousedovi dobrý den\n", "cp1250", "cp1250"),
        ("Однажды в студёную зимнюю пору я из лесу вышел, был сильный мороз.\n", "cp1251", "cp1251"),
        ("Однажды в студёную зимнюю пору я из лесу вышел, был сильный мороз.\n", "koi8-r", "koi8-r"),
        ("Grüße aus München „Zitat“ – Gedankenstrich\n", "cp1252", "cp1252"),
    ],
)
def test_decode_text_round_trips(text: str, codec: str, expected: str) -> None:
    decoded, encoding = decode_text(text.encode(codec))
    assert decoded == text
    assert _codec(encoding) == _codec(expected)


def test_text_newlines_are_normalised() -> None:
    doc = convert_text(b"one\r\ntwo\rthree\n", "crlf.txt")
    assert doc.text == "one\ntwo\nthree\n"
    assert doc.encoding == "utf-8" and doc.metadata == {"bom": None, "bytes": 15}


def test_sniff_wide_needs_nul_pattern() -> None:
    assert sniff_wide("plain ascii text".encode("utf-16-be")) == "utf-16-be"
    assert sniff_wide("plain ascii text".encode("utf-16-le")) == "utf-16-le"
    assert sniff_wide(b"plain ascii text") is None
    assert sniff_wide(b"a\x00") is None  # too short to judge


def test_fix_surrogates_prefers_utf8_then_cp1252() -> None:
    assert fix_surrogates("Jos\udcc3\udca9") == "José"
    assert fix_surrogates("L\udcfctkebohle") == "Lütkebohle"
    assert fix_surrogates("plain") == "plain"
    assert fix_surrogates("\udcd0\udcae\udcd0\udcbd\udcf1") == "Юн\ufffd"  # cut UTF-8 stays UTF-8
