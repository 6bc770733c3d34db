"""``w:altChunk``: content a DOCX imports from another part (ECMA-376 Part 1 §17.17.2.1), converted to lines.

Word merges an alternative-format chunk into the body when the file is opened, so its text is
body text at the chunk's position. The chunk part's format comes from its extension, then its
``[Content_Types].xml`` entry; HTML, MHT (MIME HTML), RTF, plain text and WordprocessingML
packages are converted by ki's own converters. Nested chunks are followed :data:`MAX_DEPTH` deep.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from ki.adapters.convert.model import StructuredDocument
from ki.adapters.convert.ooxml_package import OoxmlPackage, Relationship
from ki.core.errors import UnsupportedDocument

MAX_DEPTH = 3

_BY_EXTENSION = {".html": "html", ".htm": "html", ".xhtml": "html", ".mht": "mime", ".mhtml": "mime",
                 ".rtf": "rtf", ".txt": "txt", ".text": "txt", ".docx": "docx", ".docm": "docx"}
_BY_CONTENT_TYPE = {"text/html": "html", "application/xhtml+xml": "html", "message/rfc822": "mime",
                    "multipart/related": "mime", "application/x-mimearchive": "mime", "application/rtf": "rtf",
                    "text/rtf": "rtf", "text/plain": "txt",
                    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
                    "application/vnd.ms-word.document.macroenabled.12": "docx"}


Nested = Callable[[bytes, str], StructuredDocument]


def _convert(kind: str, data: bytes, name: str, nested: Nested) -> StructuredDocument:
    if kind == "html":
        from ki.adapters.convert.html import convert_html

        return convert_html(data, name)
    if kind == "mime":
        from ki.adapters.convert.mail import mime_body_document

        return mime_body_document(data, name)
    if kind == "rtf":
        from ki.adapters.convert.rtf import convert_rtf

        return convert_rtf(data, name)
    if kind == "docx":
        return nested(data, name)
    from ki.adapters.convert.text import convert_text

    return convert_text(data, name)


def alt_chunk_reader(
    pkg: OoxmlPackage,
    rels: list[Relationship],
    warnings: list[str],
    nested: Nested,
    *,
    depth: int = 0,
) -> Callable[[str], list[str] | None]:
    """A function ``r_id -> lines`` for :class:`~ki.adapters.convert.ooxml_walk.OoxmlWalker`.

    ``nested(data, name)`` converts a chunk that is itself a DOCX package (the caller's converter,
    one level deeper); ``depth`` is the caller's nesting depth.

    It returns None (and appends a warning to ``warnings``) when the chunk's part is missing, of an
    unknown format, nested too deeply or not convertible; ``[]`` for a chunk without text.
    """
    by_id = {r.rid: r for r in rels}

    def read(rid: str) -> list[str] | None:
        rel = by_id.get(rid)
        target = rel.part if rel is not None else None
        if target is None:
            warnings.append(f"altChunk {rid}: its part is not in the package; not converted")
            return None
        ext = posixpath.splitext(target)[1].lower()
        kind = _BY_EXTENSION.get(ext) or _BY_CONTENT_TYPE.get((pkg.content_type(target) or "").split(";")[0])
        if kind is None or (kind == "docx" and depth >= MAX_DEPTH):
            warnings.append(f"altChunk {rid} ({target}): format not converted")
            return None
        try:
            doc = _convert(kind, pkg.read(target), posixpath.basename(target), nested)
        except UnsupportedDocument as exc:
            if exc.reason in ("empty", "empty_text"):
                return []
            warnings.append(f"altChunk {rid} ({target}) could not be converted ({exc.reason}): {exc}")
            return None
        warnings.extend(f"altChunk {rid}: {w}" for w in doc.warnings)
        return [line for line in doc.text.split("\n") if line.strip()]

    return read
