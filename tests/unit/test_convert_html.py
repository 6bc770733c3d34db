"""ki.adapters.convert.html against every ``html/`` row of the real corpus MANIFEST, plus built edge cases.

Each MANIFEST clause becomes one test. Clauses that describe the file rather than
ki's output are not turned into tests (see ``FILE_FACTS``); clauses ki cannot meet
would be listed in ``EXPECTED_UNMET`` (strict xfail). An unknown clause fails
``test_every_clause_is_interpreted``.
"""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from ki.adapters.convert.html import convert_html, decode_html
from ki.adapters.convert.model import StructuredDocument
from ki.core.errors import UnsupportedDocument
from tests.helpers.manifest import Manifest, document, quoted

FOLDER = "html"

# Clauses about the file itself, not about ki's output:
#   meta charset: X   what the <meta> tag declares (ki's choice is checked by "encoding:")
#   bom: X            the byte-order mark present in the file
#   raw contains "x"  bytes present in the file (e.g. the data: URI that must not become text)
FILE_FACTS = ("meta charset:", "bom:", "raw contains", "magic:", "password ", "eof markers")

EXPECTED_UNMET: dict[tuple[str, str], str] = {}
MANIFEST = Manifest(FOLDER, convert_html, file_facts=FILE_FACTS, expected_unmet=EXPECTED_UNMET)


def _codec(name: str) -> str:
    return codecs.lookup(name).name


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
    elif clause.startswith("encoding:"):
        assert _codec(document(result).encoding) == _codec(clause.split(":", 1)[1].strip())
    elif clause == "not utf-8":
        assert _codec(document(result).encoding) != "utf-8"
    else:
        pytest.fail(f"uninterpreted clause {clause!r}")


@pytest.mark.parametrize(("rel", "clause"), MANIFEST.cases())
def test_manifest_clause(real_corpus: Path, rel: str, clause: str) -> None:
    check_clause(MANIFEST.result(real_corpus / rel), clause)


def test_every_clause_is_interpreted(real_corpus: Path) -> None:
    known = ("quarantine:", "text empty", "text contains", "text lacks", "encoding:", "not utf-8")
    MANIFEST.assert_interpreted(known, min_rows=1)


def test_every_row_converts(real_corpus: Path) -> None:
    for row in MANIFEST.rows():
        doc = document(MANIFEST.result(real_corpus / row["path"]))
        assert doc.format == "html" and doc.converter == "ki.html" and doc.encoding
        doc.text.encode("utf-8")
        assert "data:image" not in doc.text


def test_titles_and_sources(real_corpus: Path) -> None:
    arabic = document(MANIFEST.result(real_corpus / "html/tika_testArabicMisleadingCharset.html"))
    assert arabic.title == "Test Arabic"
    assert arabic.metadata["encoding_source"] == "detected" and arabic.warnings
    noisy = document(MANIFEST.result(real_corpus / "html/tika_testHTMLNoisyMetaEncoding_3.html"))
    assert noisy.metadata == {"encoding_source": "meta", "declared_charset": "iso-8859-6"}
    utf16 = document(MANIFEST.result(real_corpus / "html/tika_testHTML_charset_utf16le.html"))
    assert utf16.title == "Title" and utf16.metadata["encoding_source"] == "bom"
    assert "Title" not in utf16.text  # head content is not body text


def test_rfc822_looking_fragment_is_html(real_corpus: Path) -> None:
    doc = document(MANIFEST.result(real_corpus / "html/tika_testBrokenHTMLContainingRFC822.html"))
    assert "<br>" not in doc.text and "Subject: An exciting subject" in doc.text


def test_zero_bytes_is_empty() -> None:
    with pytest.raises(UnsupportedDocument) as info:
        convert_html(b"", "zero.html")
    assert info.value.reason == "empty"


@pytest.mark.parametrize(
    "data",
    [b"   \n ", b"<html><head><title>T</title><script>var x = 1;</script></head><body> </body></html>"],
    ids=["whitespace", "title-and-script-only"],
)
def test_no_visible_text_is_empty_text(data: bytes) -> None:
    with pytest.raises(UnsupportedDocument) as info:
        convert_html(data, "blank.html")
    assert info.value.reason == "empty_text"


def test_script_style_hidden_and_comments_are_dropped_noscript_kept() -> None:
    html = (
        b"<html><head><style>p{color:red}</style><script>alert('x')</script></head><body>"
        b"<p>Kept<!-- a comment --> text</p><div hidden>secret one</div>"
        b"<span style='display: none'>secret two</span><noscript>enable js</noscript>"
        b"<p>Tail</p></body></html>"
    )
    doc = convert_html(html, "a.html")
    assert doc.text == "Kept text\n\nenable js\n\nTail"  # ki runs no scripts: noscript content shows


