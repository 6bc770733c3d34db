"""TNEF (``winmail.dat``, ``application/ms-tnef``): Outlook's wrapper of a message's attachments and RTF body.

Spec: [MS-OXTNEF] (the attribute stream and its MAPI property lists) and [MS-OXRTFCP] (compressed RTF).
A small reader of its own (the Python TNEF library is LGPL): the attribute stream is walked under a bound of
:data:`MAX_ATTRIBUTES`; each attachment (``attAttachRenddata`` opens one) keeps its long file name
(``PR_ATTACH_LONG_FILENAME``, else ``attAttachTitle``) and its bytes (``attAttachData``, else
``PR_ATTACH_DATA_BIN``); the message keeps its subject, plain body (``attBody``, ``PR_BODY``) and RTF body
(``PR_RTF_COMPRESSED``, decompressed). The TNEF file itself is a container (format ``tnef``): its body is the
RTF (else plain) text, its attachments become documents of their own.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ki.adapters.convert.formats import TNEF_MAGIC
from ki.adapters.convert.model import StructuredDocument
from ki.core.errors import UnsupportedDocument

CONVERTER = "ki.tnef"
CONVERTER_VERSION = "1"
TNEF_SIGNATURE = TNEF_MAGIC
MAX_ATTRIBUTES = 10_000
MAX_PROPERTIES = 5_000

# TNEF attributes (id | type << 16), [MS-OXTNEF] 2.1.3.
ATT_SUBJECT = 0x00018004
ATT_BODY = 0x0002800C
ATT_MESSAGE_CLASS = 0x00078008
ATT_OEM_CODEPAGE = 0x00069007
ATT_MSG_PROPS = 0x00069003
ATT_ATTACH_RENDDATA = 0x00069002
ATT_ATTACH_TITLE = 0x00018010
ATT_ATTACH_DATA = 0x0006800F
ATT_ATTACHMENT = 0x00069005
# MAPI property ids.
PR_SUBJECT = 0x0037
PR_CONVERSATION_TOPIC = 0x0070
PR_BODY = 0x1000
PR_HTML = 0x1013
PR_RTF_COMPRESSED = 0x1009
PR_ATTACH_DATA = 0x3701
PR_ATTACH_FILENAME = 0x3704
PR_ATTACH_LONG_FILENAME = 0x3707
PR_ATTACH_MIME_TAG = 0x370E
_FIXED = {0x0002: 4, 0x0003: 4, 0x0004: 4, 0x000A: 4, 0x000B: 4, 0x0001: 4,
          0x0005: 8, 0x0006: 8, 0x0007: 8, 0x0014: 8, 0x0040: 8, 0x0048: 16}
_VARIABLE = frozenset({0x001E, 0x001F, 0x0102, 0x000D, 0x0000})
_RTF_PREBUF = (b"{\\rtf1\\ansi\\mac\\deff0\\deftab720{\\fonttbl;}{\\f0\\fnil \\froman \\fswiss \\fmodern \\fscript "
               b"\\fdecor MS Sans SerifSymbolArialTimes New RomanCourier{\\colortbl\\red0\\green0\\blue0\r\n\\par "
               b"\\pard\\plain\\f0\\fs20\\b\\i\\u\\tab\\tx")


@dataclass
class TnefAttachment:
    """One attachment: ``name`` (long file name when recorded), MIME ``content_type`` when recorded, ``data``."""

    name: str = ""
    content_type: str | None = None
    data: bytes = b""


@dataclass
class TnefMessage:
    """What a TNEF stream holds: subject, message class, plain and RTF bodies, attachments, warnings."""

    subject: str | None = None
    message_class: str | None = None
    body: str = ""
    rtf: bytes | None = None
    html: bytes | None = None
    attachments: list[TnefAttachment] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def is_tnef(data: bytes) -> bool:
    """Whether ``data`` starts with the TNEF signature 0x223E9F78."""
    return data[:4] == TNEF_SIGNATURE


def decompress_rtf(blob: bytes) -> bytes:
    """[MS-OXRTFCP] compressed RTF (``LZFu``) or its uncompressed form (``MELA``) → the RTF bytes.

    Raises: ValueError when the header names neither form or the stream is cut short of its header.
    """
    if len(blob) < 16:
        raise ValueError("compressed RTF shorter than its header")
    comp_size, raw_size, magic = struct.unpack_from("<III", blob)
    body = blob[16 : 4 + comp_size]
    if magic == 0x414C454D:  # MELA
        return body[:raw_size]
    if magic != 0x75465A4C:  # LZFu
        raise ValueError(f"unknown compressed RTF type {magic:#x}")
    window = bytearray(4096)
    window[: len(_RTF_PREBUF)] = _RTF_PREBUF
    write = len(_RTF_PREBUF)
    out = bytearray()
    pos = 0
    while pos < len(body) and len(out) < raw_size:
        flags = body[pos]
        pos += 1
        for bit in range(8):
            if pos >= len(body) or len(out) >= raw_size:
                break
            if flags >> bit & 1:
                if pos + 1 >= len(body):
                    return bytes(out)
                ref = body[pos] << 8 | body[pos + 1]
                pos += 2
                offset, length = ref >> 4, (ref & 0xF) + 2
                if offset == write:
                    return bytes(out)
                for i in range(length):
                    byte = window[(offset + i) % 4096]
                    out.append(byte)
                    window[write] = byte
                    write = (write + 1) % 4096
            else:
                byte = body[pos]
                pos += 1
                out.append(byte)
                window[write] = byte
                write = (write + 1) % 4096
    return bytes(out)


def _mapi_props(blob: bytes, codepage: str) -> dict[int, object]:
    """A MAPI property list ([MS-OXTNEF] 2.1.3.4) → {property id: first value}; named properties are skipped
    over. Stops quietly at the first malformed property (what was read before it is kept)."""
    props: dict[int, object] = {}
    try:
        count = struct.unpack_from("<I", blob)[0]
        pos = 4
        for _ in range(min(count, MAX_PROPERTIES)):
            ptype, pid = struct.unpack_from("<HH", blob, pos)
            pos += 4
            if pid >= 0x8000:  # a named property: GUID, kind, then an id or a name
                kind = struct.unpack_from("<I", blob, pos + 16)[0]
                pos += 20
                if kind == 0:
                    pos += 4
                else:
                    size = struct.unpack_from("<I", blob, pos)[0]
                    pos += 4 + size + (-size % 4)
            multi = bool(ptype & 0x1000)
            ptype &= ~0x1000
            values: list[object] = []
            n = 1
            if multi or ptype in _VARIABLE:
                n = struct.unpack_from("<I", blob, pos)[0]
                pos += 4
            for _ in range(min(n, MAX_PROPERTIES)):
                if ptype in _FIXED:
                    values.append(blob[pos : pos + _FIXED[ptype]])
                    pos += _FIXED[ptype]
                elif ptype in _VARIABLE:
                    size = struct.unpack_from("<I", blob, pos)[0]
                    values.append(blob[pos + 4 : pos + 4 + size])
                    pos += 4 + size + (-size % 4)
                else:
                    return props
            if values:
                props[pid] = _value(ptype, values[0], codepage)
    except struct.error:
        pass
    return props


def _value(ptype: int, raw: object, codepage: str) -> object:
    if not isinstance(raw, bytes):
        return raw
    if ptype == 0x001F:
        return raw.decode("utf-16-le", "replace").rstrip("\x00")
    if ptype == 0x001E:
        return raw.decode(codepage, "replace").rstrip("\x00")
    if ptype == 0x000D:
        return raw[16:]  # an embedded object: its IID, then the bytes
    return raw


def read_tnef(data: bytes, filename: str) -> TnefMessage:
    """Walk a TNEF stream into a :class:`TnefMessage`.

    Raises:
        UnsupportedDocument: ``corrupt`` when ``data`` does not start with the TNEF signature.
    """
    if not is_tnef(data):
        raise UnsupportedDocument(f"{filename}: not a TNEF stream (no 0x223E9F78 signature)", reason="corrupt")
    msg = TnefMessage()
    codepage = "cp1252"
    pos = 6
    current: TnefAttachment | None = None
    for _ in range(MAX_ATTRIBUTES):
        if pos + 9 > len(data):
            break
        attr, size = struct.unpack_from("<II", data, pos + 1)
        value = data[pos + 9 : pos + 9 + size]
        if len(value) < size:
            msg.warnings.append(f"attribute {attr:#010x} cut short ({len(value)} of {size} bytes)")
        pos += 9 + size + 2  # level, id, length, value, checksum
        if attr == ATT_OEM_CODEPAGE and len(value) >= 4:
            codepage = f"cp{struct.unpack_from('<I', value)[0]}"
            try:
                "".encode(codepage)
            except LookupError:
                codepage = "cp1252"
        elif attr == ATT_SUBJECT:
            msg.subject = value.rstrip(b"\x00").decode(codepage, "replace")
        elif attr == ATT_MESSAGE_CLASS:
            msg.message_class = value.rstrip(b"\x00").decode(codepage, "replace")
        elif attr == ATT_BODY:
            msg.body = value.rstrip(b"\x00").decode(codepage, "replace")
        elif attr == ATT_MSG_PROPS:
            _message_props(msg, _mapi_props(value, codepage))
        elif attr == ATT_ATTACH_RENDDATA:
            current = TnefAttachment()
            msg.attachments.append(current)
        elif current is not None and attr == ATT_ATTACH_TITLE:
            current.name = current.name or value.rstrip(b"\x00").decode(codepage, "replace")
        elif current is not None and attr == ATT_ATTACH_DATA:
            current.data = value
        elif current is not None and attr == ATT_ATTACHMENT:
            _attachment_props(current, _mapi_props(value, codepage))
    return msg


def _message_props(msg: TnefMessage, props: dict[int, object]) -> None:
    for pid in (PR_SUBJECT, PR_CONVERSATION_TOPIC):
        if isinstance(props.get(pid), str) and props[pid].strip() and not msg.subject:
            msg.subject = props[pid]
    if isinstance(props.get(PR_HTML), bytes | str):
        html = props[PR_HTML]
        msg.html = html.encode("utf-8") if isinstance(html, str) else html
    if isinstance(props.get(PR_BODY), str) and not msg.body:
        msg.body = props[PR_BODY]
    rtf = props.get(PR_RTF_COMPRESSED)
    if isinstance(rtf, bytes):
        try:
            msg.rtf = decompress_rtf(rtf)
        except ValueError as exc:
            msg.warnings.append(f"RTF body unreadable: {exc}")


def _attachment_props(att: TnefAttachment, props: dict[int, object]) -> None:
    name = props.get(PR_ATTACH_LONG_FILENAME) or props.get(PR_ATTACH_FILENAME)
    if isinstance(name, str) and name.strip():
        att.name = name.strip()
    if isinstance(props.get(PR_ATTACH_MIME_TAG), str):
        att.content_type = props[PR_ATTACH_MIME_TAG]
    if not att.data and isinstance(props.get(PR_ATTACH_DATA), bytes):
        att.data = props[PR_ATTACH_DATA]


def tnef_parts(data: bytes, filename: str, *, body: bool = True) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of what a TNEF stream wraps: with ``body``, first its body as a file of its own
    (``message.rtf``, else ``message.html`` / ``message.txt``), then each non-empty attachment in stream
    order. [] for an unreadable stream."""
    try:
        msg = read_tnef(data, filename)
    except UnsupportedDocument:
        return []
    out: list[tuple[str, bytes]] = []
    if body and msg.rtf:
        out.append(("message.rtf", msg.rtf))
    elif body and msg.html:
        out.append(("message.html", msg.html))
    elif body and msg.body.strip():
        out.append(("message.txt", msg.body.encode("utf-8")))
    out += [(a.name or f"attachment-{i + 1}.bin", a.data) for i, a in enumerate(msg.attachments) if a.data]
    return out


