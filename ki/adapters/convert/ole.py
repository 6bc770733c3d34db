"""Unpacking an embedded OLE object (an OLE2/CFB ``oleObjectN.bin`` of an OOXML package) into the file it holds.

Read with olefile (BSD-2; already a dependency of python-oxmsg). The object kinds that carry a
document (MS-OLEDS; Office's embedding conventions):

* ``\\x01Ole10Native`` — an *OLE Package* (a file dropped into the document, any type): a size, a
  flags word, the file's label, its original path, a temp path, then the file's bytes (MS-OLEDS
  2.3.6 is the outer format; the package layout is Packager's). A stream that is not a package is
  the object's raw native data (size + bytes).
* ``CONTENTS`` — Acrobat's embedding (``AcroExch.Document``): the PDF itself.
* ``Package`` — an OOXML document embedded as an OLE object (``Word.Document.12``, …): the zip.
* the object *is* a legacy binary document: ``WordDocument`` (.doc), ``Workbook``/``Book`` (.xls),
  ``PowerPoint Document`` (.ppt), ``__substg1.0_*`` (.msg), ``EncryptedPackage`` (an encrypted
  OOXML file, which then quarantines as ``password_required`` as any such file does).

Anything else (an equation, a Paint picture, a media clip) is no document: :func:`unpack_ole`
returns None for it.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

from ki.adapters.convert.formats import CFB_MAGIC, pdf_header_offset, zip_kind

_LEGACY_STREAMS = (("WordDocument", "doc"), ("Workbook", "xls"), ("Book", "xls"), ("PowerPoint Document", "ppt"),
                   ("EncryptedPackage", "docx"))


@dataclass(frozen=True)
class OleContent:
    """The file inside an OLE object: its own name when the object records one, an extension, the bytes."""

    name: str | None
    ext: str
    data: bytes


def unpack_ole(data: bytes, *, max_bytes: int) -> OleContent | None:
    """The document an OLE object holds, or None when it holds none (or is not readable OLE).

    Args:
        data: the object's bytes (an OLE2/CFB file).
        max_bytes: streams larger than this are not read (the container's size cap).
    Raises: nothing (a damaged object is None).
    """
    if not data.startswith(CFB_MAGIC):
        return None
    import olefile

    try:
        ole = olefile.OleFileIO(io.BytesIO(data))
    except (OSError, ValueError, IndexError, struct.error, RecursionError):
        return None
    try:
        # MS-CFB names compare case-insensitively (some writers store PACKAGE, WORKBOOK)
        names = {"/".join(entry).lower(): "/".join(entry) for entry in ole.listdir(streams=True, storages=False)}
        streams = set(names)

        def read(name: str) -> bytes | None:
            name = names[name.lower()]
            if ole.get_size(name) > max_bytes:
                return None
            return ole.openstream(name).read()

        if "\x01ole10native" in streams:
            native = read("\x01Ole10Native")
            return _ole10_native(native) if native else None
        for name in ("CONTENTS", "Package"):
            if name.lower() in streams:
                blob = read(name)
                if blob and pdf_header_offset(blob) >= 0:
                    return OleContent(None, "pdf", blob)
                if blob and blob.startswith(b"PK\x03\x04"):
                    return OleContent(None, zip_kind(blob), blob)
        for stream, ext in _LEGACY_STREAMS:
            if stream.lower() in streams:
                return OleContent(None, ext, data)
        if any(s.startswith("__substg1.0_") for s in streams):  # lower-cased names
            return OleContent(None, "msg", data)
        return None
    except (OSError, ValueError, IndexError, struct.error, RecursionError):
        return None
    finally:
        ole.close()


def _cstring(blob: bytes, pos: int) -> tuple[str, int]:
    end = blob.find(b"\x00", pos)
    if end < 0:
        raise ValueError("unterminated string")
    return blob[pos:end].decode("cp1252", "replace"), end + 1


def _ole10_native(blob: bytes) -> OleContent | None:
    """An ``\\x01Ole10Native`` stream: an OLE Package (label, paths, bytes) or raw native data."""
    if len(blob) < 4:
        return None
    (size,) = struct.unpack_from("<I", blob, 0)
    body = blob[4 : 4 + size] if 0 < size <= len(blob) - 4 else blob[4:]
    try:
        (flags,) = struct.unpack_from("<H", body, 0)
        label, pos = _cstring(body, 2)
        _path, pos = _cstring(body, pos)
        pos += 4  # reserved (0x00030000)
        (temp_len,) = struct.unpack_from("<I", body, pos)
        pos += 4 + temp_len
        (data_len,) = struct.unpack_from("<I", body, pos)
        pos += 4
        if flags != 2 or pos + data_len > len(body):
            raise ValueError("not a package")
        data = body[pos : pos + data_len]
        pos += data_len
        label = _unicode_label(body, pos) or label
    except (ValueError, struct.error):
        return OleContent(None, "bin", body) if body else None
    name = label.replace("\\", "/").rsplit("/", 1)[-1].strip() or None
    return OleContent(name, "bin", data)


def _unicode_label(body: bytes, pos: int) -> str | None:
    """The optional UTF-16 copies after the package data: temp path, then the label (Unicode names)."""
    try:
        (n,) = struct.unpack_from("<I", body, pos)
        pos += 4 + 2 * n
        (n,) = struct.unpack_from("<I", body, pos)
        pos += 4
        if n == 0 or pos + 2 * n > len(body):
            return None
        return body[pos : pos + 2 * n].decode("utf-16-le", "replace").rstrip("\x00") or None
    except struct.error:
        return None


def ole_streams(data: bytes, limit: int = 6) -> list[str] | None:
    """The names of the first ``limit`` streams of an OLE object (``Equation Native``, ``\x01CompObj`` …),
    to say what an object :func:`unpack_ole` found no document in holds; None when it is not readable OLE.
    Control characters in names are dropped. Raises: nothing.
    """
    import olefile

    try:
        with olefile.OleFileIO(io.BytesIO(data)) as ole:
            names = ["/".join(entry) for entry in ole.listdir(streams=True, storages=False)]
    except (OSError, ValueError, IndexError, struct.error, RecursionError):
        return None
    return ["".join(ch for ch in name if ch.isprintable()) for name in names[:limit]]
