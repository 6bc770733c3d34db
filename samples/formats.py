"""File writers of the sample estate: DOCX (tracked changes, comments), PDF (text layer), scans, e-mail.

Every writer is deterministic: the same arguments give the same bytes (fixed ZIP timestamps and
order, fixed MIME boundaries and message ids, no clock, no randomness). Only the standard library
plus ``pypdfium2`` (a ki dependency, to rasterise a scan) is used.
"""

from __future__ import annotations

import hashlib
import io
import textwrap
import zlib
from dataclasses import dataclass, field
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, parsedate_to_datetime

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
PKG_REL = "http://schemas.openxmlformats.org/package/2006/relationships"
DOC_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
WML = "application/vnd.openxmlformats-officedocument.wordprocessingml"
DOCX_MIME = ("application", "vnd.openxmlformats-officedocument.wordprocessingml.document")
PDF_MIME = ("application", "pdf")


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


# --------------------------------------------------------------------------- DOCX


@dataclass(frozen=True)
class Ins:
    """Text inserted with change tracking on."""

    text: str
    author: str
    date: str  # W3CDTF, e.g. 2024-03-04T10:15:00Z


@dataclass(frozen=True)
class Del:
    """Text deleted with change tracking on."""

    text: str
    author: str
    date: str


@dataclass(frozen=True)
class Comment:
    """A comment anchored on ``anchor`` (the commented text, which stays in the document)."""

    anchor: str
    text: str
    author: str
    date: str


Segment = str | Ins | Del | Comment


@dataclass
class Docx:
    """A Word document: ``paragraphs`` of segments; the first paragraph is the title."""

    title: str
    author: str
    created: str
    paragraphs: list[list[Segment]] = field(default_factory=list)
    language: str = "de-DE"

    def add(self, *segments: Segment) -> Docx:
        self.paragraphs.append(list(segments))
        return self


def _run(text: str, bold: bool = False) -> str:
    rpr = "<w:rPr><w:b/></w:rPr>" if bold else ""
    return f'<w:r>{rpr}<w:t xml:space="preserve">{_xml(text)}</w:t></w:r>'