def convert_tnef(data: bytes, filename: str) -> StructuredDocument:
    """A ``winmail.dat``: its subject and body (the RTF body read by ki's RTF reader, else the plain body, else
    the HTML body);
    its attachments are documents of their own (:func:`tnef_parts`). Format ``tnef``.

    ``metadata``: ``message_class``, ``attachments`` (count), ``body_source`` (``rtf``/``plain``/``html``/None).

    Raises:
        UnsupportedDocument: ``corrupt`` (no TNEF signature).
    """
    from ki.adapters.convert.html import convert_html
    from ki.adapters.convert.rtf import convert_rtf

    msg = read_tnef(data, filename)
    body, source = msg.body.strip(), "plain" if msg.body.strip() else None
    if msg.html and not body:
        try:
            body, source = convert_html(msg.html, "message.html").text.strip(), "html"
        except UnsupportedDocument as exc:
            msg.warnings.append(f"HTML body unreadable: {exc}")
    if msg.rtf:
        try:
            rtf_text = convert_rtf(msg.rtf, "message.rtf").text.strip()
        except UnsupportedDocument as exc:
            msg.warnings.append(f"RTF body unreadable: {exc}")
        else:
            if rtf_text:
                body, source = rtf_text, "rtf"
    names = [a.name for a in msg.attachments if a.name]
    head = f"Subject: {msg.subject}\n\n" if msg.subject else ""
    return StructuredDocument(
        text=(head + body).strip() + "\n", format="tnef", converter=CONVERTER, converter_version=CONVERTER_VERSION,
        title=msg.subject or filename, parts={"attachment_name": "\n".join(names)} if names else {},
        warnings=msg.warnings,
        metadata={"message_class": msg.message_class, "attachments": len(msg.attachments), "body_source": source})
