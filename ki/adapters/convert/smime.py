"""CMS / PKCS #7 (S/MIME, ``.p7m``): the signed content unwrapped, the signature recorded, enveloped data refused.

Spec: RFC 5652 (CMS) and RFC 8551 (S/MIME 4.0). Read with asn1crypto (MIT). A *signed-data* structure
carries the content it signs (opaque signing: ``smime.p7m``, an e-invoice ``rechnung.xml.p7m``, a signed PDF
``.pdf.p7m``); ki reads that content as the file it is and records each signer — the certificate's subject
(common name, e-mail address), its issuer and serial number, and the signed ``signingTime`` attribute — as
``metadata["signature"]``. The signature is *not* verified (no trust store here): the record says who signed,
not that the signature is valid. *Enveloped* (encrypted) data cannot be read without the recipient's key:
``encrypted``.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from ki.adapters.convert.formats import CMS_SIGNED_OID
from ki.core.errors import UnsupportedDocument

#: CMS content types (RFC 5652 section 14).
SIGNED_DATA = "signed_data"
ENVELOPED_TYPES = frozenset({"enveloped_data", "authenticated_enveloped_data", "encrypted_data"})
#: The DER of the signed-data OID 1.2.840.113549.1.7.2, found near the start of every signed-data file.
SIGNED_DATA_OID_DER = CMS_SIGNED_OID
ENVELOPED_DATA_OID_DER = b"\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x07\x03"


@dataclass
class Unwrapped:
    """What a signed-data structure holds: the signed ``content`` (None when detached) and its ``signers``."""

    content: bytes | None
    signers: list[dict[str, Any]] = field(default_factory=list)


def looks_like_cms(head: bytes) -> bool:
    """Whether leading bytes are a DER CMS ContentInfo of signed or enveloped data (a SEQUENCE whose
    first element is one of those OIDs)."""
    return head[:1] == b"\x30" and (SIGNED_DATA_OID_DER in head[:24] or ENVELOPED_DATA_OID_DER in head[:24])


def der_bytes(data: bytes) -> bytes:
    """``data`` as DER: as is when it starts as a SEQUENCE, else the decoded PEM / base64 text (Outlook and
    some signing tools write the ``.p7m`` in base64). Returns ``data`` unchanged when it is neither."""
    if data[:1] == b"\x30":
        return data
    text = data.strip()
    if text.startswith(b"-----BEGIN"):
        text = b"".join(line for line in text.splitlines() if line and not line.startswith(b"-----"))
    try:
        decoded = base64.b64decode(b"".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        return data
    return decoded if decoded[:1] == b"\x30" else data


def content_type(data: bytes) -> str | None:
    """The CMS content type of ``data`` (``signed_data``, ``enveloped_data`` …), or None when not CMS."""
    from asn1crypto import cms

    try:
        info = cms.ContentInfo.load(der_bytes(data))
        return info["content_type"].native
    except (ValueError, TypeError, KeyError):
        return None


def _name(cert: Any) -> dict[str, Any]:
    subject = cert.subject.native
    return {
        "signer": subject.get("common_name") or cert.subject.human_friendly,
        "email": subject.get("email_address"),
        "issuer": cert.issuer.native.get("common_name") or cert.issuer.human_friendly,
        "serial": format(cert.serial_number, "x"),
    }


def _signer(info: Any, certs: list[Any]) -> dict[str, Any]:
    """One SignerInfo as ``{signer, email, issuer, serial, signing_time, digest}`` (unknown fields None)."""
    record: dict[str, Any] = {"signer": None, "email": None, "issuer": None, "serial": None, "signing_time": None,
                              "digest": info["digest_algorithm"]["algorithm"].native}
    sid = info["sid"]
    for cert in certs:
        if sid.name == "issuer_and_serial_number":
            match = cert.serial_number == sid.chosen["serial_number"].native and cert.issuer == sid.chosen["issuer"]
        else:
            match = cert.key_identifier == sid.chosen.native
        if match:
            record.update(_name(cert))
            break
    attrs = info["signed_attrs"]
    for i in range(len(attrs) if attrs.contents else 0):
        try:  # one attribute asn1crypto cannot parse (a vendor's) must not hide the others
            attr = attrs[i]
            if attr["type"].native == "signing_time" and len(attr["values"]):
                when = attr["values"][0].native
                record["signing_time"] = when.isoformat() if hasattr(when, "isoformat") else str(when)
        except (ValueError, TypeError, KeyError):
            continue
    return record


def unwrap_signed(data: bytes, filename: str) -> Unwrapped:
    """The content and signers of a CMS signed-data structure (DER, PEM or base64).

    Raises:
        UnsupportedDocument: ``encrypted`` for enveloped (encrypted) data; ``corrupt`` when ``data`` is not a
            readable CMS structure or holds another content type.
    """
    from asn1crypto import cms

    try:
        info = cms.ContentInfo.load(der_bytes(data))
        kind = info["content_type"].native
        if kind in ENVELOPED_TYPES:
            raise UnsupportedDocument(f"{filename}: S/MIME encrypted content ({kind}); no key to read it",
                                      reason="encrypted", details={"scheme": "s/mime", "cms": kind})
        if kind != SIGNED_DATA:
            raise UnsupportedDocument(f"{filename}: a CMS structure of type {kind}, not signed data",
                                      reason="corrupt", details={"cms": kind})
        signed = info["content"]
        inner = signed["encap_content_info"]["content"]
        content = inner.native if inner.native is not None else None
        if content is not None and not isinstance(content, bytes):
            content = inner.parsed.dump() if hasattr(inner, "parsed") else inner.contents
        certs = [c.chosen for c in signed["certificates"] if c.name == "certificate"] \
            if signed["certificates"].contents else []
        signers = [_signer(s, certs) for s in signed["signer_infos"]]
    except UnsupportedDocument:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise UnsupportedDocument(f"{filename}: not a readable CMS signed-data structure ({exc})",
                                  reason="corrupt") from exc
    return Unwrapped(content, signers)


def signers_of(signature: bytes) -> list[dict[str, Any]]:
    """The signers of a detached signature (``application/pkcs7-signature``, ``smime.p7s``); [] when unreadable."""
    try:
        return unwrap_signed(signature, "smime.p7s").signers
    except UnsupportedDocument:
        return []


def inner_name(filename: str) -> str:
    """The wrapped file's name: ``rechnung.xml.p7m`` → ``rechnung.xml``; ``smime.p7m`` → ``smime.eml`` (a
    signed mail); any other stem without an extension stays bare (its bytes tell what it is)."""
    lower = filename.lower()
    for ext in (".p7m", ".p7s", ".p7"):
        if lower.endswith(ext):
            stem = filename[: -len(ext)]
            return "smime.eml" if stem.lower() == "smime" else stem or "signed"
    return filename


def convert_p7m(data: bytes, filename: str) -> Any:
    """A signed ``.p7m`` file: the content it wraps, converted as the file it is (``rechnung.xml.p7m`` as
    XML, ``vertrag.pdf.p7m`` as a PDF, ``smime.p7m`` as mail), with ``metadata["signature"]`` (the signers).

    Runs in a conversion worker: the inner file is converted here by its built-in converter.

    Raises:
        UnsupportedDocument: ``encrypted`` (enveloped data), ``corrupt`` (not CMS), ``empty`` (a detached
            signature: no content), or what the inner file's converter raises.
    """
    from ki.adapters.convert.formats import sniff_format
    from ki.adapters.convert.isolation import resolve
    from ki.adapters.convert.router import converter_target

    unwrapped = unwrap_signed(data, filename)
    if not unwrapped.content:
        raise UnsupportedDocument(f"{filename}: a detached signature; the signed file is elsewhere",
                                  reason="empty", details={"signature": unwrapped.signers})
    name = inner_name(filename)
    doc = resolve(converter_target(sniff_format(unwrapped.content, name)))(unwrapped.content, name)
    doc.metadata["signature"] = unwrapped.signers
    doc.metadata["signed_container"] = "cms"
    return doc