def docx_bytes(doc: Docx) -> bytes:
    """The document as a minimal, complete WordprocessingML package."""
    ids = iter(range(1, 10_000))
    comments: list[str] = []
    body = []
    for index, paragraph in enumerate([[doc.title], *doc.paragraphs]):
        runs = []
        for seg in paragraph:
            if isinstance(seg, str):
                runs.append(_run(seg, bold=index == 0))
            elif isinstance(seg, Ins):
                runs.append(f'<w:ins w:id="{next(ids)}" w:author="{_xml(seg.author)}" w:date="{seg.date}">'
                            f"{_run(seg.text)}</w:ins>")
            elif isinstance(seg, Del):
                runs.append(f'<w:del w:id="{next(ids)}" w:author="{_xml(seg.author)}" w:date="{seg.date}"><w:r>'
                            f'<w:delText xml:space="preserve">{_xml(seg.text)}</w:delText></w:r></w:del>')
            else:
                cid = len(comments)
                runs.append(f'<w:commentRangeStart w:id="{cid}"/>{_run(seg.anchor)}<w:commentRangeEnd w:id="{cid}"/>'
                            f'<w:r><w:commentReference w:id="{cid}"/></w:r>')
                initials = "".join(w[0] for w in seg.author.replace("Dr. ", "").split()[:2])
                comments.append(f'<w:comment w:id="{cid}" w:author="{_xml(seg.author)}" w:date="{seg.date}" '
                                f'w:initials="{initials}"><w:p><w:r><w:annotationRef/></w:r>{_run(seg.text)}'
                                "</w:p></w:comment>")
        style = '<w:pPr><w:pStyle w:val="Title"/></w:pPr>' if index == 0 else ""
        body.append(f"<w:p>{style}{''.join(runs)}</w:p>")
    head = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    document = (f'{head}<w:document xmlns:w="{W_NS}" xmlns:r="{R_NS}"><w:body>{"".join(body)}'
                '<w:sectPr><w:pgSz w:w="11906" w:h="16838"/></w:sectPr></w:body></w:document>')
    overrides = [("/word/document.xml", f"{WML}.document.main+xml"), ("/word/styles.xml", f"{WML}.styles+xml"),
                 ("/word/settings.xml", f"{WML}.settings+xml"),
                 ("/docProps/core.xml", "application/vnd.openxmlformats-package.core-properties+xml")]
    doc_rels = [("styles", "styles.xml"), ("settings", "settings.xml")]
    if comments:
        overrides.append(("/word/comments.xml", f"{WML}.comments+xml"))
        doc_rels.append(("comments", "comments.xml"))
    types = (f'{head}<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
             '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
             '<Default Extension="xml" ContentType="application/xml"/>'
             + "".join(f'<Override PartName="{p}" ContentType="{t}"/>' for p, t in overrides) + "</Types>")
    rels = (f'{head}<Relationships xmlns="{PKG_REL}">'
            f'<Relationship Id="rId1" Type="{DOC_REL}/officeDocument" Target="word/document.xml"/>'
            f'<Relationship Id="rId2" Type="{PKG_REL}/metadata/core-properties" Target="docProps/core.xml"/>'
            "</Relationships>")
    word_rels = (f'{head}<Relationships xmlns="{PKG_REL}">'
                 + "".join(f'<Relationship Id="rId{i}" Type="{DOC_REL}/{kind}" Target="{target}"/>'
                           for i, (kind, target) in enumerate(doc_rels, 1)) + "</Relationships>")
    styles = (f'{head}<w:styles xmlns:w="{W_NS}"><w:docDefaults><w:rPrDefault><w:rPr>'
              f'<w:rFonts w:ascii="Arial" w:hAnsi="Arial"/><w:sz w:val="21"/><w:lang w:val="{doc.language}"/>'
              '</w:rPr></w:rPrDefault></w:docDefaults><w:style w:type="paragraph" w:default="1" w:styleId="Normal">'
              '<w:name w:val="Normal"/></w:style><w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/>'
              '<w:rPr><w:b/><w:sz w:val="32"/></w:rPr></w:style></w:styles>')
    tracked = any(isinstance(s, Ins | Del) for p in doc.paragraphs for s in p)
    settings = (f'{head}<w:settings xmlns:w="{W_NS}">{"<w:trackRevisions/>" if tracked else ""}'
                "</w:settings>")
    core = (f'{head}<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/'
            'core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
            f"<dc:title>{_xml(doc.title)}</dc:title><dc:creator>{_xml(doc.author)}</dc:creator>"
            f'<dcterms:created xsi:type="dcterms:W3CDTF">{doc.created}</dcterms:created>'
            f"<dc:language>{doc.language}</dc:language></cp:coreProperties>")
    parts = [("[Content_Types].xml", types), ("_rels/.rels", rels), ("word/document.xml", document),
             ("word/_rels/document.xml.rels", word_rels), ("word/styles.xml", styles),
             ("word/settings.xml", settings), ("docProps/core.xml", core)]
    if comments:
        parts.append(("word/comments.xml", f'{head}<w:comments xmlns:w="{W_NS}">{"".join(comments)}</w:comments>'))
    return _zip(parts, date_time=_zip_date(doc.created))


def _zip_date(w3cdtf: str) -> tuple[int, int, int, int, int, int]:
    d, t = w3cdtf.rstrip("Z").split("T")
    return (*map(int, d.split("-")), *map(int, t.split(":")))  # type: ignore[return-value]


def _zip(parts: list[tuple[str, str]], *, date_time: tuple[int, int, int, int, int, int]) -> bytes:
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for name, text in parts:
            info = zipfile.ZipInfo(name, date_time=date_time)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, text.encode("utf-8"))
    return buf.getvalue()


# --------------------------------------------------------------------------- PDF


