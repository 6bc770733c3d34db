"""Documents inside documents: mail attachments, mbox messages, OOXML embedded objects, PDF attachments.

Spec: insertion-pipeline.md "Parse (convert)" (embedded documents) — each attachment of an
``.eml``/``.msg``, each message of an mbox, each document embedded in a DOCX/PPTX/XLSX
(``*/embeddings``: a PDF, DOCX, XLSX, text file or OLE package) and each file attached to a PDF
becomes a document of its own (converted, indexed, with the permissions of its container) linked
to its container: the convert stage registers what :func:`extract_embedded` returns as child
source objects (``parent_id``, :mod:`ki.adapters.sources.children`).

Inline mail images stay with their mail: an image the mail's HTML references
by ``cid:``, an inline part with a Content-ID, or an image too small or too thin to hold text
(:mod:`ki.adapters.convert.image_floor`) is part of the mail's rendering, not a document — logos, spacers
and tracking pixels would otherwise be OCR'd and quarantined as ``empty_text``.
"""

from __future__ import annotations

import mimetypes
import re
from dataclasses import dataclass
from email.message import Message

from ki.adapters.convert.model import StructuredDocument
from ki.core.errors import UnsupportedDocument

#: At most this many embedded objects per container; more are reported as a warning.
MAX_EMBEDDED = 200
#: Containers nested deeper than this (a DOCX in a DOCX in a mail …) do not register children:
#: a file that embeds copies of itself must not multiply without end.
MAX_NESTING = 4
#: How a child's path names its container (``mail.eml » report.pdf``; ki.adapters.sources.children).
NESTING_SEP = " » "

#: Formats (``StructuredDocument.format``) whose documents may contain other documents.
CONTAINER_FORMATS = frozenset({"eml", "mbox", "msg", "docx", "pptx", "xlsx", "pdf", "zip", "tnef"})

#: MIME types that are never documents: signatures and key material.
NON_DOCUMENT_TYPES = frozenset({
    "application/pkcs7-signature", "application/x-pkcs7-signature", "application/pgp-signature",
    "application/pgp-keys", "text/x-vcard", "text/vcard",
})

_CID = re.compile(r"""cid:([^"'\s<>)]+)""", re.IGNORECASE)


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


def _cids(msg: Message) -> set[str]:
    """Content-IDs the message's HTML parts reference (``cid:…``), lowercase, without angle brackets."""
    from ki.adapters.convert import mime_parts as mp

    found: set[str] = set()
    for part in mp.iter_parts(msg, mp.MAX_PARTS):
        if mp.is_leaf(part) and mp.content_type(part) == "text/html":
            try:
                payload = part.get_payload(decode=True) or b""
            except Exception:  # noqa: BLE001 - an undecodable body references nothing
                continue
            found.update(m.lower() for m in _CID.findall(payload.decode("latin-1")))
    return found


def inline_image_reason(part: Message, payload: bytes, ctype: str, referenced: set[str]) -> str | None:
    """Why an image part stays with its mail (``cid_referenced``, ``inline``, ``too_small``,
    ``degenerate_aspect``), or None when it is a document of its own."""
    from ki.adapters.convert import mime_parts as mp
    from ki.adapters.convert.formats import image_kind
    from ki.adapters.convert.image_floor import image_size, ocr_skip_reason

    if not ctype.startswith("image/") and image_kind(payload[:16]) is None:
        return None
    cid = (part.get("content-id") or "").strip().strip("<>").lower()
    if cid and cid in referenced:
        return "cid_referenced"
    if cid and mp.disposition(part) != "attachment":
        return "inline"
    size = image_size(payload)
    return ocr_skip_reason(*size) if size else None


