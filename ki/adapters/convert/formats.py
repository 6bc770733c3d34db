"""File format detection, written once: the extension first, then the leading bytes.

DESIGN.md "Converter routing": a PDF with a junk prefix, a text file named ``.pdf`` or a mail
without extension are routed by what they are. :func:`sniff_bytes` is the one reader of magic
numbers in ki; :func:`sniff_format` turns it into the router's format names and
:func:`ki.adapters.convert.docling.formats.detect_format` into Docling's input formats.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import PurePath

#: ``%PDF-`` may follow junk (a print-spooler job ticket, a BOM) within this many bytes.
PDF_HEADER = b"%PDF-"
PDF_HEADER_WINDOW = 1024
#: OLE2 / Compound File Binary (legacy Office, .msg, encrypted OOXML).
CFB_MAGIC = b"\xd0\xcf\x11\xe0"
ZIP_MAGIC = b"PK\x03\x04"
#: The DER of the CMS signed-data OID (1.2.840.113549.1.7.2): a ``.p7m`` without its extension.
CMS_SIGNED_OID = b"\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x07\x02"

#: Leading bytes of the raster images ki or Docling read, with their usual extension.
IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG", "png"),
    (b"\xff\xd8\xff", "jpg"),
    (b"II*\x00", "tif"),
    (b"MM\x00*", "tif"),
    (b"GIF8", "gif"),
)

#: OpenDocument / EPUB ``mimetype`` member → kind.
_ODF_MIMETYPES = {
    b"application/vnd.oasis.opendocument.text": "odt",
    b"application/vnd.oasis.opendocument.spreadsheet": "ods",
    b"application/vnd.oasis.opendocument.presentation": "odp",
    b"application/vnd.oasis.opendocument.graphics": "odg",
    b"application/vnd.oasis.opendocument.text-template": "odt",
    b"application/vnd.oasis.opendocument.spreadsheet-template": "ods",
    b"application/vnd.oasis.opendocument.presentation-template": "odp",
    b"application/vnd.oasis.opendocument.graphics-template": "odg",
    b"application/epub+zip": "epub",
}
#: OOXML main-part folders → kind (a binary workbook, XLSB, has ``xl/workbook.bin``).
_OOXML_FOLDERS = (("word/", "docx"), ("ppt/", "pptx"), ("xl/workbook.bin", "xlsb"), ("xl/", "xlsx"),
                  ("visio/", "vsdx"))
#: Members that make a zip an XPS / OpenXPS document.
_XPS_MEMBERS = ("fixeddocumentsequence.fdseq", "fixeddocseq.fdseq", "documents/1/fixeddocument.fdoc",
                "documents/1/fixeddoc.fdoc")

TEXT_EXT = {".txt", ".text", ".md", ".csv", ".log", ".tsv"}
MAIL_EXT = {".eml"}
MSG_EXT = {".msg"}
DOCX_EXT = {".docx", ".docm", ".dotx", ".dotm"}
PDF_EXT = {".pdf"}
HTML_EXT = {".html", ".htm", ".xhtml"}
RTF_EXT = {".rtf"}
IMAGE_EXT = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp"}
MBOX_EXT = {".mbox", ".mbx"}
XLSX_EXT = {".xlsx", ".xlsm", ".xltx", ".xltm"}
PPTX_EXT = {".pptx", ".pptm", ".ppsx", ".ppsm", ".potx", ".potm"}
ODF_EXT = {".odt", ".ods", ".odp", ".odg", ".ott", ".ots", ".otp", ".otg"}
#: Legacy binary and old word-processor formats LibreOffice converts (ki.adapters.convert.legacy).
LEGACY_EXT = {".doc", ".dot", ".ppt", ".pps", ".pot", ".wpd", ".wps", ".pages"}
XLS_EXT = {".xls", ".xlt"}
ZIP_EXT = {".zip"}
#: Archives ki does not open (their quarantine names what would).
OTHER_ARCHIVE_EXT = {".7z", ".rar"}
P7M_EXT = {".p7m"}
#: TNEF (winmail.dat) and CMS signed data are recognised by their leading bytes.
TNEF_MAGIC = b"\x78\x9f\x3e\x22"

#: Router format per extension (the extension decides when it is one ki knows).
_EXTENSION_ROUTES = (
    (TEXT_EXT, "txt"), (MAIL_EXT, "eml"), (MSG_EXT, "msg"), (MBOX_EXT, "mbox"), (DOCX_EXT, "docx"),
    (HTML_EXT, "html"), (RTF_EXT, "rtf"), (IMAGE_EXT, "image"), (XLSX_EXT, "xlsx"), (PPTX_EXT, "pptx"),
    (ODF_EXT, "odf"), (LEGACY_EXT, "legacy"), (XLS_EXT, "xls"), (ZIP_EXT, "zip"), (P7M_EXT, "p7m"),
    (OTHER_ARCHIVE_EXT, "archive"),
)  # fmt: skip

#: Sniffed kinds the router treats as images / as "office" (Docling's formats).
IMAGE_KINDS = frozenset({"png", "jpg", "tif", "gif", "bmp", "webp"})
_OFFICE_KINDS = frozenset({"epub"})
#: Sniffed kinds ki reads itself, and the router format each goes to.
_NATIVE_KINDS = {"xlsx": "xlsx", "pptx": "pptx", "odt": "odf", "ods": "odf", "odp": "odf", "odg": "odf"}


def pdf_header_offset(data: bytes) -> int:
    """Offset of ``%PDF-`` within the first :data:`PDF_HEADER_WINDOW` bytes, or -1."""
    return data.find(PDF_HEADER, 0, PDF_HEADER_WINDOW + len(PDF_HEADER))


def image_kind(head: bytes) -> str | None:
    """``png``/``jpg``/``tif``/``gif``/``bmp``/``webp`` from an image's leading bytes, else None.

    A BMP needs its reserved header bytes to be zero (``BM`` alone starts many text files).
    """
    for magic, kind in IMAGE_MAGIC:
        if head.startswith(magic):
            return kind
    if head.startswith(b"BM") and len(head) >= 14 and head[6:10] == b"\x00\x00\x00\x00":
        return "bmp"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "webp"
    return None


def zip_kind(data: bytes) -> str:
    """What a zip package holds: ``docx``/``pptx``/``xlsx``/``xlsb``/``vsdx``/``xps``/``odt``/``ods``/``odp``/``odg``/
    ``epub``, else ``zip``.

    The central directory is read (cheap); a damaged zip whose first local header names a
    ``word/`` part still counts as ``docx`` (so it quarantines as a corrupt DOCX).
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = archive.namelist()
            if "mimetype" in names:
                odf = _ODF_MIMETYPES.get(archive.read("mimetype").strip())
                if odf:
                    return odf
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, KeyError, RuntimeError, ValueError, EOFError):
        return "docx" if b"word/" in data[:2048] else "zip"
    lower = [n.lower() for n in names]
    for prefix, kind in _OOXML_FOLDERS:
        if any(n.startswith(prefix) for n in lower):
            return kind
    if any(n in _XPS_MEMBERS for n in lower):
        return "xps"
    if "content.xml" in lower and "meta-inf/manifest.xml" in lower:
        return "odt"  # an OpenDocument package without its mimetype member: the converter reads its body
    return "zip"


