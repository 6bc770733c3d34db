"""Embedded objects of an OOXML package (``word/embeddings``, ``ppt/embeddings``, ``xl/embeddings``).

An embedded PDF, DOCX, XLSX, text file or OLE package becomes a child document
(see :mod:`ki.adapters.convert.embedded`). A member is either the embedded file itself (an OOXML package
such as ``Microsoft_Word_Document.docx``, a PDF) or an OLE object (``oleObject1.bin``) unpacked by
:mod:`ki.adapters.convert.ole`. Media without a document format (sounds, clips) and OLE objects holding no
document (equations, drawings) are left out with a warning naming the member (and the OLE streams).
"""

from __future__ import annotations

import posixpath
import re

from ki.adapters.convert.formats import CFB_MAGIC, is_document, sniff_bytes
from ki.adapters.convert.ole import ole_streams, unpack_ole
from ki.adapters.convert.ooxml_package import MAX_MEMBER_BYTES, OoxmlPackage
from ki.core.errors import UnsupportedDocument

_EMBEDDING = re.compile(r"^(?:word|ppt|xl)/embeddings/[^/]+$", re.IGNORECASE)


def _natural(name: str) -> list:
    return [int(tok) if tok.isdigit() else tok for tok in re.split(r"(\d+)", name.lower())]


def embedded_files(pkg: OoxmlPackage) -> list[tuple[str, bytes]]:
    """``(file name, bytes)`` of every embedded document, in natural member order.

    The name is the file's own (an OLE package's label, e.g. ``TestText.txt``), else the member's
    (``Microsoft_Word_Document.docx``), else the member's stem with the detected extension
    (``oleObject2.pdf``). A member that cannot be read or holds no document is skipped with a warning
    on ``pkg.warnings``.
    """
    out: list[tuple[str, bytes]] = []
    members = sorted((info.filename for lower, info in pkg.names.items() if _EMBEDDING.match(lower)), key=_natural)
    for member in members:
        try:
            blob = pkg.read(member)
        except UnsupportedDocument as exc:
            pkg.warnings.append(f"embedded object {member} skipped: {exc}")
            continue
        base = posixpath.basename(member)
        stem, ext = posixpath.splitext(base)
        if blob.startswith(CFB_MAGIC) and ext.lower() in (".bin", ""):
            content = unpack_ole(blob, max_bytes=MAX_MEMBER_BYTES)
            if content is None or not content.data:
                streams = ole_streams(blob)
                held = f"streams {', '.join(streams)}" if streams else "not readable OLE"
                pkg.warnings.append(f"embedded object {member} skipped: no document ki reads in it ({held})")
                continue
            name = content.name or f"{stem}.{content.ext}"
            if not is_document(content.data, name):
                pkg.warnings.append(f"embedded object {member} skipped: {name} is not a document format ki reads")
                continue
            out.append((name, content.data))
        elif blob and is_document(blob, base):
            kind = sniff_bytes(blob)
            if ext.lower() in ("", ".bin") and kind:
                base = f"{stem}.{'pdf' if kind == 'pdf' else kind}"
            out.append((base, blob))
        else:
            pkg.warnings.append(f"embedded object {member} skipped: not a document format ki reads")
    return out