def _pdf_string(text: str) -> str:
    """A literal string in WinAnsiEncoding (Helvetica's), escaped."""
    out = []
    for b in text.encode("cp1252"):
        out.append("\\" + chr(b) if b in (0x28, 0x29, 0x5C) else chr(b) if 32 <= b < 127 else f"\\{b:03o}")
    return "(" + "".join(out) + ")"


def _pdf_info_string(text: str) -> str:
    return "<FEFF" + text.encode("utf-16-be").hex().upper() + ">"


A4 = (595, 842)


def _layout(title: str, paragraphs: list[str], *, columns: int = 88,
            height: float = A4[1]) -> list[list[str]]:
    """Page content streams (text operators) of ``title`` and ``paragraphs``, wrapped at ``columns``."""
    lines = [("F2", 14, title), ("F1", 10, "")]
    for paragraph in paragraphs:
        lines += [("F1", 10, ln) for ln in textwrap.wrap(paragraph, columns) or [""]] + [("F1", 10, "")]
    top = height - 52
    pages: list[list[str]] = [[]]
    y = top
    for font, size, text in lines:
        y -= size * 1.5
        if y < 40:
            pages.append([])
            y = top - size * 1.5
        if text:
            pages[-1].append(f"BT /{font} {size} Tf 1 0 0 1 40 {y:.1f} Tm {_pdf_string(text)} Tj ET")
    return pages


def _pdf(page_streams: list[bytes], resources: list[str], info: dict[str, str],
         extra_objects: list[bytes] | None = None, size: tuple[float, float] = A4) -> bytes:
    """Assemble a PDF 1.4 from page content streams of ``size`` (pt); ``resources[i]`` is page i's resource
    dictionary. ``extra_objects`` are numbered from 4 on (before the pages)."""
    extra = extra_objects or []
    first_page = 4 + len(extra)
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b"",
                            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
                            *extra]
    kids = []
    for i, stream in enumerate(page_streams):
        page_no = first_page + 2 * i
        kids.append(f"{page_no} 0 R")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {size[0]:g} {size[1]:g}] "
                       f"/Resources {resources[i]} /Contents {page_no + 1} 0 R >>".encode())
        objects.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>".encode()
    info_obj = " ".join(f"/{k} {_pdf_info_string(v) if k != 'CreationDate' else f'({v})'}" for k, v in info.items())
    objects.append(f"<< {info_obj} >>".encode())
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    digest = hashlib.md5(bytes(out), usedforsecurity=False).hexdigest().upper()
    out += (f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info {len(objects)} 0 R "
            f"/ID [<{digest}> <{digest}>] >>\nstartxref\n{xref}\n%%EOF\n").encode()
    return bytes(out)


_TEXT_RESOURCES = "<< /Font << /F1 3 0 R /F2 4 0 R >> >>"
_BOLD_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>"


def pdf_bytes(title: str, paragraphs: list[str], *, author: str, date: str, size: tuple[float, float] = A4) -> bytes:
    """A PDF with a text layer (Helvetica) on pages of ``size`` (pt); ``date`` is a PDF date
    (``D:20240304101500+01'00'``)."""
    pages = _layout(title, paragraphs, columns=int((size[0] - 80) / 5.1), height=size[1])
    streams = [("\n".join(p) + "\n").encode("ascii") for p in pages]
    info = {"Title": title, "Author": author, "Producer": "ki sample estate", "CreationDate": date}
    return _pdf(streams, [_TEXT_RESOURCES] * len(streams), info, [_BOLD_FONT], size)


#: A scanned slip (a delivery note, a handover record): A5 landscape, so OCR has a small page to read.
SLIP = (595, 420)


