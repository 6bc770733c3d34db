"""Outlook ``.msg`` (CFB/OLE2 MAPI message) → RFC 822 → the mail path.

Uses python-oxmsg (MIT). The message is rebuilt as an RFC 822 message — transport
headers when Outlook kept them, else headers synthesised from MAPI properties
(``PR_INTERNET_MESSAGE_ID`` 0x1035, ``PR_IN_REPLY_TO_ID`` 0x1042) — with its
bodies and attachments, then converted by :func:`ki.adapters.convert.mail.convert_mail`,
so threading, participants and attachments behave exactly as for ``.eml``.
"""

from __future__ import annotations

import codecs
import io
import re
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime

from ki.adapters.convert.formats import CFB_MAGIC
from ki.adapters.convert.model import StructuredDocument, clean_text
from ki.core.errors import UnsupportedDocument

CONVERTER = "ki.msg"
CONVERTER_VERSION = "1"
PR_INTERNET_MESSAGE_ID = 0x1035
PR_IN_REPLY_TO_ID = 0x1042
PR_INTERNET_REFERENCES = 0x1039
PR_ATTACH_CONTENT_ID = 0x3712  # the cid: an HTML body references an inline image by
PR_ATTACHMENT_HIDDEN = 0x7FFE  # True for inline images Outlook does not list as attachments
_HEADER_SKIP = {"content-type", "content-transfer-encoding", "mime-version", "content-disposition"}
#: No line folding: ids and references must stay one token (a folded msg-id became an encoded word).
_POLICY = policy.default.clone(max_line_length=998)
_WINDOWS_CP = re.compile(r"^windows[-_]?(\d{3,4})$")


def _windows_codepage_alias(name: str) -> codecs.CodecInfo | None:
    """Let ``windows-950`` and friends (MAPI code page names) resolve to Python's ``cp950``."""
    match = _WINDOWS_CP.match(name.lower())
    if not match:
        return None
    try:
        return codecs.lookup(f"cp{match.group(1)}")
    except LookupError:
        return None


codecs.register(_windows_codepage_alias)


