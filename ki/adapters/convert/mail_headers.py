"""RFC 822 / RFC 2047 header text of a mail, decoded from the raw values (never the structured parser's).

The structured headers of ``policy.default`` raise on bracketed Message-IDs (case R01), give
up on bad base64 encoded-words (R02), return raw 8-bit bytes as lone surrogates (R04), read
``alice@example.com <bob@example.com>`` as ``alice@example.com`` and are slow on very long
folded headers; here every header is decoded from its raw value, bounded by
:data:`MAX_HEADER_CHARS` (decoded) and :data:`MAX_RAW_HEADER_CHARS` (raw).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from datetime import UTC, datetime
from email import policy
from email.message import Message
from email.utils import parseaddr, parsedate_to_datetime

from ki.adapters.convert.charsets import codec_for_label
from ki.adapters.convert.model import Address, clean_text
from ki.adapters.convert.text import decode_text, fix_surrogates

MAX_HEADER_CHARS = 10_000  # decoded header values are cut here (with a defect)
MAX_RAW_HEADER_CHARS = 200_000  # raw header values are cut here before decoding
MAX_RECEIVED = 500  # Received headers read for a fallback date

_ENCODED_WORD = re.compile(r"=\?([^?\s]+)\?([bBqQ])\?([^?\s]*)\?=")
_QP_HEX = re.compile(rb"=([0-9A-Fa-f]{2})")
_FOLD = re.compile(r"\r?\n(?=[ \t])")
_MSG_ID = re.compile(r"<([^<>]*)>")
_ADDR_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"?|\((?:\\.|[^()\\])*\)?|<[^<>]*>?|[,;]|[^,;"(<]+|[(<"]')
_ANGLE_ADDR = re.compile(r"^(.*)<([^<>]*)>\s*(?:\([^()]*\))?\s*$", re.S)
_GROUP_PREFIX = re.compile(r'^\s*[^"<>@,:]*:(?!:)')

Report = Callable[[str], None]


def _word_bytes(kind: str, encoded: str, report: Report) -> bytes:
    if kind in "qQ":
        return _QP_HEX.sub(lambda m: bytes([int(m.group(1), 16)]), encoded.replace("_", " ").encode())
    chars = re.sub(r"[^A-Za-z0-9+/]", "", encoded)
    if len(chars) % 4 == 1:
        report("invalid base64 length in encoded-word (dropped 1 character)")
        chars = chars[:-1]
    return base64.b64decode(chars + "=" * (-len(chars) % 4))  # filtered and padded: cannot fail


def decode_encoded_words(value: str, on_defect: Report | None = None) -> str:
    """Leniently decode RFC 2047 encoded-words in ``value`` (linear time, never raises).

    Whitespace between adjacent encoded-words is dropped and adjacent words in one
    charset are joined before decoding (a character split across words survives). A
    base64 text of 4n+1 characters loses its last one (case R02); padding is added.
    The charset label is read through the WHATWG label table (:func:`~ki.adapters.convert.charsets.codec_for_label`);
    an unknown or wrong charset falls back to UTF-8, then :func:`decode_text`.
    ``on_defect`` receives a description of each repair.
    """
    report = on_defect or (lambda _msg: None)
    out: list[str] = []
    pending = bytearray()
    charset: str | None = None

    def flush() -> None:
        nonlocal charset
        if charset is not None:
            data = bytes(pending)
            try:
                out.append(data.decode(codec_for_label(charset) or charset))
            except (LookupError, ValueError):  # unknown charset, undecodable bytes
                report(f"encoded-word charset {charset!r} does not decode the text")
                try:
                    out.append(data.decode("utf-8"))
                except UnicodeDecodeError:
                    out.append(decode_text(data)[0])
        pending.clear()
        charset = None

    pos = 0
    for match in _ENCODED_WORD.finditer(value):
        between = value[pos : match.start()]
        if charset is None or between.strip():
            flush()
            out.append(between)
        word_charset = match.group(1).split("*", 1)[0].lower()  # RFC 2231 language suffix
        if word_charset != charset:
            flush()
            charset = word_charset
        pending.extend(_word_bytes(match.group(2), match.group(3), report))
        pos = match.end()
    flush()
    out.append(value[pos:])
    return "".join(out)


def raw_headers(msg: Message, name: str) -> list[str]:
    """Every raw value of header ``name`` (surrogate escapes kept, nothing parsed)."""
    return [v for k, v in msg.raw_items() if k.lower() == name and isinstance(v, str)]


def first_raw(msg: Message, name: str) -> str | None:
    return next(iter(raw_headers(msg, name)), None)


def unfold(value: str, limit: int = MAX_RAW_HEADER_CHARS) -> str:
    return fix_surrogates(_FOLD.sub("", value[:limit]).replace("\r", " ").replace("\n", " ").strip())


def header_text(msg: Message, name: str, defects: list[str]) -> str | None:
    """The decoded, bounded, UTF-8-safe text of header ``name`` (None when absent)."""
    raw = first_raw(msg, name)
    if raw is None:
        return None
    text = decode_encoded_words(unfold(raw), lambda m: defects.append(f"{name}: {m}"))
    if len(text) > MAX_HEADER_CHARS:
        defects.append(f"{name}: truncated from {len(text)} to {MAX_HEADER_CHARS} characters")
        text = text[:MAX_HEADER_CHARS]
    return clean_text(text)


def _normalise_id(value: str) -> str | None:
    value = value.strip()
    if value.startswith("<") and value.endswith(">"):
        value = value[1:-1].strip()
    return clean_text(value) or None


def message_id(msg: Message, defects: list[str]) -> str | None:
    """Message-ID via the structured parser, or the raw value when that raises (case R01)."""
    raw = first_raw(msg, "message-id")
    if raw is None:
        return None
    value = unfold(raw, MAX_HEADER_CHARS)
    if len(raw) <= MAX_HEADER_CHARS:
        try:
            value = str(policy.default.header_fetch_parse("message-id", raw)).strip() or value
        except Exception as exc:  # noqa: BLE001 - any parser failure means "use the raw value"
            defects.append(f"message-id: structured parse failed ({type(exc).__name__}); raw value used")
    found = _MSG_ID.search(value)
    return _normalise_id(found.group(1) if found else value)


def id_list(msg: Message, name: str) -> list[str]:
    raw = first_raw(msg, name)
    if raw is None:
        return []
    value = unfold(raw)
    return [i for i in map(_normalise_id, _MSG_ID.findall(value) or value.split()) if i]


def _unquote(name: str) -> str:
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] == '"':
        name = re.sub(r"\\(.)", r"\1", name[1:-1])
    return name


def parse_addresses(raw: str, on_defect: Report | None = None) -> list[Address]:
    """Parse a raw address header (From/To/Cc/...) into :class:`Address` items.

    The list is split on top-level commas *before* encoded-words are decoded, so
    ``=?iso-8859-1?Q?Last=DFlName=2C_FirstName?=`` stays one address; in ``name <addr>``
    everything before ``<`` is the display name even when it looks like an address;
    group syntax (``team: a@x, b@y;``) is flattened; raw 8-bit bytes are decoded by
    :func:`fix_surrogates`.
    """
    items: list[str] = [""]
    for token in _ADDR_TOKEN.findall(unfold(raw)):
        if token in (",", ";"):
            items.append("")
        else:
            items[-1] += token
    result: list[Address] = []
    for item in items:
        item = _GROUP_PREFIX.sub("", item, count=1).strip()
        if not item:
            continue
        angle = _ANGLE_ADDR.match(item)
        if angle:
            name, address = angle.group(1), angle.group(2).strip()
            if ":" in address:
                address = address.rsplit(":", 1)[1]  # obsolete source route @a,@b:user@host
            name = _unquote(decode_encoded_words(_unquote(name), on_defect))
        else:
            name, address = parseaddr(item)
            name, address = decode_encoded_words(name, on_defect), address or item
        name = " ".join(name.split())[:MAX_HEADER_CHARS]
        result.append(Address(name=name, address=address.strip()[:MAX_HEADER_CHARS]))
    return result


def addresses(msg: Message, name: str, defects: list[str]) -> list[Address]:
    report: Report = lambda m: defects.append(f"{name}: {m}")  # noqa: E731
    return [a for raw in raw_headers(msg, name) for a in parse_addresses(raw, report)]


def _parse_date(value: str) -> datetime | None:
    try:
        parsed = parsedate_to_datetime(value.strip()[:1000])
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return parsed if parsed is None or parsed.tzinfo else parsed.replace(tzinfo=UTC)


def header_date(msg: Message, defects: list[str]) -> tuple[datetime | None, str | None]:
    """The Date header, else the newest Received date; returns ``(date, source)``."""
    raw = first_raw(msg, "date")
    if raw is not None:
        parsed = _parse_date(unfold(raw, 1000))
        if parsed is not None:
            return parsed, "date"
        defects.append("InvalidDateDefect")
    received = [_parse_date(unfold(v).rsplit(";", 1)[-1]) for v in raw_headers(msg, "received")[:MAX_RECEIVED]]
    dates = [d for d in received if d is not None]
    return (max(dates), "received") if dates else (None, None)
