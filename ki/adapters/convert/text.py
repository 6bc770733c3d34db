"""Plain-text converter and the shared byte-to-text decoder.

Spec: conversion.md 7.3 ("Text"). Decoding order, first match wins:

1. a byte-order mark (UTF-8, UTF-32 LE/BE, UTF-16 LE/BE);
2. UTF-32 / UTF-16 without a BOM, recognised by the position of NUL bytes;
3. strict UTF-8;
4. charset-normalizer, trusted only where the corpus shows it right: a non-Latin script
   (e.g. ``cp1125`` for Russian DOS text, reported as ``cp866``) or a Central European
   Latin language for ``cp1250``/``iso-8859-2``; its ``cp1250`` guesses for English and
   Spanish text are ignored (Tika ``testTXT_win-1252.txt``, ``multi-language.txt``);
5. ``cp1252`` when bytes 0x80-0x9F occur (smart quotes), else ``latin-1`` (identical
   for the other bytes; the more honest name).

:func:`decode_text` is reused by the mail and HTML converters.
"""

from __future__ import annotations

import codecs
import re
import unicodedata

from ki.adapters.convert.model import StructuredDocument
from ki.core.errors import UnsupportedDocument

CONVERTER = "ki.text"
CONVERTER_VERSION = "1"

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: FF FE 00 00 starts with FF FE
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# How much of the input the heuristics look at (they stay O(sample), not O(file)).
_SAMPLE = 64 * 1024
# Share of control characters (other than tab/newline/CR/FF/VT/ESC/SUB) that marks binary data.
_BINARY_CONTROL_RATIO = 0.05
_ALLOWED_CONTROLS = frozenset("\t\n\r\f\v\x1b\x1a")

# charset-normalizer names -> the codec name ki records.
_CN_ALIASES = {"ibm866": "cp866", "windows_1251": "cp1251", "koi8_r": "koi8-r"}
_CENTRAL_EUROPEAN = {"Czech", "Polish", "Slovak", "Slovene", "Hungarian", "Croatian", "Romanian", "Serbian"}


def sniff_bom(data: bytes) -> tuple[str, int] | None:
    """Return ``(codec, bom_length)`` when ``data`` starts with a Unicode byte-order mark, else None."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return codec, len(bom)
    return None


def sniff_wide(data: bytes) -> str | None:
    """Recognise BOM-less UTF-32/UTF-16 by where the NUL bytes sit; return the codec name or None.

    Mostly-ASCII text in UTF-16BE has a NUL at every even offset, UTF-16LE at every odd
    offset; UTF-32 has three NULs out of four. Only the first 64 KiB are inspected.
    """
    sample = data[:_SAMPLE]
    n = len(sample)
    if n < 4 or b"\x00" not in sample:
        return None
    if n % 4 == 0:
        quads = n // 4
        le = sum(1 for i in range(0, n, 4) if sample[i + 1 : i + 4] == b"\x00\x00\x00")
        be = sum(1 for i in range(0, n, 4) if sample[i : i + 3] == b"\x00\x00\x00")
        for count, codec in ((le, "utf-32-le"), (be, "utf-32-be")):
            if count >= 0.6 * quads and _decodes(data, codec):
                return codec
    pairs = n // 2
    even = sum(1 for i in range(0, 2 * pairs, 2) if sample[i] == 0)
    odd = sum(1 for i in range(1, 2 * pairs, 2) if sample[i] == 0)
    if even >= 0.3 * pairs and odd <= 0.05 * pairs and _decodes(data[: len(data) // 2 * 2], "utf-16-be"):
        return "utf-16-be"
    if odd >= 0.3 * pairs and even <= 0.05 * pairs and _decodes(data[: len(data) // 2 * 2], "utf-16-le"):
        return "utf-16-le"
    return None


def _decodes(data: bytes, codec: str) -> bool:
    try:
        data.decode(codec)
    except UnicodeDecodeError:
        return False
    return True


def _latin_share(text: str) -> float:
    """Share of alphabetic characters that are Latin script (1.0 when there are none)."""
    letters = [c for c in text[:_SAMPLE] if c.isalpha()]
    if not letters:
        return 1.0
    latin = sum(1 for c in letters if c.isascii() or unicodedata.name(c, "").startswith("LATIN"))
    return latin / len(letters)


def _charset_normalizer_guess(data: bytes) -> str | None:
    """charset-normalizer's answer, kept only where the corpus shows it to be trustworthy."""
    try:
        from charset_normalizer import from_bytes
    except ImportError:  # pragma: no cover - declared dependency
        return None
    best = from_bytes(data[:_SAMPLE]).best()
    if best is None:
        return None
    codec = best.encoding.lower()
    if codec.startswith(("utf_8", "utf_16", "utf_32", "ascii")):
        return None  # the Unicode cases were handled exactly before
    try:
        text = data.decode(codec)
    except (LookupError, ValueError):
        return None
    if codec == "cp1125" and not any(0xF2 <= b <= 0xF9 for b in data):
        codec = "cp866"  # cp1125 and cp866 differ only in 0xF2-0xF9
    codec = _CN_ALIASES.get(codec, codec)
    if _latin_share(text) < 0.5:
        return codec  # Cyrillic, Greek, Hebrew, Arabic ... : cp1252 would be mojibake
    if codec in ("cp1250", "iso8859_2") and best.language in _CENTRAL_EUROPEAN:
        return codec
    return None


