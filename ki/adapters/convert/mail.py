"""RFC 822 (.eml) converter and mbox splitter (conversion.md 7.2).

The stdlib parser (:func:`~ki.adapters.convert.mime_parts.parse_message`) builds the MIME tree and
its ``defects`` are kept; every stored header is decoded from its raw value
(:mod:`ki.adapters.convert.mail_headers`) and every part is read through :mod:`ki.adapters.convert.mime_parts`.
Hostile input is bounded: at most :data:`~ki.adapters.convert.mime_parts.MAX_PARTS` MIME parts are
examined and header values are cut at :data:`~ki.adapters.convert.mail_headers.MAX_HEADER_CHARS`.
Declared charsets are read through the WHATWG label table (:mod:`ki.adapters.convert.charsets`).
"""

from __future__ import annotations

import codecs
import re
from email.message import Message

from ki.adapters.convert.charsets import declared_codecs, dominant_script, utf8_disguised
from ki.adapters.convert.mail_headers import (
    MAX_HEADER_CHARS,
    addresses,
    decode_encoded_words,
    header_date,
    header_text,
    id_list,
    message_id,
    parse_addresses,
)
from ki.adapters.convert.mail_smime import detached_signers, opaque_signed
from ki.adapters.convert.mime_parts import (
    MAX_DEPTH,
    MAX_PARTS,
    content_type,
    disposition,
    encryption,
    inner_message,
    is_attachment,
    is_leaf,
    iter_parts,
    param,
    parse_message,
    prepare_bytes,
    tame_mime_headers,
)
from ki.adapters.convert.model import MailMeta, StructuredDocument, clean_text
from ki.adapters.convert.text import decode_text, looks_binary, normalise_newlines
from ki.core.errors import UnsupportedDocument

__all__ = ["MAX_HEADER_CHARS", "convert_mail", "decode_encoded_words", "mime_body_document", "parse_addresses",
           "split_mbox"]

CONVERTER = "ki.mail"
CONVERTER_VERSION = "1"

MAX_COUNTED_PARTS = 100_000  # parts counted for metadata["parts"]

_MBOX_FROM = re.compile(rb"^From \S+[ \t](?=.*\d{1,2}:\d{2})(?=.*\b\d{4}\b)")  # envelope sender, time, year
_MBOX_QUOTED_FROM = re.compile(rb"^>+From ")


class BodyWalker:
    """Collects body text under a shared budget of :data:`MAX_PARTS` parts."""

    def __init__(self, defects: list[str]):
        self.budget = MAX_PARTS
        self.defects = defects
        self.charsets: list[str] = []

    def decode(self, part: Message) -> str:
        """The part's text: its declared charset (read through the WHATWG labels), else detection.

        A declared charset that does not decode the bytes is a ``charset_mismatch`` defect; the
        detector's reading is then kept only if it is strict UTF-8 or stays in the script the declared
        charset gives, otherwise the declared charset wins (undecodable bytes as U+FFFD) and a
        ``charset_script_mismatch`` defect names both scripts. HTML goes through :func:`convert_html`.
        """
        try:
            payload = part.get_payload(decode=True)
        except Exception:  # noqa: BLE001
            payload = None
        if not payload:
            return ""
        charset = param(part, "charset")
        text = None
        if charset:
            self.charsets.append(charset)
            text = self._declared(payload, charset)
        if content_type(part) == "text/html":
            from ki.adapters.convert.html import convert_html

            try:  # a UTF-8 BOM makes the declared charset win over <meta charset>
                return convert_html(payload if text is None else codecs.BOM_UTF8 + text.encode(), "part").text
            except UnsupportedDocument:
                return ""
        text = decode_text(payload)[0] if text is None else text
        if looks_binary(text):
            self.defects.append(f"body: {content_type(part)} part is binary, skipped")
            return ""
        return text

    def _declared(self, payload: bytes, charset: str) -> str | None:
        candidates = declared_codecs(charset)
        if not candidates:
            self.defects.append(f"charset_mismatch: declared {charset} (unknown label)")
            return None
        if utf8_disguised(payload, candidates[0]):
            self.defects.append(f"charset_mismatch: declared {charset}, the bytes are UTF-8")
            return payload.decode("utf-8")
        for i, codec in enumerate(candidates):
            try:
                return payload.decode(codec)
            except (LookupError, ValueError):
                pass
            if i == 0 and not payload.isascii():
                try:  # a UTF-8 body under a legacy label (mail-parser mail_test_12): strict UTF-8 is evidence
                    text = payload.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                self.defects.append(f"charset_mismatch: declared {charset}")
                return text
        self.defects.append(f"charset_mismatch: declared {charset}")
        guessed, guessed_codec = decode_text(payload)
        declared = payload.decode(candidates[-1], "replace")
        ours, theirs = dominant_script(declared), dominant_script(guessed)
        if ours and theirs and ours != theirs:
            self.defects.append(f"charset_script_mismatch: declared {charset} reads as {ours}, "
                                f"detected {guessed_codec} as {theirs}; kept the declared charset")
            return declared
        return guessed

    def text(self, part: Message, depth: int = 0) -> str:
        if depth > MAX_DEPTH or self.budget <= 0:
            return ""
        self.budget -= 1
        ctype = content_type(part)
        payload = part.get_payload()
        if isinstance(payload, list):
            subs = [p for p in payload[:MAX_PARTS] if isinstance(p, Message)]
            if ctype == "message/rfc822" and subs:
                inner = inner_message(part, subs[0])
                body = self.text(inner, depth + 1)
                return f"----- Attached message -----\n{header_block(inner)}\n\n{body}".strip()
            if ctype in ("message/delivery-status", "multipart/encrypted"):
                return ""
            if ctype == "multipart/alternative":
                types = [content_type(p) for p in subs]
                for wanted in ("text/plain", "text/html"):
                    found = self.text(subs[types.index(wanted)], depth + 1) if wanted in types else ""
                    if found.strip():
                        return found
                subs = [p for p, t in zip(subs, types, strict=True) if t.startswith("multipart/")][:1]
            texts = [self.text(p, depth + 1) for p in subs if not is_attachment(p)]
            return "\n\n".join(t for t in texts if t.strip())
        if is_attachment(part):
            return ""
        if ctype.startswith(("text/", "multipart/")) or ctype.endswith("/plain"):
            return self.decode(part)  # a multipart whose boundary is missing keeps its raw body
        return ""



