"""Build small PDFs from content-stream operators, for converter tests (ISO 32000-1 syntax by hand).

``latin_pdf(pages)`` writes one page per entry; each page is a list of content-stream lines drawn
with Helvetica (a standard 14 font, WinAnsiEncoding: byte 0xAD is the soft hyphen). Text is given
as PDF string bytes, so tests control kerning (``TJ`` arrays), positions (``Td``) and every byte.
``annotations`` adds annotation dictionaries (raw PDF syntax) to a page; ``acroform`` the form.
"""

from __future__ import annotations


def _obj(num: int, body: bytes) -> bytes:
    return b"%d 0 obj\n" % num + body + b"\nendobj\n"


def latin_pdf(pages: list[list[bytes]], *, annotations: dict[int, list[bytes]] | None = None,
              fields: list[bytes] | None = None, size: tuple[int, int] = (612, 792)) -> bytes:
    """A PDF whose page ``i`` runs the content lines ``pages[i]`` (``BT``/``ET`` included by the caller).

    Font resource ``/F1`` is Helvetica (WinAnsiEncoding). ``annotations[i]`` are annotation
    dictionaries (``<< /Type /Annot ... >>``) of page ``i``; ``fields`` are widget annotation
    dictionaries of page 0 that also become the AcroForm's fields.
    """
    annotations = annotations or {}
    objects: list[bytes] = []
    n_pages = len(pages)
    # 1 catalog, 2 pages, 3 font, then per page: page, content; then annotations, fields.
    page_nums = [4 + 2 * i for i in range(n_pages)]
    next_num = 4 + 2 * n_pages
    annot_nums: dict[int, list[int]] = {}
    extra: list[tuple[int, bytes]] = []
    for i in range(n_pages):
        for body in annotations.get(i, []) + (fields or [] if i == 0 else []):
            annot_nums.setdefault(i, []).append(next_num)
            extra.append((next_num, body.replace(b"/P PAGE", b"/P %d 0 R" % page_nums[i])))
            next_num += 1
    field_nums = annot_nums.get(0, [])[-len(fields):] if fields else []
    acro = b" /AcroForm << /Fields [%s] /NeedAppearances true >>" % b" ".join(b"%d 0 R" % n for n in field_nums) \
        if fields else b""
    objects.append(_obj(1, b"<< /Type /Catalog /Pages 2 0 R" + acro + b" >>"))
    kids = b" ".join(b"%d 0 R" % n for n in page_nums)
    objects.append(_obj(2, b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, n_pages)))
    objects.append(_obj(3, b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"))
    for i, lines in enumerate(pages):
        stream = b"\n".join(lines)
        annots = b" /Annots [%s]" % b" ".join(b"%d 0 R" % n for n in annot_nums[i]) if i in annot_nums else b""
        objects.append(_obj(page_nums[i], b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] "
                                          b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R%s >>"
                            % (size[0], size[1], page_nums[i] + 1, annots)))
        objects.append(_obj(page_nums[i] + 1, b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream"))
    for num, body in extra:
        objects.append(_obj(num, body))
    objects.sort(key=lambda o: int(o.split(b" ", 1)[0]))
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for o in objects:
        offsets.append(len(out))
        out += o
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def text_lines(*lines: bytes, x: int = 72, y: int = 720, size: int = 12, leading: int = 16) -> list[bytes]:
    """Content lines drawing each PDF string (or raw ``TJ`` array when it starts with ``[``) on its own line."""
    out = [b"BT /F1 %d Tf %d TL %d %d Td" % (size, leading, x, y)]
    for i, line in enumerate(lines):
        op = b"TJ" if line.startswith(b"[") else b"Tj"
        out.append((b"T* " if i else b"") + line + b" " + op)
    out.append(b"ET")
    return out
