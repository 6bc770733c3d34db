"""Password-protected Office and OpenDocument files, recognised before any reader tries them.

Spec: insertion-pipeline.md "Parse (convert)" — a file no converter can read is quarantined with the reason
that states it. An encrypted OOXML package (DOCX, XLSX, PPTX) is an OLE2 container holding
``EncryptionInfo`` + ``EncryptedPackage``; an encrypted legacy Word, Excel or PowerPoint file is an OLE2 file
whose own records say so; msoffcrypto-tool reads both. An encrypted OpenDocument file is a zip whose
``META-INF/manifest.xml`` gives ``manifest:encryption-data`` for its members. Each is ``password_required``,
never ``unsupported_format`` or ``corrupt``.
"""

from __future__ import annotations

import io
import zipfile

from ki.adapters.convert.formats import CFB_MAGIC, ZIP_MAGIC
from ki.core.errors import UnsupportedDocument

_ENCRYPTED_STREAM = "encryptedpackage".encode("utf-16-le")  # CFB directory names are UTF-16LE
_MANIFEST = "META-INF/manifest.xml"
_MANIFEST_NS = "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"


def ole_encryption(data: bytes) -> str | None:
    """What an OLE2 file is when it is password-protected: ``ooxml`` (encrypted DOCX/XLSX/PPTX), ``doc``,
    ``xls`` or ``ppt``; None when it is not encrypted, is no Office file, or cannot be read.

    msoffcrypto-tool decides; an unreadable container still counts as encrypted OOXML when its directory
    names ``EncryptedPackage``.
    """
    if not data.startswith(CFB_MAGIC):
        return None
    try:
        import msoffcrypto
        from msoffcrypto.format.ooxml import OOXMLFile

        office = msoffcrypto.OfficeFile(io.BytesIO(data))
        if not office.is_encrypted():
            return None
        if isinstance(office, OOXMLFile):
            return "ooxml"
        kind = str(getattr(office, "format", "") or "")
        return {"doc97": "doc", "xls97": "xls", "ppt97": "ppt"}.get(kind, kind or "office")
    except Exception:  # noqa: BLE001 - msoffcrypto raises many kinds on files it does not know
        return "ooxml" if _ENCRYPTED_STREAM in data.lower() else None


def odf_encrypted(data: bytes) -> bool:
    """Whether an OpenDocument zip's manifest gives encryption data for any member (a password-protected file)."""
    if not data.startswith(ZIP_MAGIC):
        return False
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            info = archive.getinfo(_MANIFEST)
            if info.file_size > 4 * 1024 * 1024:
                return False
            manifest = archive.read(info)
    except (KeyError, zipfile.BadZipFile, zipfile.LargeZipFile, OSError, RuntimeError, ValueError, EOFError):
        return False
    return b"encryption-data" in manifest and _MANIFEST_NS.encode() in manifest


def check_password(data: bytes, filename: str) -> None:
    """Raise ``password_required`` when ``data`` is a password-protected Office or OpenDocument file.

    Raises:
        UnsupportedDocument: reason ``password_required``, ``details`` naming the container (``cfb`` or
            ``odf``) and the kind (``ooxml``, ``doc``, ``xls``, ``ppt``).
    """
    kind = ole_encryption(data)
    if kind is not None:
        what = "encrypted OOXML in an OLE2 container" if kind == "ooxml" else f"an encrypted legacy .{kind} file"
        raise UnsupportedDocument(f"{filename}: password-protected ({what})", reason="password_required",
                                  details={"container": "cfb", "kind": kind, "encrypted": True})
    if odf_encrypted(data):
        raise UnsupportedDocument(f"{filename}: password-protected (OpenDocument with encrypted members)",
                                  reason="password_required", details={"container": "odf", "encrypted": True})
