"""Legacy binary Office and old word-processor files (``.doc``, ``.dot``, ``.ppt``, ``.wpd``, ``.wps``, ``.pages``).

docs/design-decisions.md "Legacy Office through LibreOffice": LibreOffice (:mod:`ki.adapters.convert.soffice`) turns
the file into its OOXML successor and ki's own reader reads that — a ``.doc`` becomes a ``.docx`` that keeps
its tracked changes, comments, headers, footers and notes, so :func:`ki.adapters.convert.docx.convert_docx` reads every
part (deleted text stays searchable as struck text). A presentation becomes a ``.pptx`` read by ki's PPTX
reader when this install has one, else a PDF read by ki's PDF reader. ``.xls`` needs no component
(:mod:`ki.adapters.convert.xls`).

An OLE2 file is first looked into (olefile, no component): an encrypted ``.doc`` (FIB ``fEncrypted``), ``.ppt``
(``EncryptedSummary``) or OOXML (``EncryptedPackage``) is ``password_required``; a workbook goes to the
``.xls`` reader and an Outlook message to the ``.msg`` reader whatever its name.
"""

from __future__ import annotations

import io
import struct
import tempfile
from pathlib import Path, PurePath

from ki.adapters.convert.model import StructuredDocument
from ki.core.errors import UnsupportedDocument

CONVERTER = "ki.legacy+libreoffice"
CONVERTER_VERSION = "1"
#: LibreOffice's output per family: Writer files become DOCX, Impress files PPTX.
IMPRESS_EXT = frozenset({".ppt", ".pps", ".pot"})
#: The seconds kept back from the worker's budget so LibreOffice is stopped before the worker is killed.
TIMEOUT_MARGIN = 5.0
#: ki's readers of LibreOffice's output.
DOCX_READER = "ki.adapters.convert.docx:convert_docx"
PDF_READER = "ki.adapters.convert.pdf:convert_pdf"


def ole_kind(data: bytes) -> str | None:
    """What an OLE2 file is, from its streams: ``doc``, ``ppt``, ``xls``, ``msg``, ``encrypted`` (a
    password-protected Word, PowerPoint or OOXML file), or None (unreadable, or none of these)."""
    import olefile

    try:
        with olefile.OleFileIO(io.BytesIO(data)) as ole:
            names = {"/".join(e).lower() for e in ole.listdir(streams=True, storages=False)}
            if "encryptedpackage" in names or "encryptedsummary" in names:
                return "encrypted"
            if "worddocument" in names:
                fib = ole.openstream("WordDocument").read(12)
                return "encrypted" if len(fib) >= 12 and struct.unpack_from("<H", fib, 10)[0] & 0x0100 else "doc"
            if "workbook" in names or "book" in names:
                return "xls"
            if "powerpoint document" in names:
                return "ppt"
            if any(n.startswith("__substg1.0_") for n in names):
                return "msg"
    except (OSError, ValueError, IndexError, struct.error, RecursionError):
        return None
    return None


def route_legacy(data: bytes, filename: str) -> str:
    """The converter format for a file the router calls ``legacy``: ``xls`` or ``msg`` when its OLE streams
    say so, else ``legacy`` (LibreOffice's).

    Raises:
        UnsupportedDocument: ``password_required`` for a password-protected Word, PowerPoint or OOXML file.
    """
    kind = ole_kind(data) if data[:4] == b"\xd0\xcf\x11\xe0" else None
    if kind == "encrypted":
        raise UnsupportedDocument(f"{filename}: the file is password-protected", reason="password_required",
                                  details={"encrypted": True, "container": "cfb"})
    return kind if kind in ("xls", "msg") else "legacy"


def convert_legacy(data: bytes, filename: str, *, soffice: str, timeout_seconds: float,
                   pptx_reader: str | None = None) -> StructuredDocument:
    """Convert a legacy file through LibreOffice (``soffice``: the program
    :func:`ki.adapters.convert.soffice.find_soffice`
    found) and ki's reader of the result, within ``timeout_seconds`` (the worker's budget). ``pptx_reader`` is
    the ``"module:function"`` of ki's PPTX reader when this install has one (presentations then become PPTX,
    else PDF).

    The document keeps the format of the file (``doc``, ``ppt``, ``wpd`` …; ``legacy`` without an extension)
    and records ``metadata["converted_by"]`` (``libreoffice``) and ``metadata["converted_to"]``.

    Raises:
        UnsupportedDocument: ``too_large`` (LibreOffice's time ran out), ``conversion_failed`` (it could not
            read the file), or what ki's reader of the result raises.
    """
    from ki.adapters.convert.isolation import resolve
    from ki.adapters.convert.soffice import convert_file

    ext = PurePath(filename).suffix.lower() or ".doc"
    impress = ext in IMPRESS_EXT or ole_kind(data) == "ppt"
    limit = max(1.0, timeout_seconds - TIMEOUT_MARGIN)
    with tempfile.TemporaryDirectory(prefix="ki-legacy-") as tmp:
        source = Path(tmp, "in", "document" + (ext if ext != ".legacy" else ".doc"))
        source.parent.mkdir()
        source.write_bytes(data)
        target = "pptx" if impress and pptx_reader else "pdf" if impress else "docx"
        out = Path(tmp, "out")
        out.mkdir()
        produced = convert_file(soffice, source, target, out, timeout_seconds=limit)
        converted = produced.read_bytes()
    reader = {"docx": DOCX_READER, "pdf": PDF_READER, "pptx": pptx_reader}[target]
    doc = resolve(reader)(converted, PurePath(filename).stem + "." + target)
    doc.format = ext.lstrip(".") or "legacy"
    doc.converter = f"{CONVERTER}+{doc.converter}"
    doc.metadata.update(converted_by="libreoffice", converted_to=target)
    return doc
