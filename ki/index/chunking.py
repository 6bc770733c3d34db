"""Split accepted text into overlapping chunks.

Spec: insertion-pipeline.md "Index" (retrieval.chunk_chars / chunk_overlap_chars).
"""

from __future__ import annotations


def chunk_text(text: str, *, chunk_chars: int, overlap_chars: int) -> list[str]:
    """Chunks of at most ``chunk_chars`` characters, consecutive ones sharing about ``overlap_chars``.

    A chunk ends at the last paragraph break, else line break, else space in its
    second half, so words are not cut when avoidable. Empty or whitespace text → [].
    Raises ValueError when overlap ≥ chunk size.
    """
    if overlap_chars >= chunk_chars:
        raise ValueError("chunk_overlap_chars must be smaller than chunk_chars")
    text = text.strip()
    if not text:
        return []
    chunks: list[str] = []
    start = 0
    n = len(text)
    while start < n:
        end = min(start + chunk_chars, n)
        if end < n:
            window = text[start:end]
            half = len(window) // 2
            for sep in ("\n\n", "\n", " "):
                cut = window.rfind(sep, half)
                if cut > 0:
                    end = start + cut + len(sep)
                    break
        piece = text[start:end].strip()
        if piece:
            chunks.append(piece)
        if end >= n:
            break
        nxt = max(end - overlap_chars, start + 1)
        # begin the overlap at a word boundary
        space = text.find(" ", nxt, end)
        start = space + 1 if 0 <= space < end - 1 else nxt
    return chunks
