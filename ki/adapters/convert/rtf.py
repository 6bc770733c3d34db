"""RTF to plain text with striprtf (BSD-3; conversion.md section 7.3).

striprtf is correct on code pages and umlauts but has four gaps that ki closes
before and after calling it, without touching its module state:

* ``\\binN`` is followed by N raw bytes that may contain braces or backslashes;
  they are cut out here (striprtf only handles ``\\bin`` inside ``\\pict``).
* raw 8-bit bytes are rewritten as ``\\'xx`` so they decode with the document's code
  page, and ``\\fcharset0`` fonts are pointed at the ``\\ansicpg`` code page
  (striprtf would use cp1252 for them whatever ``\\ansicpg`` says).
* ``\\uN`` surrogate halves are paired through UTF-16; lone halves become U+FFFD.
* a ``\\*`` that is not the first control of its group is dropped: striprtf would ignore the
  rest of that group (RTF 1.9.1 defines ``\\*`` only as ``{\\*\\destination …}``). A pre-pass
  rather than another library: striprtf is right on everything else the corpus checks, and
  pandoc, the best-known alternative, is GPL.

Table cells are separated by a tab instead of striprtf's ``|``. Headers, footers,
footnotes and annotations are destinations striprtf drops from the body; ki
converts those groups separately into ``parts`` and ``comments``.
"""

from __future__ import annotations

import codecs
import re

from striprtf.striprtf import font_table_group, rtf_to_text

from ki.adapters.convert.model import Comment, StructuredDocument, clean_text
from ki.core.errors import UnsupportedDocument

_SIGNATURE = re.compile(r"^[\s\ufeff\xef\xbb\xbf]*\{\\rtf", re.ASCII)
# Escaped backslash/brace first, so "\\bin5" (literal text) is not read as a control word.
_TOKEN = re.compile(r"\\[\\{}]|\\bin(-?\d+) ?|\\(?:nest)?cell(?![a-zA-Z]) ?|(\\\*)", re.ASCII)
_HIGH_BYTE = re.compile(r"[\x80-\xff]")
_ANSICPG = re.compile(r"\\ansicpg(\d+)")
_FCHARSET0 = re.compile(r"\\fcharset0(?![0-9])")
_TITLE = re.compile(r"\{\\title\b ?((?:[^{}\\]|\\.)*)\}", re.DOTALL)
_SIDE_GROUP = re.compile(r"\{(?:\\\*)?\\(header|footer|footnote|annotation|atnauthor)[lrf]?(?![a-zA-Z]) ?")
_BRACE = re.compile(r"\\[\\{}]|[{}]")
_PART_NAMES = {"header": "header", "footer": "footer", "footnote": "footnotes"}
_CHARSET_WORDS = (("\\mac", "mac_roman"), ("\\pca", "cp850"), ("\\pc", "cp437"))


def convert_rtf(data: bytes, filename: str) -> StructuredDocument:
    """Convert an RTF document to plain text.

    Args:
        data: the raw RTF bytes (must start with ``{\\rtf``, after optional whitespace or BOM).
        filename: used only in error messages.

    Returns:
        ``StructuredDocument(format="rtf", converter="ki.rtf")``: ``text`` is the body text
        (paragraphs on their own lines, table cells tab-separated, embedded objects and
        pictures omitted), ``title`` the ``\\info`` title, ``encoding`` the code page used for
        ``\\'xx`` escapes (e.g. ``cp1250``). ``metadata`` counts ``objects`` (``\\object``),
        ``pictures`` (``\\pict``) and ``bin_bytes`` (raw ``\\bin`` bytes skipped).

    Raises:
        UnsupportedDocument: reason ``empty`` (0 bytes), ``corrupt`` (no ``{\\rtf`` signature)
            or ``empty_text`` (no text once objects and pictures are removed).
    """
    if not data:
        raise UnsupportedDocument(f"{filename}: 0 bytes", reason="empty")
    source = data.decode("latin-1")  # one char per byte: \bin lengths stay byte counts
    if not _SIGNATURE.match(source[:64]):
        raise UnsupportedDocument(
            f"{filename}: not RTF (no {{\\rtf signature)", reason="corrupt", details={"magic": data[:8].hex()}
        )
    source = source.lstrip().lstrip("\ufeff\xef\xbb\xbf")
    source, bin_bytes = _prepare(source)
    encoding = _code_page(source)
    if encoding != "cp1252":
        source = _FCHARSET0.sub(r"\\fcharset1", source)  # 1 = DEFAULT_CHARSET: the \ansicpg page
    try:
        raw = rtf_to_text(source, encoding=encoding, errors="replace")
    except (ValueError, LookupError, IndexError) as exc:
        raise UnsupportedDocument(f"{filename}: RTF parse failed: {exc}", reason="corrupt") from exc
    text = _normalise(raw)
    metadata = {
        "objects": len(re.findall(r"\\object(?![a-zA-Z])", source)),
        "pictures": len(re.findall(r"\\pict(?![a-zA-Z])", source)),
        "bin_bytes": bin_bytes,
    }
    if not text:
        raise UnsupportedDocument(f"{filename}: no text", reason="empty_text", details=metadata)
    parts, comments = _side_text(source, encoding)
    return StructuredDocument(
        text=text,
        format="rtf",
        converter="ki.rtf",
        title=_title(source, encoding),
        encoding=encoding,
        parts=parts,
        comments=comments,
        metadata=metadata,
    )


