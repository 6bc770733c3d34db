"""RFC 822 (.eml) converter and mbox splitter (conversion.md 7.2).

The stdlib ``BytesParser(policy=policy.compat32)`` builds the MIME tree and its
``defects`` are kept (``compat32`` because ``policy.default`` parses every part's
Content-Type through the header registry while parsing: 18 s instead of 1.3 s for a
3,000-part bomb), but every stored header is decoded here from the *raw* value:
the structured headers of ``policy.default`` raise on bracketed Message-IDs (case R01),
give up on bad base64 encoded-words (R02), return raw 8-bit bytes as lone surrogates
(R04), read ``alice@example.com <bob@example.com>`` as ``alice@example.com`` and are
slow on very long folded headers. Hostile input is bounded: at most :data:`MAX_PARTS`
MIME parts are examined and header values are cut at :data:`MAX_HEADER_CHARS`.
"""

from __future__ import annotations

import base64
import codecs
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from email import policy
from email.message import Message
from email.parser import BytesParser
from email.utils import parseaddr, parsedate_to_datetime

from ki.convert.model import Address, MailMeta, StructuredDocument, clean_text
from ki.convert.text import decode_text, fix_surrogates, looks_binary, normalise_newlines, sniff_bom, sniff_wide
from ki.errors import UnsupportedDocument

CONVERTER = "ki.mail"
CONVERTER_VERSION = "1"

MAX_PARTS = 500  # MIME parts examined for text, attachments and defects
MAX_COUNTED_PARTS = 100_000  # parts counted for metadata["parts"]
MAX_DEPTH = 60  # nesting depth followed
MAX_HEADER_CHARS = 10_000  # decoded header values are cut here (with a defect)
MAX_RAW_HEADER_CHARS = 200_000  # raw header values are cut here before decoding