def header_block(msg: Message, defects: list[str] | None = None) -> str:
    """The Subject/From/To/Cc/Date lines that open a mail's text (absent headers left out)."""
    sink: list[str] = [] if defects is None else defects
    lines = []
    for name in ("subject", "from", "to", "cc", "date"):
        if name in ("from", "to", "cc"):
            value = ", ".join(f"{a.name} <{a.address}>" if a.name else a.address for a in addresses(msg, name, sink))
        else:
            value = header_text(msg, name, sink) or ""
        if value:
            lines.append(f"{name.capitalize()}: {value}")
    return "\n".join(lines)



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

    S/MIME signed mail (:mod:`ki.adapters.convert.mail_smime`) is read as the message it signs; its signers are
    ``metadata["signature"]`` and ``metadata["signed"]`` says how (``s/mime opaque`` / ``s/mime detached``).
    """
    if not data.strip():
        raise UnsupportedDocument(f"{filename}: empty message ({len(data)} bytes)", reason="empty")
    data, whole_encoding, bom = prepare_bytes(data)
    defects: list[str] = []
    data = tame_mime_headers(data, defects)
    try:
        msg = parse_message(data)
    except (RecursionError, ValueError, IndexError) as exc:  # MemoryError: the worker's budget (too_large)
        raise UnsupportedDocument(f"{filename}: MIME parse failed: {exc}", reason="corrupt") from exc
    root_type = content_type(msg)
    scheme = encryption(msg)
    if scheme:
        raise UnsupportedDocument(
            f"{filename}: encrypted message ({scheme}, {root_type})",
            reason="encrypted",
            details={"content_type": root_type, "scheme": scheme},
        )
    signed = opaque_signed(data, msg)
    if signed is not None:  # S/MIME opaque signing: the signed message under this one's headers
        doc = convert_mail(signed[0], filename)
        doc.metadata.update(signature=signed[1], signed="s/mime opaque")
        return doc

    leaves = total = 0
    for part in iter_parts(msg, MAX_COUNTED_PARTS):
        total += 1
        leaves += is_leaf(part)
    attachments: list[str] = []
    for part in iter_parts(msg, MAX_PARTS):
        defects.extend(type(d).__name__ for d in part.defects)
        name = param(part, "filename")
        ctype = content_type(part)
        if name is not None or (disposition(part) == "attachment" and ctype != "message/rfc822"):
            attachments.append(name or f"(unnamed {ctype})")
    if total > MAX_PARTS:
        defects.append(f"parts: only the first {MAX_PARTS} of {total} MIME parts were examined")

    date, date_source = header_date(msg, defects)
    subject = header_text(msg, "subject", defects)
    senders = addresses(msg, "from", defects)
    meta = MailMeta(
        message_id=message_id(msg, defects),
        in_reply_to=next(iter(id_list(msg, "in-reply-to")), None),
        references=id_list(msg, "references"),
        subject=subject,
        sender=senders[0] if senders else None,
        to=addresses(msg, "to", defects),
        cc=addresses(msg, "cc", defects),
        bcc=addresses(msg, "bcc", defects),
        reply_to=addresses(msg, "reply-to", defects),
        date=date,
        content_type=root_type,
        attachments=attachments,
    )
    walker = BodyWalker(defects)
    body = normalise_newlines(walker.text(msg)).strip()
    meta.defects = [clean_text(d) for d in dict.fromkeys(defects)]
    return StructuredDocument(
        text=f"{header_block(msg)}\n\n{body}".strip() + "\n",
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
            **({"signature": signers, "signed": "s/mime detached"} if (signers := detached_signers(msg)) else {}),
        },
    )



def mime_body_document(data: bytes, filename: str) -> StructuredDocument:
    """The body text of a MIME document without a mail header block (MHT / MHTML, a DOCX's MHT altChunk).

    Returns ``StructuredDocument(format="mht", converter="ki.mail")``; ``title`` the Subject.
    Raises:
        UnsupportedDocument: ``empty`` (no bytes), ``corrupt`` (the parser fails), ``empty_text``.
    """
    if not data.strip():
        raise UnsupportedDocument(f"{filename}: empty", reason="empty")
    data, _, _ = prepare_bytes(data)
    defects: list[str] = []
    try:
        msg = parse_message(tame_mime_headers(data, defects))
    except (RecursionError, ValueError, IndexError) as exc:  # MemoryError: the worker's budget (too_large)
        raise UnsupportedDocument(f"{filename}: MIME parse failed: {exc}", reason="corrupt") from exc
    body = normalise_newlines(BodyWalker(defects).text(msg)).strip()
    if not body:
        raise UnsupportedDocument(f"{filename}: no text", reason="empty_text")
    return StructuredDocument(text=body + "\n", format="mht", converter=CONVERTER, converter_version=CONVERTER_VERSION,
                              title=header_text(msg, "subject", defects), warnings=defects)


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
