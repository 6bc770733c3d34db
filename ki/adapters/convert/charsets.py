"""Charset labels and scripts: the WHATWG Encoding Standard's label table, and which script a text is in.

A mail or page declares its charset by *label*; Python's codec registry knows
many labels but not the ones mail clients and browsers accept (``iso-8859-8-i``, ``logical`` and
``visual`` Hebrew, ``x-cp1251``, ``x-sjis``, ``x-mac-cyrillic``, ``windows-874``, ``dos-874`` …).
The Encoding Standard's table (https://encoding.spec.whatwg.org/#names-and-labels, vendored as
``data/whatwg_encodings.json``, © WHATWG, CC BY 4.0: ``data/WHATWG-LICENSE.txt``) maps every
label user agents accept to an encoding, and several encodings to the superset user agents really
decode with (``iso-8859-1`` → windows-1252, ``gb2312`` → GBK/gb18030, ``shift_jis`` →
windows-31j, ``euc-kr`` → windows-949). :func:`codec_for_label` applies it before Python's own
registry, so a label is understood before any detection runs.

:func:`dominant_script` lets a caller notice that a detector's guess changed the *script* of a
text (Latin → Cyrillic, Hebrew → Cyrillic), which a declared label forbids trusting silently.
"""

from __future__ import annotations

import codecs
import functools
import json
import re
import unicodedata
from collections import Counter
from importlib import resources

#: WHATWG encoding name → Python codec (the decoders the standard specifies for that name).
_PYTHON_CODECS = {
    "UTF-8": "utf-8", "IBM866": "cp866", "ISO-8859-8-I": "iso8859_8", "KOI8-R": "koi8_r", "KOI8-U": "koi8_u",
    "macintosh": "mac_roman", "windows-874": "cp874", "x-mac-cyrillic": "mac_cyrillic", "GBK": "gb18030",
    "gb18030": "gb18030", "Big5": "big5hkscs", "EUC-JP": "euc_jp", "ISO-2022-JP": "iso2022_jp",
    "Shift_JIS": "cp932", "EUC-KR": "cp949", "UTF-16BE": "utf-16-be", "UTF-16LE": "utf-16-le",
    **{f"ISO-8859-{n}": f"iso8859_{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)},
    **{f"windows-{n}": f"cp{n}" for n in range(1250, 1259)},
}  # fmt: skip
#: Labels whose WHATWG meaning is no decoder ("replacement", "x-user-defined"); Python's codec is used.
_NO_DECODER = frozenset({"replacement", "x-user-defined"})
_TRIM = re.compile(r"^[\s\"']+|[\s\"';,.]+$")


@functools.cache
def whatwg_labels() -> dict[str, str]:
    """Every label of the Encoding Standard (lowercase) → its encoding name (e.g. ``"visual"`` → ``"ISO-8859-8"``)."""
    table = json.loads(resources.files("ki.adapters.convert").joinpath("data/whatwg_encodings.json").read_text("utf-8"))
    return {label: enc["name"] for group in table for enc in group["encodings"] for label in enc["labels"]}


def _python_codec(label: str) -> str | None:
    try:
        return codecs.lookup(label).name
    except (LookupError, ValueError):
        return None


@functools.cache
def codec_for_label(label: str | None) -> str | None:
    """The Python codec a declared charset label means, or None when nobody knows the label.

    Order: the label as the Encoding Standard reads it (stripped of ASCII whitespace and stray
    quotes or punctuation, lowercased); then Python's codec registry; then the label with every
    non-alphanumeric character dropped matched against the standard's labels (``windows1252``,
    ``iso8859-8i``), a common typo class. ``utf-16`` keeps Python's BOM-aware codec.
    """
    if not label:
        return None
    norm = _TRIM.sub("", label).lower()
    if not norm:
        return None
    labels = whatwg_labels()
    name = labels.get(norm)
    if name and name not in _NO_DECODER and norm != "utf-16":
        return _PYTHON_CODECS.get(name) or _python_codec(name)
    found = _python_codec(norm)
    if found:
        return found
    squeezed = re.sub(r"[^a-z0-9]", "", norm)
    for candidate, enc in labels.items():
        if enc not in _NO_DECODER and re.sub(r"[^a-z0-9]", "", candidate) == squeezed:
            return _PYTHON_CODECS.get(enc) or _python_codec(enc)
    return None


#: Single-byte encodings WHATWG reads labels of their subsets as (``iso-8859-1`` → windows-1252, …).
_SINGLE_BYTE_SUPERSETS = frozenset({"cp1252", "cp1254", "cp874"})


def declared_codecs(label: str | None) -> list[str]:
    """The codecs to try, in order, for a declared label: Python's own codec and the WHATWG one.

    Python's codec comes first when it knows the label (``gb2312`` strict before its GBK superset),
    except where WHATWG reads a Latin subset label as a single-byte superset (``iso-8859-1`` →
    windows-1252 first, then Latin-1 for the five bytes windows-1252 leaves undefined). A label only
    WHATWG knows gives its codec alone; an unknown label gives ``[]``.
    """
    if not label:
        return []
    python = _python_codec(_TRIM.sub("", label).lower() or label)
    whatwg = codec_for_label(label)
    if whatwg is None or whatwg == python:
        return [python] if python else []
    if python is None:
        return [whatwg]
    return [whatwg, python] if whatwg in _SINGLE_BYTE_SUPERSETS else [python, whatwg]


_SINGLE_BYTE_FAMILIES = ("cp125", "iso8859", "latin", "cp874", "koi8", "mac-", "mac_", "cp437", "cp850", "cp866",
                         "ascii")


def is_single_byte(codec: str) -> bool:
    """Whether ``codec`` (a Python codec name) maps each byte to one character (windows-125x, ISO 8859, KOI8 …)."""
    return codecs.lookup(codec).name.startswith(_SINGLE_BYTE_FAMILIES)


def utf8_disguised(data: bytes, codec: str) -> bool:
    """True when a single-byte charset is declared but the bytes are valid multi-byte UTF-8.

    A single-byte text that happens to be valid UTF-8 needs letter pairs like ``Ã¼`` throughout,
    which real text does not have; the declared label is then wrong (a common mail/HTML fault).
    """
    if data.isascii() or not is_single_byte(codec):
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_SCRIPT_NAMES = ("LATIN", "CYRILLIC", "GREEK", "HEBREW", "ARABIC", "THAI", "ARMENIAN", "GEORGIAN", "DEVANAGARI",
                 "HANGUL", "HIRAGANA", "KATAKANA", "CJK")


def dominant_script(text: str, *, sample: int = 20_000) -> str | None:
    """The script most letters of ``text`` belong to (``LATIN``, ``CYRILLIC``, ``HEBREW``, ``ARABIC``, ``CJK``, …).

    Looks at the first ``sample`` characters; None when there are fewer than 8 letters. Kana and
    Hangul count as ``CJK`` (a Japanese or Korean text is one script for this purpose).
    """
    counts: Counter[str] = Counter()
    for ch in text[:sample]:
        if not ch.isalpha():
            continue
        if ch.isascii():
            counts["LATIN"] += 1
            continue
        name = unicodedata.name(ch, "")
        script = next((s for s in _SCRIPT_NAMES if name.startswith(s)), "OTHER")
        counts["CJK" if script in ("HIRAGANA", "KATAKANA", "HANGUL") else script] += 1
    if sum(counts.values()) < 8:
        return None
    return counts.most_common(1)[0][0]
