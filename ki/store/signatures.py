"""Error signatures: what a failure is, with what it happened to be normalised away.

A failure's signature is its error class + reason + its message with paths, URLs,
numbers, ids and quoted values replaced by placeholders, so the same fault across thousands of files
is one signature and a different fault is another. Failures group by (stage, signature)
(``GET /v1/work-items/groups``). Pure functions: no database, no configuration.

Kept as they are, because they tell faults apart: words, punctuation, and an HTTP status code
(``HTTP 503``, ``status 429``, ``status code 401`` — an outage is not an expired key).
"""

from __future__ import annotations

import hashlib
import re

#: Placeholders in :func:`normalise_message`'s output.
QUOTED, URL, PATH, UUID, HEX, ID, EMAIL, NUMBER = "<q>", "<url>", "<path>", "<uuid>", "<hex>", "<id>", "<email>", "<n>"
#: The normalised text keeps at most this many characters (a signature is a heading, not a log).
TEMPLATE_MAX_CHARS = 300

_QUOTED = re.compile(r"""'[^'\n]{0,400}'|"[^"\n]{0,400}"|`[^`\n]{0,400}`|«[^»\n]{0,400}»|„[^“”\n]{0,400}[“”]"""
                     r"""|“[^”\n]{0,400}”|‘[^’\n]{0,400}’""")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>()]+", re.I)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_WIN_PATH = re.compile(r"(?:\b[a-z]:|\\\\[^\\\s]+)(?:\\[^\\\s:*?\"<>|]+)+\\?", re.I)
_POSIX_PATH = re.compile(r"(?:(?<=\s)|(?<=^)|(?<=[(\[=:,]))(?:~|\.{1,2})?/(?:[^\s/:,;)\]]+/?)+")
_RELATIVE_PATH = re.compile(r"(?<![\w/<])[\w.-]+(?:/[\w.-]+)+/?")
_FILE_NAME = re.compile(r"\b[\w.-]+\.(?:pdf|docx?|xlsx?|pptx?|msg|eml|mbox|rtf|txt|html?|xml|json|zip|odt|png|jpe?g"
                        r"|tiff?|csv)\b", re.I)
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_HEX = re.compile(r"\b(?:0x)?(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", re.I)
#: an opaque id: a word of 10+ characters with letters and at least two digits (``req_8f9a0b1c2d``)
_ID = re.compile(r"\b(?=\w*\d\w*\d)(?=\w*[a-z])\w{10,}\b", re.I)
_STATUS = re.compile(r"\b(HTTP(?:/[\d.]+)?|status(?: code)?|error code)\s*:?\s*([1-5]\d\d)\b", re.I)
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:[.,:]\d+)*(?:e[-+]?\d+)?(?!\w)", re.I)
_SPACE = re.compile(r"\s+")
_PATHS = re.compile(r"<path>(?:[ \t]*<path>)+")  # a path with spaces reads as several
#: In this order: a quoted path is one quoted value, a path's digits are not numbers.
_RULES = ((_QUOTED, QUOTED), (_URL, URL), (_EMAIL, EMAIL), (_WIN_PATH, PATH), (_POSIX_PATH, PATH),
          (_RELATIVE_PATH, PATH), (_FILE_NAME, PATH), (_PATHS, PATH), (_UUID, UUID), (_HEX, HEX), (_ID, ID),
          (_NUMBER, NUMBER))
_KEEP_BASE = 0xE000  # status codes kept aside as private-use characters (no digit a later rule could eat)


def normalise_message(message: str | None) -> str:
    """``message`` with quoted values, URLs, e-mail addresses, paths, file names, uuids, hex and opaque ids and
    numbers replaced by :data:`QUOTED` ... :data:`NUMBER` (HTTP status codes kept), whitespace
    collapsed, cut at :data:`TEMPLATE_MAX_CHARS`. ``None`` → ``""``.

    >>> normalise_message("cannot open '/data/a b.pdf': 3 bytes at offset 1024")
    'cannot open <q>: <n> bytes at offset <n>'
    """
    if not message:
        return ""
    text = message
    kept: list[str] = []

    def keep(match: re.Match[str]) -> str:
        kept.append(f"{match.group(1)} {match.group(2)}")
        return chr(_KEEP_BASE + len(kept) - 1)

    text = _STATUS.sub(keep, text)
    for pattern, placeholder in _RULES:
        text = pattern.sub(placeholder, text)
    for i, value in enumerate(kept):
        text = text.replace(chr(_KEEP_BASE + i), value)
    return _SPACE.sub(" ", text).strip()[:TEMPLATE_MAX_CHARS]


def signature_text(error_class: str | None, reason: str | None, message: str | None) -> str:
    """The readable form of a signature: ``class | reason | normalised message`` (empty parts kept)."""
    return f"{error_class or ''} | {reason or ''} | {normalise_message(message)}"


def error_signature(error_class: str | None, reason: str | None, message: str | None) -> str:
    """The signature of a failure: 16 hex characters (SHA-256 of :func:`signature_text`).

    Equal for two failures exactly when class, reason and normalised message are equal.
    """
    return hashlib.sha256(signature_text(error_class, reason, message).encode("utf-8")).hexdigest()[:16]


def record_signature(last_error: dict | None) -> str | None:
    """:func:`error_signature` of a ``last_error`` record (keys ``class``, ``reason``, ``message``);
    None for no record or one without a class (a skip reason, not a failure)."""
    if not last_error or not last_error.get("class"):
        return None
    return error_signature(last_error.get("class"), last_error.get("reason"), last_error.get("message"))