def decode_text(data: bytes) -> tuple[str, str]:
    """Decode ``data`` to text, returning ``(text, encoding)``.

    ``encoding`` is a Python codec name: ``utf-8``, ``utf-16-le``, ``utf-16-be``,
    ``utf-32-le``, ``utf-32-be``, ``cp866``, ``cp1250``, ``cp1252``, ``latin-1``, ...
    A byte-order mark is removed from the text. Never raises: ``latin-1`` decodes
    anything (callers judge emptiness and binary content).
    """
    bom = sniff_bom(data)
    if bom is not None:
        codec, skip = bom
        return data[skip:].decode(codec, "replace"), codec
    wide = sniff_wide(data)
    if wide is not None:
        return data[: len(data) // 2 * 2].decode(wide, "replace"), wide
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    guess = _charset_normalizer_guess(data)
    if guess is not None:
        return data.decode(guess), guess
    if _C1_BYTES.search(data):  # smart quotes (a byte regex: C speed on large files)
        try:
            return data.decode("cp1252"), "cp1252"
        except UnicodeDecodeError:  # 0x81, 0x8D, 0x8F, 0x90, 0x9D are undefined in cp1252
            pass
    return data.decode("latin-1"), "latin-1"


def fix_surrogates(value: str) -> str:
    """Turn surrogate-escaped raw header bytes back into text.

    Raw 8-bit header bytes (``BytesParser`` keeps them as U+DC80-U+DCFF) are UTF-8 per
    RFC 6532 (case R04); when UTF-8 explains fewer
    non-ASCII characters than it rejects (a Latin-1 ``ü`` in a 1997 From line) the bytes
    are read as cp1252 (Latin-1 for its five undefined bytes) instead.
    """
    if not any("\udc80" <= c <= "\udcff" for c in value):
        return value
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # other lone surrogates: nothing to recover
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    lenient = raw.decode("utf-8", "replace")
    bad = lenient.count("\ufffd") - value.count("\ufffd")
    good = sum(1 for c in lenient if ord(c) > 0x7F and c != "\ufffd")
    if good >= bad:
        return lenient
    try:
        return raw.decode("cp1252")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def looks_binary(text: str) -> bool:
    """True when more than 5 % of the first 64 Ki characters are control characters (NUL included)."""
    sample = text[:_SAMPLE]
    if not sample:
        return False
    controls = sum(
        1 for c in sample if (c < " " and c not in _ALLOWED_CONTROLS) or c == "\x7f" or "\x80" <= c <= "\x9f"
    )
    return controls / len(sample) > _BINARY_CONTROL_RATIO


def _binary_bytes(data: bytes) -> bool:
    """:func:`looks_binary` on raw 8-bit bytes: C0 controls only (C1 bytes are letters here)."""
    sample = data[:_SAMPLE]
    controls = sum(sample.count(bytes([b])) for b in _BINARY_BYTES)
    return bool(sample) and controls / len(sample) > _BINARY_CONTROL_RATIO


_BINARY_BYTES = [b for b in range(32) if chr(b) not in _ALLOWED_CONTROLS] + [0x7F]
_NEWLINES = re.compile(r"\r\n?")
_C1_BYTES = re.compile(rb"[\x80-\x9f]")


def normalise_newlines(text: str) -> str:
    """CRLF and lone CR become LF."""
    return _NEWLINES.sub("\n", text)


def convert_text(data: bytes, filename: str) -> StructuredDocument:
    """Convert a plain-text file to a :class:`StructuredDocument` (format ``txt``, converter ``ki.text``).

    Args:
        data: the file's bytes.
        filename: used only in messages.

    Returns:
        the document with ``text`` (newlines normalised to LF), ``encoding`` (see
        :func:`decode_text`) and ``metadata`` ``{"bom": codec or None, "bytes": n}``.

    Raises:
        UnsupportedDocument: ``reason="empty"`` for a 0-byte or whitespace-only file;
            ``reason="unsupported_format"`` when the content is binary (many control bytes).
    """
    if not data.strip():
        raise UnsupportedDocument(f"{filename}: empty file ({len(data)} bytes)", reason="empty")
    text, encoding = decode_text(data)
    wide = encoding.startswith(("utf-16", "utf-32"))
    if looks_binary(text) or (not wide and _binary_bytes(data)):
        raise UnsupportedDocument(
            f"{filename}: binary content, not text",
            reason="unsupported_format",
            details={"encoding_tried": encoding},
        )
    text = normalise_newlines(text).replace("\x00", "")
    if not text.strip():
        raise UnsupportedDocument(f"{filename}: whitespace only", reason="empty", details={"encoding": encoding})
    bom = sniff_bom(data)
    return StructuredDocument(
        text=text,
        format="txt",
        converter=CONVERTER,
        converter_version=CONVERTER_VERSION,
        encoding=encoding,
        metadata={"bom": bom[0] if bom else None, "bytes": len(data)},
    )
