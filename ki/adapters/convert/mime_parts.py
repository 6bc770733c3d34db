"""MIME parts of a parsed message: types, parameters, dispositions, bounded traversal, encryption.

Every reader takes the *raw* header (bounded) so a hostile part cannot make the structured
parser slow; traversal is iterative and capped (:data:`MAX_PARTS` parts, :data:`MAX_DEPTH` deep).
Also the two byte-level preparations every parse of a mail goes through: whole-file UTF-16/32
decoding and taming oversized Content-Type/-Disposition headers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from email import policy
from email.message import Message
from email.parser import BytesParser

from ki.adapters.convert.mail_headers import MAX_HEADER_CHARS, MAX_RAW_HEADER_CHARS, decode_encoded_words, first_raw
from ki.adapters.convert.model import clean_text
from ki.adapters.convert.text import fix_surrogates, sniff_bom, sniff_wide

MAX_PARTS = 500  # MIME parts examined for text, attachments and defects
MAX_DEPTH = 60  # nesting depth followed

_MIME_TYPE = re.compile(r"\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)/([!#$%&'*+.^_`|~0-9A-Za-z-]+)")
# Content-Type/-Disposition lines anywhere (the parser reads every part's Content-Type while parsing).
_MIME_HEADER = re.compile(rb"(?im)^(content-(?:type|disposition))[ \t]*:([^\n]*(?:\n[ \t][^\n]*)*)")
_KEPT_PARAM = re.compile(
    rb'(?i)(?:^|;)\s*((?:boundary|charset|name|filename|smime-type|protocol)\*?\s*=\s*(?:"[^"]{0,300}"?|[^;\s]{0,300}))'
)
#: The parse policy: ``compat32``, because ``policy.default`` parses every part's Content-Type through
#: the header registry while parsing (18 s instead of 1.3 s for a 3,000-part bomb); ki reads raw headers.
PARSE_POLICY = policy.compat32


def content_type(part: Message) -> str:
    """``maintype/subtype`` from the raw header (bounded); the RFC 2045 default when absent or invalid."""
    raw = first_raw(part, "content-type")
    match = _MIME_TYPE.match(raw[:1000]) if raw is not None else None
    return f"{match.group(1)}/{match.group(2)}".lower() if match else part.get_default_type()


def _structured_params(part: Message, header: str) -> dict[str, str]:
    """The parameters of a Content-Type/-Disposition header as ``policy.default`` decodes them (RFC 2231,
    encoded words, raw 8-bit bytes), read from the raw value; {} when absent or malformed."""
    raw = first_raw(part, header)
    if raw is None:
        return {}
    try:
        return dict(policy.default.header_fetch_parse(header, raw).params)
    except Exception:  # noqa: BLE001 - a malformed parameter list counts as absent
        return {}


def param(part: Message, name: str) -> str | None:
    """A Content-Type parameter, or ``filename`` (Content-Disposition ``filename``, else Content-Type
    ``name``, as ``get_filename()``); lowercased except a filename; None when absent or malformed.

    The structured parser only sees headers of bounded length.
    """
    if any(len(v) > MAX_HEADER_CHARS for k, v in part.raw_items() if k.lower().startswith("content-")):
        return None
    if name == "filename":
        value = _structured_params(part, "content-disposition").get("filename") or _structured_params(
            part, "content-type").get("name")
    else:
        value = _structured_params(part, "content-type").get(name)
    if not value:
        return None
    value = fix_surrogates(str(value))
    if name != "filename":
        return value.strip().lower()
    return clean_text(decode_encoded_words(value) if "=?" in value else value).strip()[:1000] or None


def disposition(part: Message) -> str | None:
    """The Content-Disposition type (``inline``, ``attachment``), lowercase; None when absent."""
    raw = first_raw(part, "content-disposition")
    return raw.split(";", 1)[0].strip().lower() if raw else None


def iter_parts(msg: Message, limit: int) -> Iterator[Message]:
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


def is_leaf(part: Message) -> bool:
    return not isinstance(part.get_payload(), list) and not content_type(part).startswith("multipart/")


def is_attachment(part: Message) -> bool:
    if content_type(part) == "message/rfc822":
        return False  # an attached mail is text: it is read inline
    return disposition(part) == "attachment" or param(part, "filename") is not None


def inner_message(part: Message, inner: Message) -> Message:
    """The enclosed message, re-parsed when the sender base64/QP-encoded message/rfc822 (GroupWise)."""
    cte = (first_raw(part, "content-transfer-encoding") or "").strip().lower()
    payload = inner.get_payload()
    if cte not in ("base64", "quoted-printable") or not isinstance(payload, str):
        return inner
    wrapper = Message()
    wrapper["Content-Transfer-Encoding"] = cte
    try:
        wrapper.set_payload(inner.as_string(policy=policy.compat32) if len(inner) else payload)
        decoded = wrapper.get_payload(decode=True)
        return BytesParser(policy=policy.compat32).parsebytes(tame_mime_headers(decoded, [])) if decoded else inner
    except (RecursionError, ValueError, IndexError, LookupError):
        return inner


def encryption(msg: Message) -> str | None:
    """``pgp/mime``, ``s/mime`` or ``pgp/inline`` when the readable content is encrypted, else None.

    An ``application/pkcs7-mime`` part is encrypted when its ``smime-type`` says enveloped data, or when it
    has none, is named ``.p7m`` and its bytes are not CMS signed data (opaque-signed mail is readable:
    :mod:`ki.adapters.convert.mail_smime`)."""
    payload = msg.get_payload()
    candidates = [msg]
    if content_type(msg) == "multipart/signed" and isinstance(payload, list) and payload:
        candidates.append(payload[0])
    for part in candidates:
        ctype = content_type(part)
        if ctype == "multipart/encrypted":
            return "pgp/mime"
        if ctype in ("application/pkcs7-mime", "application/x-pkcs7-mime"):
            smime_type = param(part, "smime-type")
            if smime_type in ("enveloped-data", "authenveloped-data") or (
                smime_type is None and (param(part, "filename") or "").lower().endswith(".p7m")
                and not _signed_data(part)
            ):
                return "s/mime"
    if isinstance(payload, str) and content_type(msg) == "text/plain":
        if payload[:4096].lstrip().startswith("-----BEGIN PGP MESSAGE-----"):
            return "pgp/inline"
    return None


def _signed_data(part: Message) -> bool:
    """Whether a ``.p7m`` part without ``smime-type`` holds CMS signed data (readable), not enveloped data."""
    from ki.adapters.convert.smime import SIGNED_DATA_OID_DER, der_bytes

    try:
        blob = part.get_payload(decode=True) or b""
    except Exception:  # noqa: BLE001 - an undecodable payload is not readable signed data
        return False
    return SIGNED_DATA_OID_DER in der_bytes(blob)[:24]


def tame_mime_headers(data: bytes, defects: list[str]) -> bytes:
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


def prepare_bytes(data: bytes) -> tuple[bytes, str | None, str | None]:
    """Decode whole-file UTF-16/32, drop a UTF-8 BOM: ``(bytes to parse, whole-file codec, BOM codec)``."""
    bom = sniff_bom(data)
    codec = bom[0] if bom else sniff_wide(data)
    if codec is None:
        return data, None, None
    body = data[bom[1] :] if bom else data
    if codec == "utf-8":
        return body, None, codec
    return body[: len(body) // 2 * 2].decode(codec, "replace").encode("utf-8"), codec, bom[0] if bom else None


def parse_message(data: bytes) -> Message:
    """Parse RFC 822 bytes (already prepared) with :data:`PARSE_POLICY` (may raise as the stdlib parser)."""
    return BytesParser(policy=PARSE_POLICY).parsebytes(data)
