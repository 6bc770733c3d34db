"""Renderers of a :class:`~bench.estates.model.Doc`: DOCX (tracked changes, comments, header and
footer parts), PDF (hand-written PDF 1.4 text layer), RFC 5322 e-mail, plain text; and the text
extraction ``--check`` uses to verify that every expectation is in the file. Deterministic bytes.
"""

from __future__ import annotations

import datetime as dt
import email
import hashlib
import io
import re
import textwrap
import zipfile
from email import policy as email_policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime
from typing import Any

from bench.estates.model import Doc, seg_text

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
PKG = "http://schemas.openxmlformats.org/package/2006/relationships"
OFFICE = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
CT_MAIN = "application/vnd.openxmlformats-officedocument.wordprocessingml"
XML_HEAD = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
STYLES = (XML_HEAD + f'<w:styles xmlns:w="{W_NS}"><w:docDefaults><w:rPrDefault><w:rPr>'
          '<w:rFonts w:ascii="Arial" w:hAnsi="Arial"/><w:sz w:val="21"/></w:rPr></w:rPrDefault></w:docDefaults>'
          '<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/></w:style>'
          '<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/><w:rPr><w:b/><w:sz w:val="32"/>'
          '</w:rPr></w:style><w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/>'
          '<w:pPr><w:outlineLvl w:val="0"/></w:pPr><w:rPr><w:b/></w:rPr></w:style></w:styles>')


def xe(s: str) -> str:
    """XML-escape text and attribute values."""
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _run(text: str, bold: bool = False) -> str:
    rpr = "<w:rPr><w:b/></w:rPr>" if bold else ""
    return f'<w:r>{rpr}<w:t xml:space="preserve">{xe(text)}</w:t></w:r>'


def _paragraphs(doc: Doc) -> str:
    out, rid = [], 0
    for p in doc.paras:
        pp = f'<w:pPr><w:pStyle w:val="{p["style"]}"/></w:pPr>' if p.get("style") else ""
        runs = []
        for s in p["segs"]:
            if isinstance(s, str):
                runs.append(_run(s, p.get("bold", False)))
                continue
            rid += 1
            if s[0] == "b":
                runs.append(_run(s[1], True))
            elif s[0] == "ins":
                runs.append(f'<w:ins w:id="{rid}" w:author="{xe(s[2][0])}" w:date="{s[2][1]}">{_run(s[1])}</w:ins>')
            elif s[0] == "del":
                runs.append(f'<w:del w:id="{rid}" w:author="{xe(s[2][0])}" w:date="{s[2][1]}"><w:r><w:delText '
                            f'xml:space="preserve">{xe(s[1])}</w:delText></w:r></w:del>')
            elif s[0] == "cs":
                runs.append(f'<w:commentRangeStart w:id="{s[1]}"/>')
            elif s[0] == "ce":
                runs.append(f'<w:commentRangeEnd w:id="{s[1]}"/><w:r><w:commentReference w:id="{s[1]}"/></w:r>')
        out.append(f"<w:p>{pp}{''.join(runs)}</w:p>")
    return "".join(out)


def _hf(tag: str, lines: list[str]) -> str:
    body = "".join(f"<w:p>{_run(ln)}</w:p>" for ln in lines)
    return XML_HEAD + f'<w:{tag} xmlns:w="{W_NS}" xmlns:r="{R_NS}">{body}</w:{tag}>'


