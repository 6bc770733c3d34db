"""Documents inside documents: mail attachments and the messages of an mbox.

Spec: issue "Parse stage at full breadth" item 2 — each attachment of an
``.eml``/``.msg`` becomes a document of its own (converted, indexed, with the
permissions of its mail) linked to its mail, so a PDF sent by e-mail is
findable; an mbox is split into its messages. The convert stage registers what
:func:`extract_embedded` returns as child source objects (``parent_id``).
"""

from __future__ import annotations

from dataclasses import dataclass
from email import policy
from email.parser import BytesParser

from ki.convert.model import StructuredDocument

#: At most this many embedded objects per container; more are reported as a warning.
MAX_EMBEDDED = 200

#: MIME types that are never documents: signatures and key material.
NON_DOCUMENT_TYPES = frozenset({
    "application/pkcs7-signature", "application/x-pkcs7-signature", "application/pgp-signature",
    "application/pgp-keys", "application/ms-tnef", "text/x-vcard", "text/vcard",
})


@dataclass(frozen=True)
class EmbeddedPart:
    """One embedded file: its position in the container, a file name, a MIME type, its bytes."""

    index: int
    name: str
    content_type: str
    data: bytes


def _safe_name(name: str, index: int, default_ext: str) -> str:
    name = name.replace("/", "_").replace("\\", "_").replace("#", "_").strip() or f"part-{index}{default_ext}"
    return name[:200]


def mail_attachments(data: bytes, filename: str) -> list[EmbeddedPart]:
    """The attachments of an RFC 822 message, in MIME order (attached messages are read inline).

    Not documents, so skipped: parts without a decodable payload, signatures and key
    material (:data:`NON_DOCUMENT_TYPES`), and inline body parts referenced by Content-ID.
    Bounded by the mail converter's part budget.
    """
    from ki.convert import mail as m

    prepared, _, _ = m._prepare(data)
    prepared = m._tame_mime_headers(prepared, [])
    try:
        msg = BytesParser(policy=policy.compat32).parsebytes(prepared)
    except (RecursionError, MemoryError, ValueError, IndexError):
        return []
    if m._encryption(msg):
        return []
    out: list[EmbeddedPart] = []
    for part in m._iter_parts(msg, m.MAX_PARTS):
        if part is msg or not m._is_leaf(part) or not m._is_attachment(part):
            continue
        try:
            payload = part.get_payload(decode=True)
        except Exception:  # noqa: BLE001 - an undecodable part is not an attachment we can keep
            continue
        if not payload:
            continue
        ctype = m._content_type(part)
        if ctype in NON_DOCUMENT_TYPES:
            continue
        if part.get("content-id") and m._disposition(part) != "attachment":
            continue  # an inline part of an HTML body (logo, signature image), not an attachment
        index = len(out)
        out.append(EmbeddedPart(index, _safe_name(m._param(part, "filename") or "", index, ".bin"), ctype, payload))
        if len(out) >= MAX_EMBEDDED:
            break
    return out


def mbox_messages(data: bytes, filename: str) -> list[EmbeddedPart]:
    """The messages of an mbox file as ``message-NNNN.eml`` parts."""
    from ki.convert.mail import split_mbox

    return [
        EmbeddedPart(i, f"message-{i + 1:04d}.eml", "message/rfc822", raw)
        for i, raw in enumerate(split_mbox(data)[:MAX_EMBEDDED])
    ]


def extract_embedded(fmt: str, data: bytes, filename: str) -> list[EmbeddedPart]:
    """Embedded objects of a container of format ``fmt`` (``eml``, ``msg``, ``mbox``); [] for others."""
    if fmt == "eml":
        return mail_attachments(data, filename)
    if fmt == "mbox":
        return mbox_messages(data, filename)
    if fmt == "msg":
        from ki.convert.msg import msg_to_rfc822

        return mail_attachments(msg_to_rfc822(data, filename), filename)
    return []


def convert_mbox(data: bytes, filename: str) -> StructuredDocument:
    """The mbox container itself: a table of contents (one line per message: date, sender, subject).

    Each message is converted as its own document (see :func:`mbox_messages`).

    Raises:
        UnsupportedDocument: ``empty`` when the file holds no message.
    """
    from ki.convert.mail import convert_mail
    from ki.errors import UnsupportedDocument

    messages = mbox_messages(data, filename)
    if not messages:
        raise UnsupportedDocument(f"{filename}: no message in this mbox", reason="empty")
    lines = []
    for part in messages:
        try:
            doc = convert_mail(part.data, part.name)
        except UnsupportedDocument as exc:
            lines.append(f"{part.name}: ({exc.reason})")
            continue
        meta = doc.mail
        sender = meta.sender.address if meta and meta.sender else ""
        date = meta.date.isoformat() if meta and meta.date else ""
        lines.append(f"{part.name}: {date} {sender} {doc.title or ''}".strip())
    return StructuredDocument(
        text="\n".join(lines) + "\n",
        format="mbox",
        converter="ki.mbox",
        converter_version="1",
        title=filename,
        metadata={"messages": len(messages)},
    )
