"""S/MIME signed mail: the signed message read as the mail it is, its signers recorded.

Spec: RFC 8551 section 3.5 (signed messages): *opaque* signing puts the whole MIME entity inside a CMS
signed-data structure (``application/pkcs7-mime; smime-type=signed-data``, ``smime.p7m``); *clear* signing
(``multipart/signed``) keeps the entity readable as the first part and adds a detached signature
(``application/pkcs7-signature``, ``smime.p7s``). Either way ki reads the signed entity under the mail's own
headers (Subject, From, To, Date …) and records the signers (:func:`ki.adapters.convert.smime.unwrap_signed`) as
``metadata["signature"]``. Outlook saves such a mail as a ``.msg`` of class ``IPM.Note.SMIME`` /
``IPM.Note.SMIME.MultipartSigned`` whose only attachment, ``smime.p7m``, holds the entity: read the same way.
Enveloped (encrypted) content stays ``encrypted``.
"""

from __future__ import annotations

import re
from email.message import Message
from typing import Any

from ki.adapters.convert import mime_parts as mp
from ki.adapters.convert.smime import looks_like_cms, signers_of, unwrap_signed

PKCS7_MIME = frozenset({"application/pkcs7-mime", "application/x-pkcs7-mime"})
PKCS7_SIGNATURE = frozenset({"application/pkcs7-signature", "application/x-pkcs7-signature"})
_HEADER_END = re.compile(rb"\r?\n\r?\n")
_HEADER_LINE = re.compile(rb"^[!-9;-~]+[ \t]*:")


def _outer_headers(data: bytes) -> bytes:
    """The message's header block without its Content-* and MIME-Version fields (continuations included),
    ending in one line break."""
    match = _HEADER_END.search(data)
    block = data[: match.start()] if match else data
    kept: list[bytes] = []
    skip = False
    for line in block.splitlines():
        if line[:1] in (b" ", b"\t"):
            if not skip:
                kept.append(line)
            continue
        name = line.split(b":", 1)[0].strip().lower()
        skip = name.startswith(b"content-") or name == b"mime-version"
        if not skip:
            kept.append(line)
    return b"\r\n".join(kept) + b"\r\n"


def graft(message: bytes, entity: bytes) -> bytes:
    """``entity`` (a MIME entity: its own Content-* headers, a blank line, its body) under the headers of
    ``message``; an entity without headers becomes the text body."""
    entity = entity.lstrip(b"\r\n")
    first = entity.split(b"\n", 1)[0]
    if not _HEADER_LINE.match(first):
        entity = b"Content-Type: text/plain\r\n\r\n" + entity
    return _outer_headers(message) + b"MIME-Version: 1.0\r\n" + entity


def _payload(part: Message) -> bytes:
    try:
        return part.get_payload(decode=True) or b""
    except Exception:  # noqa: BLE001 - an undecodable payload holds nothing
        return b""


def opaque_signed(data: bytes, msg: Message) -> tuple[bytes, list[dict[str, Any]]] | None:
    """For an opaque-signed message (its root is ``application/pkcs7-mime`` holding signed data): the signed
    entity grafted under the message's headers, and the signers. None for any other message.

    Raises:
        UnsupportedDocument: ``encrypted`` when the root holds enveloped data; ``corrupt`` for an unreadable
            CMS structure.
    """
    if mp.content_type(msg) not in PKCS7_MIME:
        return None
    unwrapped = unwrap_signed(_payload(msg), "smime.p7m")
    if not unwrapped.content:
        return None
    return graft(data, unwrapped.content), unwrapped.signers


def detached_signers(msg: Message) -> list[dict[str, Any]]:
    """The signers of a clear-signed (``multipart/signed``) message's detached signature; [] otherwise."""
    if mp.content_type(msg) != "multipart/signed":
        return []
    payload = msg.get_payload()
    for part in payload if isinstance(payload, list) else []:
        if isinstance(part, Message) and mp.content_type(part) in PKCS7_SIGNATURE:
            return signers_of(_payload(part))
    return []


def msg_signed_entity(rfc822: bytes, attachments: list[tuple[str, str, bytes]]) -> tuple[bytes, list] | None:
    """For an Outlook S/MIME ``.msg`` (rebuilt as ``rfc822``; its attachments as ``(name, mime type, bytes)``):
    the signed entity under the message's headers and its signers, from an ``smime.p7m`` attachment that is
    a clear-signed MIME entity or opaque signed data. None when there is no such attachment.

    Raises:
        UnsupportedDocument: ``encrypted`` when the attachment is enveloped data.
    """
    for name, mime, blob in attachments:
        if not (name.lower().endswith(".p7m") or "pkcs7" in mime.lower() or "multipart/signed" in mime.lower()):
            continue
        if looks_like_cms(blob[:64]):
            unwrapped = unwrap_signed(blob, name)
            if unwrapped.content:
                return graft(rfc822, unwrapped.content), unwrapped.signers
            continue
        entity = graft(rfc822, blob)
        try:
            parsed = mp.parse_message(mp.tame_mime_headers(entity, []))
        except (RecursionError, ValueError, IndexError):
            continue
        if mp.content_type(parsed) == "multipart/signed":
            return entity, detached_signers(parsed)
    return None

