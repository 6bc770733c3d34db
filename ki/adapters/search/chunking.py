"""Split accepted text into overlapping chunks.

Spec: insertion-pipeline.md "Index" (retrieval.chunk_chars / chunk_overlap_chars).

:func:`chunk_spans` gives the chunks as ``(start, end)`` offsets into the text, so the index stage can
keep a huge text's ~70,000 chunk positions (a few MB) instead of their texts and slice each batch when it
is embedded or written; :func:`chunk_text` is the same chunks as strings.
"""

from __future__ import annotations

import re

_NON_SPACE = re.compile(r"\S")  # ``\s`` of a str pattern is ``str.isspace``: the same set ``str.strip`` drops


def _strip_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """``(s, e)`` with ``text[s:e] == text[start:end].strip()`` (``s == e`` when it is blank); no copy."""
    first = _NON_SPACE.search(text, start, end)
    if first is None:
        return start, start
    e = end
    while e > first.start() and text[e - 1].isspace():
        e -= 1
    return first.start(), e


def chunk_spans(text: str, *, chunk_chars: int, overlap_chars: int) -> list[tuple[int, int]]:
    """The chunks of :func:`chunk_text` as ``(start, end)`` offsets: ``text[start:end]`` is each chunk.

    Same rules: chunks of at most ``chunk_chars`` characters of the stripped text, consecutive ones
    sharing about ``overlap_chars``; a chunk ends at the last paragraph break, else line break, else
    space in its second half, so words are not cut when avoidable; each chunk is stripped, blank ones
    and ones inside the previous one are left out, one holding the previous one replaces it (starts and
    ends strictly increase). Reads the text in place (no copy of it). Empty or whitespace text → [].
    Raises ValueError when overlap ≥ chunk size.
    """
    if overlap_chars >= chunk_chars:
        raise ValueError("chunk_overlap_chars must be smaller than chunk_chars")
    start, n = _strip_bounds(text, 0, len(text))
    spans: list[tuple[int, int]] = []
    while start < n:
        end = min(start + chunk_chars, n)
        if end < n:
            half = start + (end - start) // 2
            for sep in ("\n\n", "\n", " "):
                cut = text.rfind(sep, half, end)
                if cut > start:
                    end = cut + len(sep)
                    break
        s, e = _strip_bounds(text, start, end)
        if s < e and (not spans or e > spans[-1][1]):  # a chunk inside the previous one adds nothing
            if spans and s <= spans[-1][0]:  # one holding the previous one (same start once stripped) replaces it
                spans[-1] = (s, e)
            else:
                spans.append((s, e))
        if end >= n:
            break
        nxt = max(end - overlap_chars, start + 1)
        # begin the overlap at a word boundary
        space = text.find(" ", nxt, end)
        start = space + 1 if 0 <= space < end - 1 else nxt
    return spans


def chunk_text(text: str, *, chunk_chars: int, overlap_chars: int) -> list[str]:
    """Chunks of at most ``chunk_chars`` characters, consecutive ones sharing about ``overlap_chars``
    (the texts of :func:`chunk_spans`; see there). Raises ValueError when overlap ≥ chunk size."""
    return [text[s:e] for s, e in chunk_spans(text, chunk_chars=chunk_chars, overlap_chars=overlap_chars)]