def docx_bytes(doc: Doc, meta: dict[str, Any]) -> bytes:
    """A minimal but complete WordprocessingML package; ``meta``: title, author, created (ISO Z), zipdate,
    revision, track (bool). ``doc.header`` / ``doc.footer`` become header1.xml / footer1.xml."""
    parts: dict[str, str] = {}
    rels = [("rId1", "styles", "styles.xml")]
    overrides = [("/word/document.xml", f"{CT_MAIN}.document.main+xml"), ("/word/styles.xml", f"{CT_MAIN}.styles+xml"),
                 ("/word/settings.xml", f"{CT_MAIN}.settings+xml"),
                 ("/docProps/core.xml", "application/vnd.openxmlformats-package.core-properties+xml")]
    refs = ""
    for tag, lines, rid in (("hdr", doc.header, "rId3"), ("ftr", doc.footer, "rId4")):
        if lines:
            name = "header1.xml" if tag == "hdr" else "footer1.xml"
            parts[f"word/{name}"] = _hf(tag, lines)
            kind = "header" if tag == "hdr" else "footer"
            rels.append((rid, kind, name))
            overrides.append((f"/word/{name}", f"{CT_MAIN}.{kind}+xml"))
            refs += f'<w:{kind}Reference w:type="default" r:id="{rid}"/>'
    if doc.comments:
        rels.append(("rId5", "comments", "comments.xml"))
        overrides.append(("/word/comments.xml", f"{CT_MAIN}.comments+xml"))
        cs = "".join(f'<w:comment w:id="{c["id"]}" w:author="{xe(c["author"])}" w:date="{c["date"]}">'
                     f'<w:p>{_run(c["text"])}</w:p></w:comment>' for c in doc.comments)
        parts["word/comments.xml"] = XML_HEAD + f'<w:comments xmlns:w="{W_NS}">{cs}</w:comments>'
    parts["word/document.xml"] = (XML_HEAD + f'<w:document xmlns:w="{W_NS}" xmlns:r="{R_NS}"><w:body>'
                                  f'{_paragraphs(doc)}<w:sectPr>{refs}<w:pgSz w:w="11906" w:h="16838"/></w:sectPr>'
                                  '</w:body></w:document>')
    parts["word/styles.xml"] = STYLES
    parts["word/settings.xml"] = (XML_HEAD + f'<w:settings xmlns:w="{W_NS}">'
                                  + ("<w:trackRevisions/>" if meta.get("track") else "") + "</w:settings>")
    parts["word/_rels/document.xml.rels"] = (XML_HEAD + f'<Relationships xmlns="{PKG}">' + "".join(
        f'<Relationship Id="{i}" Type="{OFFICE}/{t}" Target="{n}"/>' for i, t, n in rels) + "</Relationships>")
    parts["_rels/.rels"] = (XML_HEAD + f'<Relationships xmlns="{PKG}"><Relationship Id="rId1" '
                            f'Type="{OFFICE}/officeDocument" Target="word/document.xml"/><Relationship Id="rId2" '
                            'Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/'
                            'core-properties" Target="docProps/core.xml"/></Relationships>')
    parts["docProps/core.xml"] = (
        XML_HEAD + '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/'
        'core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
        f'<dc:title>{xe(meta["title"])}</dc:title><dc:creator>{xe(meta["author"])}</dc:creator>'
        f'<cp:revision>{meta.get("revision", 1)}</cp:revision>'
        f'<dcterms:created xsi:type="dcterms:W3CDTF">{meta["created"]}</dcterms:created>'
        f'<dcterms:modified xsi:type="dcterms:W3CDTF">{meta["created"]}</dcterms:modified></cp:coreProperties>')
    ct = (XML_HEAD + '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
          '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
          '<Default Extension="xml" ContentType="application/xml"/>'
          + "".join(f'<Override PartName="{n}" ContentType="{t}"/>' for n, t in overrides) + "</Types>")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in [("[Content_Types].xml", ct), *sorted(parts.items())]:
            zi = zipfile.ZipInfo(name, date_time=meta["zipdate"])
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data.encode("utf-8"))
    return buf.getvalue()


def _pdf_lit(text: str) -> str:
    out = []
    for b in text.encode("cp1252", "replace"):
        if b in (0x28, 0x29, 0x5C):
            out.append("\\" + chr(b))
        elif 32 <= b < 127:
            out.append(chr(b))
        else:
            out.append(f"\\{b:03o}")
    return "(" + "".join(out) + ")"


def _pdf_textstring(text: str) -> str:
    if all(32 <= ord(c) < 127 for c in text):
        return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"
    return "<FEFF" + text.encode("utf-16-be").hex().upper() + ">"


def pdf_lines(doc: Doc, width: int = 92) -> list[tuple[str, int, str]]:
    """(font, size, text) lines of the document's accepted text, header and footer included, wrapped for A4."""
    out: list[tuple[str, int, str]] = [("F1", 8, h) for h in doc.header]
    for p in doc.paras:
        text = "".join(seg_text(s) for s in p["segs"])
        font, size = ("F2", 13) if p.get("style") == "Title" else ("F2", 10) if p.get("bold") or \
            p.get("style") == "Heading1" else ("F1", 10)
        if not text:
            out.append(("F1", 10, ""))
            continue
        out.extend((font, size, ln) for ln in textwrap.wrap(text, int(width * 10 / size), break_long_words=True,
                                                             break_on_hyphens=False))
    out.extend(("F1", 8, f) for f in doc.footer)
    return out