def _prepare(source: str) -> tuple[str, int]:
    """Cut ``\\bin`` payloads, turn cell ends into tabs, escape raw 8-bit bytes."""
    out: list[str] = []
    pos = 0
    skipped = 0
    while (match := _TOKEN.search(source, pos)) is not None:
        out.append(source[pos : match.start()])
        if match.group(1) is not None:
            length = max(int(match.group(1)), 0)
            skipped += min(length, len(source) - match.end())
            pos = match.end() + length
            continue
        if match.group(2) is not None:
            # RTF 1.9.1: "\*" marks an ignorable destination only as the first control of a group
            # ("{\*\dest ...}"). striprtf ignores the rest of *any* group holding a "\*"; one that
            # does not follow "{" means nothing, so it is dropped and the group's text kept.
            if _opens_group(source, match.start()):
                out.append(match.group(0))
            pos = match.end()
            continue
        token = match.group(0)
        out.append(token if token[1] in "\\{}" else "\\tab ")
        pos = match.end()
    out.append(source[pos:])
    joined = "".join(out)
    return _HIGH_BYTE.sub(lambda m: f"\\'{ord(m.group()):02x}", joined), skipped


def _opens_group(source: str, pos: int) -> bool:
    """Whether the control at ``pos`` is the first of its group: after ``{`` (not ``\\{``), whitespace aside."""
    i = pos - 1
    while i >= 0 and source[i] in " \t\r\n":
        i -= 1
    if i < 0 or source[i] != "{":
        return False
    slashes = 0
    while i - 1 - slashes >= 0 and source[i - 1 - slashes] == "\\":
        slashes += 1
    return slashes % 2 == 0


def _code_page(source: str) -> str:
    header = source[:4096]
    match = _ANSICPG.search(header)
    if match:
        name = "utf-8" if match.group(1) == "65001" else f"cp{match.group(1)}"
        try:
            return codecs.lookup(name).name
        except LookupError:
            return "cp1252"
    for word, codec in _CHARSET_WORDS:
        if re.search(re.escape(word) + r"(?![a-zA-Z])", header):
            return codec
    return "cp1252"


def _normalise(raw: str) -> str:
    if any("\ud800" <= ch <= "\udfff" for ch in raw):
        raw = raw.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    raw = clean_text(raw).replace("\ufeff", "").replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in raw.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _group_end(source: str, start: int) -> int:
    """Index just past the ``}`` closing the group whose body starts at ``start``."""
    depth = 1
    for match in _BRACE.finditer(source, start):
        token = match.group(0)
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
            if depth == 0:
                return match.end()
    return len(source)


def _side_text(source: str, encoding: str) -> tuple[dict[str, str], list[Comment]]:
    """Text of header/footer/footnote groups (``parts``) and annotations (``comments``)."""
    fonts = font_table_group(source)
    collected: dict[str, list[str]] = {}
    comments: list[Comment] = []
    author: str | None = None
    pos = 0
    while (match := _SIDE_GROUP.search(source, pos)) is not None:
        end = _group_end(source, match.end())
        kind = match.group(1)
        body = "{\\rtf1" + fonts + " " + source[match.end() : end - 1] + "}"
        try:
            text = _normalise(rtf_to_text(body, encoding=encoding, errors="replace"))
        except (ValueError, LookupError, IndexError):
            text = ""
        if kind == "atnauthor":
            author = text or None
        elif kind == "annotation":
            comments.append(Comment(comment_id=str(len(comments) + 1), author=author, text=text))
            author = None
        elif text:
            collected.setdefault(_PART_NAMES[kind], []).append(text)
        pos = end if kind != "atnauthor" else match.end()
    return {name: "\n\n".join(texts) for name, texts in collected.items()}, comments


def _title(source: str, encoding: str) -> str | None:
    match = _TITLE.search(source[:65536])
    if not match:
        return None
    wrapped = "{\\rtf1 " + match.group(1) + "}"  # no \\ansicpg: striprtf uses ``encoding``
    try:
        title = _normalise(rtf_to_text(wrapped, encoding=encoding, errors="replace"))
    except (ValueError, LookupError, IndexError):
        return None
    return " ".join(title.split()) or None
