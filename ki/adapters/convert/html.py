"""HTML to visible text with lxml (built-in converter, conversion.md section 7.3).

Encoding is decided before parsing, in this order: byte-order mark; a ``<meta>``
(or XML declaration) charset that decodes the bytes strictly; strict UTF-8; UTF-8
with a few bad bytes (more valid multi-byte characters than invalid sequences,
which are replaced); a confident charset-normalizer guess; windows-1252 (the WHATWG
default); latin-1.
Labels are read through the WHATWG table (:mod:`ki.adapters.convert.charsets`: ``iso-8859-1``/``us-ascii``
mean windows-1252, ``visual`` is ISO-8859-8 …); ``unicode``/``utf-16`` in a meta tag mean UTF-8.
The meta prescan is a byte regex, so malformed tags such as ``<meta content=text/html; charset = iso-8859-6
http-equiv=Content-Type>`` (TIKA-1001) still count.
"""

from __future__ import annotations

import codecs
import html as html_lib
import re

import charset_normalizer
import lxml.html
from lxml import etree

from ki.adapters.convert.charsets import codec_for_label, utf8_disguised
from ki.adapters.convert.model import StructuredDocument
from ki.core.errors import UnsupportedDocument

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_PRESCAN_BYTES = 16384
_META = re.compile(rb"<meta\b[^>]*>", re.IGNORECASE)
_META_CHARSET = re.compile(rb"""charset\s*=\s*["']?\s*([A-Za-z0-9_.:()-]+)""", re.IGNORECASE)
_XML_DECL = re.compile(rb"""^\s*<\?xml[^>]*\bencoding\s*=\s*["']([A-Za-z0-9_.:-]+)""", re.IGNORECASE)

# HTML's own rule (HTML Standard, "determining the character encoding"): a UTF-16 label in a
# <meta> of bytes that were decoded to find it means UTF-8. Every other label: the WHATWG table.
_META_UTF16 = frozenset("unicode utf-16 utf-16le utf-16be ucs-2 ucs2 unicodefffe unicodefeff".split())

# Detector guesses are trusted over windows-1252 only when they read as language text.
_MAX_CHAOS = 0.1
_MIN_COHERENCE = 0.4

# Not rendered: <template> content is inert (HTML Standard 4.12.3: never rendered, a fragment for
# scripts); <noscript> is NOT skipped: ki runs no scripts, and a user agent with scripting disabled
# (a mail client, a text browser) renders noscript's children. An <iframe> is replaced by the text of
# its ``srcdoc`` document (4.8.5), parsed on its own, :data:`MAX_SRCDOC_DEPTH` deep.
_SKIP = frozenset(
    "head script style template iframe object embed svg canvas audio video map meta link base img"
    " input select".split()
)
MAX_SRCDOC_DEPTH = 3
_PARAGRAPH = frozenset(
    "p h1 h2 h3 h4 h5 h6 table ul ol dl blockquote pre figure address hr form fieldset".split()
)
_LINE = frozenset(
    "div li tr dt dd caption figcaption section article header footer nav aside main details summary thead"
    " tbody tfoot body center legend".split()
)
_CELL = frozenset({"td", "th"})
_WS = re.compile(r"[ \t\n\r\f\v]+")
# A data: URI payload; wrapped continuation lines are long runs of base64 (>= 40 characters).
_DATA_URI = re.compile(
    r"data:[\w.+-]+/[\w.+-]+(?:;[\w.+=-]+)*;base64,[A-Za-z0-9+/=]*(?:\s+[A-Za-z0-9+/=]{40,})*", re.IGNORECASE
)
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)


def convert_html(data: bytes, filename: str) -> StructuredDocument:
    """Convert an HTML document or fragment to its visible text.

    Args:
        data: the raw bytes (any encoding; see the module docstring for the order of evidence).
        filename: used only in error messages.

    Returns:
        ``StructuredDocument(format="html", converter="ki.html")``: ``text`` is the visible text
        (script, style, template, head, hidden elements and embedded objects dropped; noscript
        content kept; an iframe's ``srcdoc`` document read in its place; ``data:`` URIs never
        become text), blocks separated by newlines, paragraphs by a blank line, table cells by a
        tab. ``title`` is the ``<title>``; ``encoding`` the Python codec name used to decode
        (e.g. ``utf-8``, ``cp1256``, ``iso8859-6``). ``metadata`` has ``encoding_source``
        (``bom``, ``meta``, ``utf-8``, ``detected``, ``default``) and ``declared_charset``;
        ``warnings`` notes a declared charset that was not used.

    Raises:
        UnsupportedDocument: reason ``empty`` (0 bytes) or ``empty_text`` (no visible text).
    """
    if not data:
        raise UnsupportedDocument(f"{filename}: 0 bytes", reason="empty")
    text, encoding, source, declared, warnings = decode_html(data)
    root, truncated = _parse(text)
    if root is None:
        raise UnsupportedDocument(f"{filename}: no HTML content", reason="empty_text")
    title_el = root.find(".//title")
    title = _WS.sub(" ", title_el.text_content()).strip() if title_el is not None else ""
    if truncated:
        # libxml2 stops at its nesting limit and drops the rest: strip tags instead.
        warnings.append("markup nested beyond the parser limit: text extracted without structure")
        body = _flat_text(text)
    else:
        body = _visible_text(root)
    if not body.strip():
        raise UnsupportedDocument(
            f"{filename}: no visible text", reason="empty_text", details={"encoding": encoding}
        )
    metadata = {"encoding_source": source}
    if declared:
        metadata["declared_charset"] = declared
    return StructuredDocument(
        text=body,
        format="html",
        converter="ki.html",
        title=title or None,
        encoding=encoding,
        warnings=warnings,
        metadata=metadata,
    )