def test_block_inline_table_and_pre_layout() -> None:
    html = (
        b"<body><h1>Head</h1><p>one <b>bold</b>\n   two<br>three</p>"
        b"<table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td>d</td></tr></table>"
        b"<pre>  x\n    y</pre><ul><li>i1</li><li>i2</li></ul></body>"
    )
    assert (
        convert_html(html, "a.html").text
        == "Head\n\none bold two\nthree\n\na\tb\nc\td\n\n  x\n    y\n\ni1\ni2"
    )


def test_data_uri_in_broken_markup_never_becomes_text() -> None:
    payload = (
        b"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    )
    html = b"<p>before data:image/png;base64," + payload + b" after</p>"
    doc = convert_html(html, "a.html")
    assert "base64" not in doc.text and "iVBOR" not in doc.text
    assert doc.text.startswith("before") and doc.text.endswith("after")


def test_deeply_nested_markup_does_not_recurse() -> None:
    html = b"<div>" * 3000 + b"deep" + b"</div>" * 3000
    assert convert_html(html, "deep.html").text == "deep"


def test_xml_declaration_charset_is_honoured() -> None:
    body = '<?xml version="1.0" encoding="windows-1251"?><html><body><p>Привет</p></body></html>'
    doc = convert_html(body.encode("cp1251"), "x.xhtml")
    assert doc.text == "Привет" and doc.encoding == "cp1251"


def test_latin1_declared_utf8_bytes_are_read_as_utf8() -> None:
    html = '<meta charset="iso-8859-1"><p>München – Straße</p>'.encode()
    doc = convert_html(html, "a.html")
    assert doc.text == "München – Straße" and doc.encoding == "utf-8"
    assert doc.warnings


def test_latin1_label_means_windows_1252() -> None:
    html = '<meta charset="ISO-8859-1"><p>“quoted” café</p>'.encode("cp1252")
    doc = convert_html(html, "a.html")
    assert doc.text == "“quoted” café" and doc.encoding == "cp1252"


def test_unknown_declared_charset_falls_back() -> None:
    text, codec, source, declared, warnings = decode_html(b'<meta charset="x-klingon"><p>plain</p>')
    assert (codec, source, declared) == ("utf-8", "utf-8", "x-klingon") and warnings


@pytest.mark.parametrize(
    ("bom", "codec"),
    [(codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_BE, "utf-16-be"), (codecs.BOM_UTF16_LE, "utf-16-le")],
)
def test_bom_wins_over_meta(bom: bytes, codec: str) -> None:
    html = bom + '<meta charset="cp1252"><p>Grüße</p>'.encode(codec)
    doc = convert_html(html, "a.html")
    assert doc.text == "Grüße" and doc.encoding == codec


def test_utf8_with_one_stray_byte_stays_utf8() -> None:
    html = '<meta charset="utf-8"><p>München, Düsseldorf, Köln</p><p>price 10'.encode() + b"\x80" + b"</p>"
    doc = convert_html(html, "a.html")
    assert doc.encoding == "utf-8" and "München, Düsseldorf, Köln" in doc.text
    assert "10\ufffd" in doc.text and doc.warnings


def test_iframe_srcdoc_is_text_and_template_is_not() -> None:
    """Issue 20 item 6: an iframe's srcdoc document is page text (nested ones too, bounded); a template's
    content is inert and never rendered; noscript content shows (ki runs no scripts)."""
    html = (b'<html><body><p>Before</p><iframe srcdoc="&lt;p&gt;Framed &lt;b&gt;clause&lt;/b&gt;&lt;/p&gt;'
            b'&lt;iframe srcdoc=&quot;nested frame&quot;&gt;&lt;/iframe&gt;">fallback</iframe><p>After</p>'
            b'<iframe src="x.html">no srcdoc</iframe><template><p>Template row</p></template>'
            b'<noscript>Scripting is off</noscript></body></html>')
    doc = convert_html(html, "frames.html")
    assert doc.text == "Before\n\nFramed clause\n\nnested frame\n\nAfter\n\nScripting is off"
    deep = "x"
    for level in range(6):
        deep = f"<p>level{level}</p><iframe srcdoc='{html_escape(deep)}'></iframe>"
    assert convert_html(deep.encode(), "deep.html").text.split("\n\n") == ["level5", "level4", "level3", "level2"]


def html_escape(value: str) -> str:
    import html

    return html.escape(value, quote=True)