def sniff_bytes(data: bytes) -> str | None:
    """The kind of file ``data`` is, from its leading bytes alone (no extension).

    Returns one of ``pdf``, ``rtf``, ``html``, ``cfb`` (OLE2), ``tnef`` (winmail.dat), ``p7m`` (CMS signed
    data), the :func:`zip_kind` kinds, the :func:`image_kind` kinds, ``mbox``, ``eml``, or None (nothing
    recognised: plain text or unknown binary).
    """
    head = data[:2048]
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if PDF_HEADER in head[:PDF_HEADER_WINDOW]:
        return "pdf"
    if stripped.startswith(b"{\\rtf"):
        return "rtf"
    if head.startswith(ZIP_MAGIC):
        return zip_kind(data)
    if head.startswith(CFB_MAGIC):
        return "cfb"
    if head.startswith(TNEF_MAGIC):
        return "tnef"
    if head[:1] == b"\x30" and CMS_SIGNED_OID in head[:24]:
        return "p7m"
    lower = stripped[:512].lower()
    if lower.startswith((b"<!doctype html", b"<html")) or b"<body" in lower:
        return "html"
    image = image_kind(head)
    if image:
        return image
    if head.startswith(b"From ") and b"\n" in head and b":" in head.split(b"\n", 1)[0]:
        return "mbox"
    first = stripped.split(b"\n", 1)[0]
    if b":" in first and first.split(b":", 1)[0].replace(b"-", b"").isalnum() and (
        b"\nfrom:" in lower or lower.startswith((b"from:", b"received:", b"return-path:", b"message-id:"))
    ):
        return "eml"
    return None


def is_document(data: bytes, filename: str) -> bool:
    """Whether ``data`` is a file ki can route: a known document extension, or leading bytes ki recognises.

    Used for embedded objects, which carry media (sounds, clips) as well as documents: an unknown
    extension with unrecognised bytes is not a document.
    """
    ext = PurePath(filename).suffix.lower()
    return ext in PDF_EXT or any(ext in exts for exts, _ in _EXTENSION_ROUTES) or sniff_bytes(data) is not None


def sniff_format(data: bytes, filename: str) -> str:
    """The router's format name: txt, eml, msg, mbox, docx, xlsx, pptx, odf, pdf, html, rtf, image, xls, zip,
    tnef, p7m, archive (7-Zip, RAR: not read), legacy (a legacy binary Office or old word-processor file; an
    OLE2 file without a known extension), office (EPUB) or a kind no converter here reads (``xlsb``, ``vsdx``,
    ``xps``).

    The extension decides when it is one ki knows (a ``.pdf`` without ``%PDF-`` is a corrupt
    PDF, quarantined, not silently text); other files are recognised by :func:`sniff_bytes`,
    and what it does not recognise is text.
    """
    ext = PurePath(filename).suffix.lower()
    if ext in PDF_EXT:
        return "pdf"
    for exts, name in _EXTENSION_ROUTES:
        if ext in exts:
            return name
    kind = sniff_bytes(data)
    if kind is None:
        return "txt"
    if kind in IMAGE_KINDS:
        return "image"
    if kind in _NATIVE_KINDS:
        return _NATIVE_KINDS[kind]
    if kind in ("xlsb", "vsdx", "xps"):
        return kind
    if kind in _OFFICE_KINDS:
        return "office"
    if kind == "cfb":
        return "legacy"
    return kind