def mail_attachments(data: bytes, filename: str) -> list[EmbeddedPart]:
    """The attachments of an RFC 822 message, in MIME order (attached messages are read inline).

    A ``winmail.dat`` (``application/ms-tnef``) part stands for what it wraps: its RTF body as
    ``message.rtf`` and its attachments (:func:`ki.adapters.convert.tnef.tnef_parts`). An S/MIME opaque-signed
    message's attachments are those of the message it signs.

    Not documents, so skipped: parts without a decodable payload, signatures and key material
    (:data:`NON_DOCUMENT_TYPES`), and inline images (:func:`inline_image_reason`). Bounded by the
    mail converter's part budget.
    """
    from ki.adapters.convert import mime_parts as mp
    from ki.adapters.convert.tnef import is_tnef, tnef_parts

    prepared, _, _ = mp.prepare_bytes(data)
    try:
        msg = mp.parse_message(mp.tame_mime_headers(prepared, []))
    except (RecursionError, MemoryError, ValueError, IndexError):
        return []
    if mp.encryption(msg):
        return []
    from ki.adapters.convert.mail_smime import opaque_signed

    try:
        signed = opaque_signed(prepared, msg)
    except UnsupportedDocument:
        return []
    if signed is not None:  # S/MIME opaque signing: the signed message's attachments
        return mail_attachments(signed[0], filename)
    referenced = _cids(msg)
    out: list[EmbeddedPart] = []
    for part in mp.iter_parts(msg, mp.MAX_PARTS):
        if part is msg or not mp.is_leaf(part) or not mp.is_attachment(part):
            continue
        try:
            payload = part.get_payload(decode=True)
        except Exception:  # noqa: BLE001 - an undecodable part is not an attachment we can keep
            continue
        if not payload:
            continue
        ctype = mp.content_type(part)
        if ctype in NON_DOCUMENT_TYPES:
            continue
        if part.get("content-id") and mp.disposition(part) != "attachment":
            continue  # an inline part of an HTML body (logo, signature image), not an attachment
        if inline_image_reason(part, payload, ctype, referenced):
            continue
        if ctype == "application/ms-tnef" or is_tnef(payload):  # winmail.dat: the attachments it wraps
            out.extend(_typed(len(out), name, blob) for name, blob in tnef_parts(payload, "winmail.dat"))
            continue
        index = len(out)
        out.append(EmbeddedPart(index, _safe_name(mp.param(part, "filename") or "", index, ".bin"), ctype, payload))
        if len(out) >= MAX_EMBEDDED:
            break
    return out


def mbox_messages(data: bytes, filename: str) -> list[EmbeddedPart]:
    """The messages of an mbox file as ``message-NNNN.eml`` parts."""
    from ki.adapters.convert.mail import split_mbox

    return [
        EmbeddedPart(i, f"message-{i + 1:04d}.eml", "message/rfc822", raw)
        for i, raw in enumerate(split_mbox(data)[:MAX_EMBEDDED])
    ]


def _typed(index: int, name: str, data: bytes) -> EmbeddedPart:
    name = _safe_name(name, index, ".bin")
    return EmbeddedPart(index, name, mimetypes.guess_type(name)[0] or "application/octet-stream", data)


def ooxml_objects(data: bytes, filename: str) -> list[EmbeddedPart]:
    """The documents embedded in a DOCX/PPTX/XLSX package
    (:func:`ki.adapters.convert.ooxml_embedded.embedded_files`)."""
    from ki.adapters.convert.formats import ZIP_MAGIC
    from ki.adapters.convert.ooxml_embedded import embedded_files
    from ki.adapters.convert.ooxml_package import OoxmlPackage

    if not data.startswith(ZIP_MAGIC):
        return []
    try:
        files = embedded_files(OoxmlPackage(data, filename))
    except UnsupportedDocument:
        return []
    return [_typed(i, name, blob) for i, (name, blob) in enumerate(files[:MAX_EMBEDDED])]


def pdf_attachments(data: bytes, filename: str) -> list[EmbeddedPart]:
    """The files attached to a PDF (its ``EmbeddedFiles`` name tree, as PDFium lists them)."""
    import pypdfium2 as pdfium

    from ki.adapters.convert.pdf_open import PDFIUM_LOCK, open_pdf, pdf_body

    try:
        body, _ = pdf_body(data, filename)
    except UnsupportedDocument:
        return []
    out: list[EmbeddedPart] = []
    with PDFIUM_LOCK:
        try:
            pdf = open_pdf(body, filename)
        except UnsupportedDocument:
            return []
        try:
            for i in range(min(pdf.count_attachments(), MAX_EMBEDDED)):
                try:
                    attachment = pdf.get_attachment(i)
                    name, blob = attachment.get_name(), bytes(attachment.get_data())
                except (pdfium.PdfiumError, ValueError):
                    continue
                if blob:
                    out.append(_typed(len(out), name or f"attachment-{i + 1}.bin", blob))
        finally:
            pdf.close()
    return out