def _load(data: bytes, filename: str):
    from oxmsg import Message

    if not data:
        raise UnsupportedDocument(f"{filename}: empty file", reason="empty")
    if not data.startswith(CFB_MAGIC):
        raise UnsupportedDocument(f"{filename}: not an Outlook message (no OLE2 header)", reason="corrupt")
    try:
        return Message.load(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - any parser failure means the container is unreadable
        raise UnsupportedDocument(f"{filename}: Outlook message unreadable ({exc})", reason="corrupt") from exc


def _str_prop(msg, prop_id: int) -> str | None:
    try:
        value = msg.properties.str_prop_value(prop_id)
    except Exception:  # noqa: BLE001 - a missing or malformed property counts as absent
        return None
    return clean_text(value).strip("\x00 \r\n") or None if value else None


def _attach_str(att, prop_id: int) -> str | None:
    try:
        value = att.properties.str_prop_value(prop_id)
    except Exception:  # noqa: BLE001 - a missing or malformed property counts as absent
        return None
    value = clean_text(value or "").strip("\x00 \r\n<>")
    return value if value and "\n" not in value else None


def _attach_int(att, prop_id: int) -> bool:
    try:
        return bool(att.properties.int_prop_value(prop_id))
    except Exception:  # noqa: BLE001
        return False


def msg_to_rfc822(data: bytes, filename: str) -> bytes:
    """Rebuild an Outlook message as RFC 822 bytes (headers, plain + HTML body, attachments).

    An attachment with a content id (``PR_ATTACH_CONTENT_ID``) keeps it as ``Content-ID``, and is
    ``inline`` when Outlook hides it (``PR_ATTACHMENT_HIDDEN``: an image of the HTML body).

    Raises:
        UnsupportedDocument: ``empty`` / ``corrupt`` when the container cannot be read.
    """
    msg = _load(data, filename)
    out = EmailMessage(policy=_POLICY)
    kept = {}
    for name, value in (msg.message_headers or {}).items():
        if name.lower() not in _HEADER_SKIP and isinstance(value, str):
            kept[name.lower()] = value
            try:
                out[name] = clean_text(value).replace("\r", " ").replace("\n", " ")
            except (ValueError, TypeError):
                continue
    subject = clean_text(msg.subject or "").strip("\x00")
    if "subject" not in kept and subject:
        out["Subject"] = subject
    if "from" not in kept and msg.sender:
        out["From"] = clean_text(str(msg.sender))
    if "to" not in kept:
        recipients = [r for r in msg.recipients if getattr(r, "email_address", None)]
        if recipients:
            out["To"] = ", ".join(f'"{r.name or ""}" <{r.email_address}>' for r in recipients)
    if "date" not in kept and msg.sent_date is not None:
        out["Date"] = format_datetime(msg.sent_date)
    for header, prop in (("Message-ID", PR_INTERNET_MESSAGE_ID), ("In-Reply-To", PR_IN_REPLY_TO_ID),
                         ("References", PR_INTERNET_REFERENCES)):
        if header.lower() not in kept:
            value = _str_prop(msg, prop)
            if value:
                out[header] = value
    out["X-Ki-Message-Class"] = clean_text(msg.message_class or "").strip("\x00 ")
    body = clean_text(msg.body or "")
    html = msg.html_body
    if isinstance(html, bytes):
        html = html.decode("utf-8", "replace")
    html = clean_text(html or "")
    if html and (not body.strip() or len(body) < len(html) // 20):
        out.set_content(body or " ")
        out.add_alternative(html, subtype="html")
    else:
        out.set_content(body or "")
    for index, att in enumerate(msg.attachments):
        payload = att.file_bytes or b""
        if not payload:
            continue
        name = clean_text(att.file_name or f"attachment-{index + 1}.bin")
        maintype, _, subtype = (att.mime_type or "application/octet-stream").partition("/")
        cid = _attach_str(att, PR_ATTACH_CONTENT_ID)
        hidden = _attach_int(att, PR_ATTACHMENT_HIDDEN)
        out.add_attachment(payload, maintype=maintype or "application", subtype=subtype or "octet-stream",
                           filename=name, disposition="inline" if cid and hidden else "attachment",
                           cid=f"<{cid}>" if cid else None)
    return out.as_bytes(policy=_POLICY)


def mail_bytes(data: bytes, filename: str) -> tuple[bytes, list | None]:
    """The message as RFC 822 bytes, and for an S/MIME signed ``.msg`` (class ``IPM.Note.SMIME…``) its signers.

    A signed ``.msg`` keeps the signed MIME entity in its ``smime.p7m`` attachment: that entity, under the
    message's headers, is the mail (:func:`ki.adapters.convert.mail_smime.msg_signed_entity`). Signers are None for a
    message that is not signed that way.

    Raises:
        UnsupportedDocument: ``empty`` / ``corrupt`` (unreadable container), ``encrypted`` (an S/MIME
            message whose attachment is enveloped data).
    """
    from ki.adapters.convert.mail_smime import msg_signed_entity

    rfc822 = msg_to_rfc822(data, filename)
    msg = _load(data, filename)
    if "smime" not in (msg.message_class or "").lower():
        return rfc822, None
    found = msg_signed_entity(rfc822, [(a.file_name or "", a.mime_type or "", a.file_bytes or b"")
                                       for a in msg.attachments])
    return found if found is not None else (rfc822, None)


def convert_msg(data: bytes, filename: str) -> StructuredDocument:
    """Convert an Outlook ``.msg`` through the mail path (format ``msg``, converter ``ki.msg``).

    ``metadata["message_class"]`` keeps the MAPI class (``IPM.Note``, ``IPM.Appointment``...).

    Raises:
        UnsupportedDocument: ``empty`` / ``corrupt`` for an unreadable container; ``encrypted``
            when the message carries a PGP/S-MIME payload instead of a body.
    """
    from ki.adapters.convert.mail import convert_mail

    msg = _load(data, filename)
    rfc822, signers = mail_bytes(data, filename)
    att_types = [(a.file_name or "").lower() for a in msg.attachments] + [
        (a.mime_type or "").lower() for a in msg.attachments]
    if signers is None and not (msg.body or "").strip() and any(
            "pgp-encrypted" in t or "pkcs7-mime" in t for t in att_types):
        raise UnsupportedDocument(f"{filename}: encrypted message (PGP/S-MIME payload, no readable body)",
                                  reason="encrypted",
                                  details={"attachments": [a.file_name for a in msg.attachments]})
    doc = convert_mail(rfc822, filename)
    if signers is not None:
        doc.metadata.setdefault("signature", signers)
        doc.metadata.setdefault("signed", "s/mime")
    doc.format = "msg"
    doc.converter = CONVERTER
    doc.converter_version = CONVERTER_VERSION
    doc.metadata["message_class"] = clean_text(msg.message_class or "").strip("\x00 ")
    doc.metadata["attachment_count"] = len(msg.attachments)
    names = [clean_text(a.file_name) if a.file_name else "(embedded message)" for a in msg.attachments]
    if doc.mail is not None:
        doc.mail.attachments = names
    return doc