def decode_html(data: bytes) -> tuple[str, str, str, str | None, list[str]]:
    """Decode HTML bytes.

    Returns:
        ``(text, codec_name, source, declared_label, warnings)``; ``source`` is one of ``bom``,
        ``meta``, ``utf-8``, ``detected``, ``default``. Never raises: latin-1 is the last resort.
    """
    for bom, name in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(name, "replace"), name, "bom", None, []
    warnings: list[str] = []
    declared = _declared_charset(data)
    if declared:
        codec = _codec(declared)
        if codec is None:
            warnings.append(f"unknown declared charset {declared!r}")
        else:
            text = _strict(data, codec)
            if text is not None and not utf8_disguised(data, codec):
                return text, codec, "meta", declared, warnings
            warnings.append(f"declared charset {declared!r} does not fit the bytes")
    text = _strict(data, "utf-8")
    if text is not None:
        return text, "utf-8", "utf-8", declared, warnings
    text, invalid = _mostly_utf8(data)
    if text is not None:
        warnings.append(f"{invalid} invalid UTF-8 sequence(s) replaced with U+FFFD")
        return text, "utf-8", "utf-8", declared, warnings
    guess = _detect(data)
    if guess is not None:
        return guess[0], guess[1], "detected", declared, warnings
    for codec in ("cp1252", "latin-1"):
        text = _strict(data, codec)
        if text is not None:
            return text, codec, "default", declared, warnings
    raise AssertionError("latin-1 decodes every byte string")  # pragma: no cover


def _declared_charset(data: bytes) -> str | None:
    head = data[:_PRESCAN_BYTES]
    match = _XML_DECL.match(head)
    if match:
        return match.group(1).decode("ascii").lower()
    for meta in _META.finditer(head):
        found = _META_CHARSET.search(meta.group(0))
        if found:
            return found.group(1).decode("ascii").lower().strip("'\"")
    return None


def _codec(label: str) -> str | None:
    label = label.strip().lower()
    return "utf-8" if label in _META_UTF16 else codec_for_label(label)


def _strict(data: bytes, codec: str) -> str | None:
    try:
        return data.decode(codec)
    except (UnicodeDecodeError, LookupError):
        return None


def _mostly_utf8(data: bytes) -> tuple[str | None, int]:
    """UTF-8 with a few bad bytes (more valid multi-byte characters than invalid sequences)."""
    text = data.decode("utf-8", "replace")
    invalid = text.count("\ufffd") - data.count(b"\xef\xbf\xbd")
    multibyte = sum(1 for ch in text if ch > "\x7f") - invalid - data.count(b"\xef\xbf\xbd")
    return (text, invalid) if multibyte > invalid else (None, invalid)


def _detect(data: bytes) -> tuple[str, str] | None:
    best = charset_normalizer.from_bytes(data).best()
    if best is None or best.chaos > _MAX_CHAOS or best.coherence < _MIN_COHERENCE:
        return None
    codec = _codec(best.encoding)
    if codec is None:
        return None
    text = _strict(data, codec)
    return (text, codec) if text is not None else None


def _parse(text: str) -> tuple[etree._Element | None, bool]:
    """Return ``(root, truncated)``; ``truncated`` when libxml2 hit a resource limit."""
    # Parse UTF-8 bytes with an explicit encoding: lxml refuses str input carrying an XML
    # encoding declaration, and the explicit encoding overrides any (wrong) meta charset.
    parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True, huge_tree=True)
    try:
        root = lxml.html.document_fromstring(text.encode("utf-8", "surrogatepass"), parser=parser)
    except (etree.ParserError, ValueError):
        return None, False
    truncated = any(e.type_name == "ERR_RESOURCE_LIMIT" for e in parser.error_log)
    return root, truncated