def archive_members(data: bytes, filename: str) -> list[EmbeddedPart]:
    """The accepted members of a zip archive, named by their path inside it (:mod:`ki.adapters.convert.archive`;
    refused members are listed by the archive's own document)."""
    from ki.adapters.convert.archive import read_members

    try:
        members, _ = read_members(data, filename)
    except UnsupportedDocument:
        return []
    out: list[EmbeddedPart] = []
    for m in members:
        if m.data is not None and len(out) < MAX_EMBEDDED:
            ctype = mimetypes.guess_type(m.path)[0] or "application/octet-stream"
            out.append(EmbeddedPart(len(out), m.path[:400], ctype, m.data))
    return out


def _unsigned(data: bytes, filename: str) -> tuple[bytes, str]:
    """A CMS signed-data file (``.p7m``) as the file it wraps, with that file's name; else as given."""
    from ki.adapters.convert.smime import inner_name, looks_like_cms, unwrap_signed

    if not looks_like_cms(data[:64]):
        return data, filename
    try:
        content = unwrap_signed(data, filename).content
    except UnsupportedDocument:
        return data, filename
    return (content, inner_name(filename)) if content else (data, filename)


def extract_embedded(fmt: str, data: bytes, filename: str) -> list[EmbeddedPart]:
    """Embedded documents of a container of format ``fmt``: ``eml``, ``msg``, ``mbox``, ``docx``/``pptx``/
    ``xlsx`` (or the router's ``office``), ``pdf``, ``zip``, ``tnef``; [] for others and for unreadable
    containers. A signed ``.p7m`` is read as the container it wraps."""
    if fmt == "p7m":
        from ki.adapters.convert.formats import sniff_format

        data, filename = _unsigned(data, filename)
        fmt = sniff_format(data, filename)
    data, filename = _unsigned(data, filename)
    if fmt == "eml":
        return mail_attachments(data, filename)
    if fmt == "mbox":
        return mbox_messages(data, filename)
    if fmt == "zip":
        return archive_members(data, filename)
    if fmt == "tnef":
        from ki.adapters.convert.tnef import tnef_parts

        return [_typed(i, name, blob) for i, (name, blob) in enumerate(tnef_parts(data, filename, body=False))]
    if fmt == "msg":
        from ki.adapters.convert.msg import mail_bytes

        try:
            return mail_attachments(mail_bytes(data, filename)[0], filename)
        except UnsupportedDocument:
            return []
    if fmt in ("docx", "pptx", "xlsx", "office"):
        return ooxml_objects(data, filename)
    if fmt == "pdf":
        return pdf_attachments(data, filename)
    return []


def may_embed(body: dict, path: str = "") -> bool:
    """Whether a ``structured_json`` body may have embedded documents worth extracting.

    False for a container format whose converter counted none (a PDF without attached files, a
    DOCX without embedded objects), so the convert stage need not read the blob again, and for a
    container :data:`MAX_NESTING` levels deep (``path`` is the object's path).
    """
    fmt = body.get("format")
    if fmt not in CONTAINER_FORMATS or path.count(NESTING_SEP) >= MAX_NESTING:
        return False
    metadata = body.get("metadata") or {}
    counted = {"pdf": "embedded_files", "docx": "embedded_objects", "xlsx": "embedded_objects",
               "pptx": "embedded_objects"}.get(fmt)
    return counted is None or metadata.get(counted) is None or bool(metadata[counted])


def convert_mbox(data: bytes, filename: str) -> StructuredDocument:
    """The mbox container itself: a table of contents (one line per message: date, sender, subject).

    Each message is converted as its own document (see :func:`mbox_messages`).

    Raises:
        UnsupportedDocument: ``empty`` when the file holds no message.
    """
    from ki.adapters.convert.mail import convert_mail

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