_ENCODED_WORD = re.compile(r"=\?([^?\s]+)\?([bBqQ])\?([^?\s]*)\?=")
_QP_HEX = re.compile(rb"=([0-9A-Fa-f]{2})")
_FOLD = re.compile(r"\r?\n(?=[ \t])")
_MSG_ID = re.compile(r"<([^<>]*)>")
_MIME_TYPE = re.compile(r"\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)/([!#$%&'*+.^_`|~0-9A-Za-z-]+)")
_ADDR_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"?|\((?:\\.|[^()\\])*\)?|<[^<>]*>?|[,;]|[^,;"(<]+|[(<"]')
_ANGLE_ADDR = re.compile(r"^(.*)<([^<>]*)>\s*(?:\([^()]*\))?\s*$", re.S)
_GROUP_PREFIX = re.compile(r'^\s*[^"<>@,:]*:(?!:)')
# Content-Type/-Disposition lines anywhere (the parser reads every part's Content-Type while parsing).
_MIME_HEADER = re.compile(rb"(?im)^(content-(?:type|disposition))[ \t]*:([^\n]*(?:\n[ \t][^\n]*)*)")
_KEPT_PARAM = re.compile(
    rb'(?i)(?:^|;)\s*((?:boundary|charset|name|filename|smime-type|protocol)\*?\s*=\s*(?:"[^"]{0,300}"?|[^;\s]{0,300}))'
)
_MBOX_FROM = re.compile(rb"^From \S+[ \t](?=.*\d{1,2}:\d{2})(?=.*\b\d{4}\b)")  # envelope sender, time, year
_MBOX_QUOTED_FROM = re.compile(rb"^>+From ")
# Mail in practice means windows-1252 when it says Latin-1 (smart quotes in 0x80-0x9F).
_CHARSET_ALIASES = dict.fromkeys(("iso-8859-1", "iso8859-1", "iso_8859-1", "latin1", "latin-1"), "cp1252")

Report = Callable[[str], None]


# --------------------------------------------------------------------------- header text


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
    An unknown or wrong charset falls back to UTF-8, then :func:`decode_text`.
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
                out.append(data.decode(charset))
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


def _raw_headers(msg: Message, name: str) -> list[str]:
    """Every raw value of header ``name`` (surrogate escapes kept, nothing parsed)."""
    return [v for k, v in msg.raw_items() if k.lower() == name and isinstance(v, str)]


def _first_raw(msg: Message, name: str) -> str | None:
    return next(iter(_raw_headers(msg, name)), None)


def _unfold(value: str, limit: int = MAX_RAW_HEADER_CHARS) -> str:
    return fix_surrogates(_FOLD.sub("", value[:limit]).replace("\r", " ").replace("\n", " ").strip())


def _header_text(msg: Message, name: str, defects: list[str]) -> str | None:
    """The decoded, bounded, UTF-8-safe text of header ``name`` (None when absent)."""
    raw = _first_raw(msg, name)
    if raw is None:
        return None
    text = decode_encoded_words(_unfold(raw), lambda m: defects.append(f"{name}: {m}"))
    if len(text) > MAX_HEADER_CHARS:
        defects.append(f"{name}: truncated from {len(text)} to {MAX_HEADER_CHARS} characters")
        text = text[:MAX_HEADER_CHARS]
    return clean_text(text)


def _normalise_id(value: str) -> str | None:
    value = value.strip()
    if value.startswith("<") and value.endswith(">"):
        value = value[1:-1].strip()
    return clean_text(value) or None


def _message_id(msg: Message, defects: list[str]) -> str | None:
    """Message-ID via the structured parser, or the raw value when that raises (case R01)."""
    raw = _first_raw(msg, "message-id")
    if raw is None:
        return None
    value = _unfold(raw, MAX_HEADER_CHARS)
    if len(raw) <= MAX_HEADER_CHARS:
        try:
            value = str(policy.default.header_fetch_parse("message-id", raw)).strip() or value
        except Exception as exc:  # noqa: BLE001 - any parser failure means "use the raw value"
            defects.append(f"message-id: structured parse failed ({type(exc).__name__}); raw value used")
    found = _MSG_ID.search(value)
    return _normalise_id(found.group(1) if found else value)


def _id_list(msg: Message, name: str) -> list[str]:
    raw = _first_raw(msg, name)
    if raw is None:
        return []
    value = _unfold(raw)
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
    for token in _ADDR_TOKEN.findall(_unfold(raw)):
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


def _addresses(msg: Message, name: str, defects: list[str]) -> list[Address]:
    report: Report = lambda m: defects.append(f"{name}: {m}")  # noqa: E731
    return [a for raw in _raw_headers(msg, name) for a in parse_addresses(raw, report)]


def _parse_date(value: str) -> datetime | None:
    try:
        parsed = parsedate_to_datetime(value.strip()[:1000])
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return parsed if parsed is None or parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _date(msg: Message, defects: list[str]) -> tuple[datetime | None, str | None]:
    """The Date header, else the newest Received date; returns ``(date, source)``."""
    raw = _first_raw(msg, "date")
    if raw is not None:
        parsed = _parse_date(_unfold(raw, 1000))
        if parsed is not None:
            return parsed, "date"
        defects.append("InvalidDateDefect")
    received = [_parse_date(_unfold(v).rsplit(";", 1)[-1]) for v in _raw_headers(msg, "received")[:MAX_PARTS]]
    dates = [d for d in received if d is not None]
    return (max(dates), "received") if dates else (None, None)


# --------------------------------------------------------------------------- MIME parts


def _content_type(part: Message) -> str:
    """``maintype/subtype`` from the raw header (bounded); the RFC 2045 default when absent or invalid."""
    raw = _first_raw(part, "content-type")
    match = _MIME_TYPE.match(raw[:1000]) if raw is not None else None
    return f"{match.group(1)}/{match.group(2)}".lower() if match else part.get_default_type()


def _param(part: Message, name: str) -> str | None:
    """A Content-Type/-Disposition parameter (``filename`` means ``get_filename()``); None on any error.

    The structured parser only sees headers of bounded length.
    """
    if any(len(v) > MAX_HEADER_CHARS for k, v in part.raw_items() if k.lower().startswith("content-")):
        return None
    try:
        value = part.get_filename() if name == "filename" else part.get_param(name)
    except Exception:  # noqa: BLE001 - a malformed parameter counts as absent
        return None
    if isinstance(value, tuple):  # RFC 2231 (charset, language, value)
        value = value[2]
    if not value:
        return None
    value = fix_surrogates(str(value))
    if name != "filename":
        return value.strip().lower()
    return clean_text(decode_encoded_words(value) if "=?" in value else value).strip()[:1000] or None


def _disposition(part: Message) -> str | None:
    raw = _first_raw(part, "content-disposition")
    return raw.split(";", 1)[0].strip().lower() if raw else None


def _iter_parts(msg: Message, limit: int) -> Iterator[Message]:
    """Depth-first parts (the message itself first), iterative and capped at ``limit``."""
    stack: list[tuple[Message, int]] = [(msg, 0)]
    seen = 0
    while stack and seen < limit:
        part, depth = stack.pop()
        seen += 1
        yield part
        payload = part.get_payload()
        if isinstance(payload, list) and depth < MAX_DEPTH:
            stack.extend((p, depth + 1) for p in reversed(payload) if isinstance(p, Message))


def _is_leaf(part: Message) -> bool:
    return not isinstance(part.get_payload(), list) and not _content_type(part).startswith("multipart/")


def _is_attachment(part: Message) -> bool:
    if _content_type(part) == "message/rfc822":
        return False  # an attached mail is text: it is read inline
    return _disposition(part) == "attachment" or _param(part, "filename") is not None


def _inner_message(part: Message, inner: Message) -> Message:
    """The enclosed message, re-parsed when the sender base64/QP-encoded message/rfc822 (GroupWise)."""
    cte = (_first_raw(part, "content-transfer-encoding") or "").strip().lower()
    payload = inner.get_payload()
    if cte not in ("base64", "quoted-printable") or not isinstance(payload, str):
        return inner
    wrapper = Message()
    wrapper["Content-Transfer-Encoding"] = cte
    try:
        wrapper.set_payload(inner.as_string(policy=policy.compat32) if len(inner) else payload)
        decoded = wrapper.get_payload(decode=True)
        return BytesParser(policy=policy.compat32).parsebytes(_tame_mime_headers(decoded, [])) if decoded else inner
    except (RecursionError, ValueError, IndexError, LookupError):
        return inner


class _BodyWalker:
    """Collects body text under a shared budget of :data:`MAX_PARTS` parts."""

    def __init__(self, defects: list[str]):
        self.budget = MAX_PARTS
        self.defects = defects
        self.charsets: list[str] = []

    def decode(self, part: Message) -> str:
        """The part's text: declared charset, else :func:`decode_text`; HTML via :func:`convert_html`."""
        try:
            payload = part.get_payload(decode=True)
        except Exception:  # noqa: BLE001
            payload = None
        if not payload:
            return ""
        charset = _param(part, "charset")
        text = None
        if charset:
            self.charsets.append(charset)
            for codec in dict.fromkeys((_CHARSET_ALIASES.get(charset, charset), charset)):
                try:
                    text = payload.decode(codec)
                    break
                except (LookupError, ValueError):
                    continue
            if text is None:
                self.defects.append(f"charset_mismatch: declared {charset}")
        if _content_type(part) == "text/html":
            from ki.convert.html import convert_html

            try:  # a UTF-8 BOM makes the declared charset win over <meta charset>
                return convert_html(payload if text is None else codecs.BOM_UTF8 + text.encode(), "part").text
            except UnsupportedDocument:
                return ""
        text = decode_text(payload)[0] if text is None else text
        if looks_binary(text):
            self.defects.append(f"body: {_content_type(part)} part is binary, skipped")
            return ""
        return text

    def text(self, part: Message, depth: int = 0) -> str:
        if depth > MAX_DEPTH or self.budget <= 0:
            return ""
        self.budget -= 1
        ctype = _content_type(part)
        payload = part.get_payload()
        if isinstance(payload, list):
            subs = [p for p in payload[:MAX_PARTS] if isinstance(p, Message)]
            if ctype == "message/rfc822" and subs:
                inner = _inner_message(part, subs[0])
                body = self.text(inner, depth + 1)
                return f"----- Attached message -----\n{_header_block(inner)}\n\n{body}".strip()
            if ctype in ("message/delivery-status", "multipart/encrypted"):
                return ""
            if ctype == "multipart/alternative":
                types = [_content_type(p) for p in subs]
                for wanted in ("text/plain", "text/html"):
                    found = self.text(subs[types.index(wanted)], depth + 1) if wanted in types else ""
                    if found.strip():
                        return found
                subs = [p for p, t in zip(subs, types, strict=True) if t.startswith("multipart/")][:1]
            texts = [self.text(p, depth + 1) for p in subs if not _is_attachment(p)]
            return "\n\n".join(t for t in texts if t.strip())
        if _is_attachment(part):
            return ""
        if ctype.startswith(("text/", "multipart/")) or ctype.endswith("/plain"):
            return self.decode(part)  # a multipart whose boundary is missing keeps its raw body
        return ""


def _encryption(msg: Message) -> str | None:
    """``pgp/mime``, ``s/mime`` or ``pgp/inline`` when the readable content is encrypted, else None."""
    payload = msg.get_payload()
    candidates = [msg]
    if _content_type(msg) == "multipart/signed" and isinstance(payload, list) and payload:
        candidates.append(payload[0])
    for part in candidates:
        ctype = _content_type(part)
        if ctype == "multipart/encrypted":
            return "pgp/mime"
        if ctype in ("application/pkcs7-mime", "application/x-pkcs7-mime"):
            smime_type = _param(part, "smime-type")
            if smime_type in ("enveloped-data", "authenveloped-data") or (
                smime_type is None and (_param(part, "filename") or "").lower().endswith(".p7m")
            ):
                return "s/mime"
    if isinstance(payload, str) and _content_type(msg) == "text/plain":
        if payload[:4096].lstrip().startswith("-----BEGIN PGP MESSAGE-----"):
            return "pgp/inline"
    return None


# --------------------------------------------------------------------------- conversion


def _header_block(msg: Message, defects: list[str] | None = None) -> str:
    sink: list[str] = [] if defects is None else defects
    lines = []
    for name in ("subject", "from", "to", "cc", "date"):
        if name in ("from", "to", "cc"):
            value = ", ".join(f"{a.name} <{a.address}>" if a.name else a.address for a in _addresses(msg, name, sink))
        else:
            value = _header_text(msg, name, sink) or ""
        if value:
            lines.append(f"{name.capitalize()}: {value}")
    return "\n".join(lines)


def _tame_mime_headers(data: bytes, defects: list[str]) -> bytes:
    """Reduce an oversized Content-Type/-Disposition (> 1,000 bytes or > 8 parameters) to its type and
    a few known parameters: ``policy.default`` spends ~0.3 ms per parameter on every parse."""

    def tame(match: re.Match[bytes]) -> bytes:
        name, value = match.group(1), match.group(2)
        if len(value) <= 1000 and value.count(b";") <= 8:
            return match.group(0)
        defects.append(f"{name.decode().lower()}: oversized header reduced to its type and known parameters")
        flat = re.sub(rb"\r?\n[ \t]", b" ", value[:MAX_RAW_HEADER_CHARS])
        kept = [flat.split(b";", 1)[0].strip()[:200], *_KEPT_PARAM.findall(flat)[:6]]
        return name + b": " + b"; ".join(kept) + (b"\r" if value.endswith(b"\r") else b"")

    return _MIME_HEADER.sub(tame, data)


def _prepare(data: bytes) -> tuple[bytes, str | None, str | None]:
    """Decode whole-file UTF-16/32, drop a UTF-8 BOM: ``(bytes to parse, whole-file codec, BOM codec)``."""
    bom = sniff_bom(data)
    codec = bom[0] if bom else sniff_wide(data)
    if codec is None:
        return data, None, None
    body = data[bom[1] :] if bom else data
    if codec == "utf-8":
        return body, None, codec
    return body[: len(body) // 2 * 2].decode(codec, "replace").encode("utf-8"), codec, bom[0] if bom else None


def convert_mail(data: bytes, filename: str) -> StructuredDocument:
    """Convert one RFC 822 message (``.eml``) to a :class:`StructuredDocument` (format ``eml``).

    Returns:
        ``text``: a header block (Subject/From/To/Cc/Date lines), a blank line, then the
        body (text/plain preferred, else the visible text of text/html; attached messages
        inline). ``title``: the subject. ``mail``: :class:`MailMeta` (ids without ``<>``,
        ``date`` from Date else the newest Received, ``defects`` = stdlib defect class
        names plus ki's own ``header: ...`` notes). ``metadata``: ``from_addresses`` (how
        many From addresses; ``mail.sender`` is the first), ``parts`` (leaf MIME
        parts, all counted), ``parts_total``, ``parts_truncated``, ``body_charset``, ``bom``,
        ``date_source``. ``encoding`` is set only for a whole-file UTF-16/32 message.

    Raises:
        UnsupportedDocument: ``reason="empty"`` for an empty or whitespace-only file;
            ``reason="encrypted"`` for PGP/MIME, S/MIME enveloped data or an inline PGP
            message; ``reason="corrupt"`` when the stdlib parser itself fails.
    """
    if not data.strip():
        raise UnsupportedDocument(f"{filename}: empty message ({len(data)} bytes)", reason="empty")
    data, whole_encoding, bom = _prepare(data)
    defects: list[str] = []
    data = _tame_mime_headers(data, defects)
    try:
        msg = BytesParser(policy=policy.compat32).parsebytes(data)
    except (RecursionError, MemoryError, ValueError, IndexError) as exc:
        raise UnsupportedDocument(f"{filename}: MIME parse failed: {exc}", reason="corrupt") from exc
    root_type = _content_type(msg)
    encryption = _encryption(msg)
    if encryption:
        raise UnsupportedDocument(
            f"{filename}: encrypted message ({encryption}, {root_type})",
            reason="encrypted",
            details={"content_type": root_type, "scheme": encryption},
        )

    leaves = total = 0
    for part in _iter_parts(msg, MAX_COUNTED_PARTS):
        total += 1
        leaves += _is_leaf(part)
    attachments: list[str] = []
    for part in _iter_parts(msg, MAX_PARTS):
        defects.extend(type(d).__name__ for d in part.defects)
        name = _param(part, "filename")
        ctype = _content_type(part)
        if name is not None or (_disposition(part) == "attachment" and ctype != "message/rfc822"):
            attachments.append(name or f"(unnamed {ctype})")
    if total > MAX_PARTS:
        defects.append(f"parts: only the first {MAX_PARTS} of {total} MIME parts were examined")

    date, date_source = _date(msg, defects)
    subject = _header_text(msg, "subject", defects)
    senders = _addresses(msg, "from", defects)
    meta = MailMeta(
        message_id=_message_id(msg, defects),
        in_reply_to=next(iter(_id_list(msg, "in-reply-to")), None),
        references=_id_list(msg, "references"),
        subject=subject,
        sender=senders[0] if senders else None,
        to=_addresses(msg, "to", defects),
        cc=_addresses(msg, "cc", defects),
        bcc=_addresses(msg, "bcc", defects),
        reply_to=_addresses(msg, "reply-to", defects),
        date=date,
        content_type=root_type,
        attachments=attachments,
    )
    walker = _BodyWalker(defects)
    body = normalise_newlines(walker.text(msg)).strip()
    meta.defects = [clean_text(d) for d in dict.fromkeys(defects)]
    return StructuredDocument(
        text=f"{_header_block(msg)}\n\n{body}".strip() + "\n",
        format="eml",
        converter=CONVERTER,
        converter_version=CONVERTER_VERSION,
        title=subject,
        encoding=whole_encoding,
        mail=meta,
        warnings=[d for d in meta.defects if "truncated" in d or "oversized" in d or d.startswith("parts:")],
        metadata={
            "from_addresses": len(senders),
            "parts": leaves,
            "parts_total": total,
            "parts_truncated": total > MAX_PARTS,
            "body_charset": walker.charsets[0] if walker.charsets else None,
            "bom": bom,
            "date_source": date_source,
        },
    )


def split_mbox(data: bytes) -> list[bytes]:
    """Split an mbox file into messages (bytes without the ``From `` separator line).

    A separator is a line starting with ``From `` that carries a time (``hh:mm``) and a
    year and follows a blank line or the start of the file; ``>From `` quoting (mboxrd/mboxo) loses
    one ``>``. Data without any separator is one message; whitespace-only chunks are dropped.
    """
    messages: list[list[bytes]] = [[]]
    previous_blank = True
    for line in data.splitlines(keepends=True):
        if previous_blank and _MBOX_FROM.match(line):
            messages.append([])
            previous_blank = False
            continue
        messages[-1].append(line[1:] if _MBOX_QUOTED_FROM.match(line) else line)
        previous_blank = not line.strip()
    return [m for m in (b"".join(lines) for lines in messages) if m.strip()]