_FLAT_DROP = re.compile(
    r"<!--.*?-->|<(script|style|head|template|svg)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL
)
_FLAT_BLOCK = re.compile(
    r"<(?:br|/?(?:p|div|li|tr|h[1-6]|table|ul|ol|blockquote|pre))\b[^>]*>", re.IGNORECASE
)
_FLAT_TAG = re.compile(r"<[^>]*>")


def _flat_text(text: str) -> str:
    """Tag-stripping fallback for documents the tree parser cannot hold."""
    text = _FLAT_DROP.sub(" ", text)
    text = _FLAT_BLOCK.sub("\n", text)
    text = html_lib.unescape(_FLAT_TAG.sub("", text))
    lines = (_WS.sub(" ", line).strip() for line in text.split("\n"))
    return _DATA_URI.sub("", "\n".join(line for line in lines if line))


class _Writer:
    """Accumulates flow text with browser-like whitespace collapsing."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.breaks = 0  # pending newlines (1 line, 2 paragraph)
        self.sep = ""  # pending inline separator (" " or "\t")
        self.trailing_newlines = 0

    def block(self, newlines: int) -> None:
        if self.parts:
            self.breaks = max(self.breaks, newlines)
            self.sep = ""

    def cell_end(self) -> None:
        if self.parts and not self.breaks:
            self.sep = "\t"

    def line_break(self) -> None:
        self.breaks = 0
        self.sep = ""
        self.parts.append("\n")
        self.trailing_newlines += 1

    def text(self, value: str, pre: bool) -> None:
        if not value:
            return
        if not pre:
            value = _WS.sub(" ", value)
            if value.startswith(" "):
                self.sep = self.sep or " "
                value = value[1:]
            if not value:
                return
        self._flush()
        if pre:
            self.parts.append(value)
            stripped = value.rstrip("\n")
            self.trailing_newlines = (
                len(value) - len(stripped) if stripped else self.trailing_newlines + len(value)
            )
            return
        if value.endswith(" "):
            value = value[:-1]
            self.sep = " "
        self.parts.append(value)
        self.trailing_newlines = 0

    def _flush(self) -> None:
        if self.breaks and self.parts:
            missing = self.breaks - self.trailing_newlines
            if missing > 0:
                self.parts.append("\n" * missing)
        elif self.sep and self.parts and not self.trailing_newlines:
            self.parts.append(self.sep)
        self.breaks = 0
        self.sep = ""

    def block_text(self, text: str) -> None:
        """A finished block of text (an iframe's srcdoc document) as its own paragraph."""
        if not text.strip():
            return
        self.block(2)
        self._flush()
        self.parts.append(text)
        self.trailing_newlines = 0
        self.block(2)

    def result(self) -> str:
        text = "".join(self.parts)
        text = _DATA_URI.sub("", text)
        text = re.sub(r"[ \t]+\n", "\n", text)
        return re.sub(r"\n{3,}", "\n\n", text).strip()


def _hidden(el: etree._Element) -> bool:
    if el.get("hidden") is not None:
        return True
    style = el.get("style")
    return bool(style and _HIDDEN_STYLE.search(style))


def _visible_text(root: etree._Element, depth: int = 0) -> str:
    """Walk the tree iteratively (deeply nested markup must not hit the recursion limit)."""
    out = _Writer()
    pre_depth = 0
    stack: list[tuple[etree._Element, bool]] = [(root, False)]
    while stack:
        el, closing = stack.pop()
        tag = el.tag.lower() if isinstance(el.tag, str) else ""
        if closing:
            if tag == "pre":
                pre_depth -= 1
            if tag in _PARAGRAPH:
                out.block(2)
            elif tag in _LINE:
                out.block(1)
            elif tag in _CELL:
                out.cell_end()
            out.text(el.tail or "", pre_depth > 0)
            continue
        if tag == "iframe" and el.get("srcdoc") and depth < MAX_SRCDOC_DEPTH and not _hidden(el):
            inner, _ = _parse(el.get("srcdoc") or "")
            if inner is not None:
                out.block_text(_visible_text(inner, depth + 1))
        if not tag or tag in _SKIP or _hidden(el):
            out.text(el.tail or "", pre_depth > 0)
            continue
        if tag == "br":
            out.line_break()
            out.text(el.tail or "", pre_depth > 0)
            continue
        if tag in _PARAGRAPH:
            out.block(2)
        elif tag in _LINE:
            out.block(1)
        if tag == "pre":
            pre_depth += 1
        out.text(el.text or "", pre_depth > 0)
        stack.append((el, True))
        stack.extend((child, False) for child in reversed(el))
    return out.result()