def scan_pdf_bytes(title: str, paragraphs: list[str], *, date: str, dpi: int = 150,
                   size: tuple[float, float] = SLIP) -> bytes:
    """An image-only PDF, as a scanner makes it: the text rendered to a grey page image, no text layer.

    The page is rasterised with pypdfium2 (ki's PDF library) at ``dpi`` and stored as an 8-bit
    grey image (FlateDecode); a faint grey tint and slightly darker ink make it look scanned.
    """
    import pypdfium2 as pdfium

    text_pdf = pdf_bytes(title, paragraphs, author="Scanner", date=date, size=size)
    document = pdfium.PdfDocument(text_pdf)
    streams, resources, images = [], [], []
    for index in range(len(document)):
        bitmap = document[index].render(scale=dpi / 72, grayscale=True)
        width, height = bitmap.width, bitmap.height
        raw = bytes(bitmap.buffer)
        stride = bitmap.stride
        rows = b"".join(raw[r * stride: r * stride + width] for r in range(height))
        tinted = rows.translate(bytes(min(236, v) if v > 128 else max(0, v - 40) for v in range(256)))
        data = zlib.compress(tinted, 9)
        images.append(f"<< /Type /XObject /Subtype /Image /Width {width} /Height {height} /ColorSpace /DeviceGray "
                      f"/BitsPerComponent 8 /Filter /FlateDecode /Length {len(data)} >>\nstream\n".encode()
                      + data + b"\nendstream")
        streams.append(f"q {size[0]:g} 0 0 {size[1]:g} 0 0 cm /Im{index} Do Q".encode())
    document.close()
    first_image = 5  # objects 1-3 fixed, 4 = bold font, then the images
    for index in range(len(images)):
        resources.append(f"<< /XObject << /Im{index} {first_image + index} 0 R >> >>")
    info = {"Title": title, "Producer": "Scanner ScanStation 7", "CreationDate": date}
    return _pdf(streams, resources, info, [_BOLD_FONT, *images], size)


# --------------------------------------------------------------------------- e-mail


@dataclass(frozen=True)
class Mail:
    """One e-mail. ``sender`` / ``to`` are ``(display name, address)``; ``date`` is RFC 5322 text."""

    sender: tuple[str, str]
    to: tuple[tuple[str, str], ...]
    subject: str
    date: str
    body: str
    attachments: tuple[tuple[str, bytes], ...] = ()
    in_reply_to: str | None = None
    language: str = "de-DE"

    @property
    def message_id(self) -> str:
        digest = hashlib.sha1(f"{self.sender[1]}|{self.date}|{self.subject}".encode()).hexdigest()[:16]
        return f"<{digest}@{self.sender[1].split('@')[1]}>"


def eml_bytes(mail: Mail) -> bytes:
    """The message as RFC 5322 bytes (UTF-8 body, base64 attachments, a boundary derived from its id)."""
    msg = EmailMessage()
    msg["From"] = Address(display_name=mail.sender[0], addr_spec=mail.sender[1])
    msg["To"] = tuple(Address(display_name=n, addr_spec=a) for n, a in mail.to)
    msg["Subject"] = mail.subject
    msg["Date"] = format_datetime(parsedate_to_datetime(mail.date))
    msg["Message-ID"] = mail.message_id
    if mail.in_reply_to:
        msg["In-Reply-To"] = mail.in_reply_to
        msg["References"] = mail.in_reply_to
    msg["Content-Language"] = mail.language
    msg.set_content(mail.body, charset="utf-8", cte="quoted-printable")
    for name, data in mail.attachments:
        maintype, subtype = PDF_MIME if name.lower().endswith(".pdf") else DOCX_MIME
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    if mail.attachments:
        msg.set_boundary("----=_Part_" + mail.message_id.strip("<>").split("@")[0])
    return msg.as_bytes(policy=policy.SMTP.clone(max_line_length=998))


def mbox_bytes(mails: list[Mail]) -> bytes:
    """An mbox (``From `` separators, ``>From`` quoting) of ``mails``."""
    out = bytearray()
    for mail in mails:
        when = parsedate_to_datetime(mail.date)
        out += f"From {mail.sender[1]} {when:%a %b %d %H:%M:%S %Y}\n".encode()
        for line in eml_bytes(mail).replace(b"\r\n", b"\n").split(b"\n"):
            out += (b">" + line if line.startswith(b"From ") else line) + b"\n"
    return bytes(out)