def pdf_bytes(lines: list[tuple[str, int, str]], info: dict[str, str]) -> bytes:
    """A PDF 1.4 with Helvetica text; ``info``: title, author, producer, date (``D:…``)."""
    pages: list[list[str]] = []
    cur: list[str] = []
    y = 786.0
    for font, size, text in lines:
        if y - size * 1.45 < 60 and cur:
            pages.append(cur)
            cur, y = [], 786.0
        y -= size * 1.45
        if text:
            cur.append(f"BT /{font} {size} Tf 1 0 0 1 56 {y:.1f} Tm {_pdf_lit(text)} Tj ET")
    pages.append(cur)
    objs = {1: b"<< /Type /Catalog /Pages 2 0 R >>",
            2: ("<< /Type /Pages /Kids [" + " ".join(f"{6 + 2 * i} 0 R" for i in range(len(pages)))
                + f"] /Count {len(pages)} >>").encode(),
            3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
            4: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>",
            5: (f"<< /Title {_pdf_textstring(info['title'])} /Author {_pdf_textstring(info.get('author', ''))} "
                f"/Producer {_pdf_textstring(info.get('producer', 'PDF export'))} /CreationDate ({info['date']}) "
                f"/ModDate ({info['date']}) >>").encode("ascii")}
    for i, pg in enumerate(pages):
        stream = ("\n".join(pg) + "\n").encode("ascii")
        objs[6 + 2 * i] = (f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R "
                           f"/F2 4 0 R >> >> /Contents {7 + 2 * i} 0 R >>").encode()
        objs[7 + 2 * i] = f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"endstream"
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = {}
    for num in sorted(objs):
        offsets[num] = len(out)
        out += f"{num} 0 obj\n".encode() + objs[num] + b"\nendobj\n"
    xref, size = len(out), max(objs) + 1
    out += f"xref\n0 {size}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offsets[n]:010d} 00000 n \n".encode() for n in range(1, size))
    fid = hashlib.md5(bytes(out)).hexdigest().upper()
    out += (f"trailer\n<< /Size {size} /Root 1 0 R /Info 5 0 R /ID [<{fid}> <{fid}>] >>\nstartxref\n{xref}\n"
            "%%EOF\n").encode()
    return bytes(out)


def pdf_date(when: dt.datetime) -> str:
    """``D:YYYYMMDDHHMMSS+HH'MM'`` of an aware datetime."""
    off = int(when.utcoffset().total_seconds() // 60) if when.utcoffset() else 0
    return f"D:{when:%Y%m%d%H%M%S}{'+' if off >= 0 else '-'}{abs(off) // 60:02d}'{abs(off) % 60:02d}'"


MIME_OF = {"pdf": ("application", "pdf"), "docx": ("application", f"{CT_MAIN.replace('+xml', '')}.document"),
           "txt": ("text", "plain")}


def eml_bytes(h: dict[str, Any], body: str, attachments: list[tuple[str, bytes, str]]) -> bytes:
    """An RFC 5322 message; ``h``: from_name, from_addr, to, cc ([(name, addr)]), subject, dt, message_id,
    in_reply_to, references, lang, mailer, cte. Attachments are (file name, bytes, format)."""
    msg = EmailMessage()
    msg["From"] = Address(display_name=h["from_name"], addr_spec=h["from_addr"])
    msg["To"] = tuple(Address(display_name=n, addr_spec=a) for n, a in h["to"])
    if h.get("cc"):
        msg["Cc"] = tuple(Address(display_name=n, addr_spec=a) for n, a in h["cc"])
    msg["Subject"] = h["subject"]
    msg["Date"] = format_datetime(h["dt"])
    msg["Message-ID"] = h["message_id"]
    if h.get("in_reply_to"):
        msg["In-Reply-To"] = h["in_reply_to"]
    if h.get("references"):
        msg["References"] = " ".join(h["references"])
    msg["Content-Language"] = {"en": "en-GB", "nl": "nl-NL", "fr": "fr-BE", "de": "de-DE"}[h["lang"]]
    msg["X-Mailer"] = h["mailer"]
    msg.set_content(body, charset="utf-8", cte=h["cte"])
    for name, data, fmt in attachments:
        maintype, subtype = MIME_OF[fmt]
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    if attachments:
        msg.set_boundary("----=_Part_" + hashlib.sha1(h["message_id"].encode()).hexdigest()[:24])
    return msg.as_bytes(policy=email_policy.SMTP.clone(max_line_length=998))


_PDF_STR = re.compile(rb"\(((?:\\.|[^\\)])*)\) Tj")


def _pdf_text(data: bytes) -> str:
    out = []
    for m in _PDF_STR.finditer(data):
        raw = re.sub(rb"\\([0-7]{3})", lambda x: bytes([int(x.group(1), 8)]), m.group(1))
        out.append(re.sub(rb"\\(.)", rb"\1", raw).decode("cp1252"))
    return "\n".join(out)


def _docx_text(data: bytes) -> str:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        names = [n for n in z.namelist() if re.match(r"word/(document|header\d*|footer\d*)\.xml$", n)]
        xml = "".join(z.read(n).decode("utf-8") for n in sorted(names))
    xml = re.sub(r"<w:del\b.*?</w:del>", "", xml, flags=re.S)
    text = re.sub(r"</w:p>", "\n", xml)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")


def extract_text(fmt: str, data: bytes, encoding: str = "utf-8") -> str:
    """The text a converter finds: DOCX accepted view with header/footer, PDF text layer, e-mail subject + body."""
    if fmt == "docx":
        return _docx_text(data)
    if fmt == "pdf":
        return _pdf_text(data)
    if fmt == "eml":
        msg = email.message_from_bytes(data, policy=email_policy.default)
        return str(msg["Subject"]) + "\n" + msg.get_body(preferencelist=("plain",)).get_content()
    return data.decode(encoding)
