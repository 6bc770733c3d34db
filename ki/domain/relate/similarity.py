"""Text similarity for version detection: word-shingle Jaccard (pure, no dependencies).

A small shingle-Jaccard of our own instead of ``datasketch`` MinHash: candidate sets are the
files of one matter (tens to a few thousand), so exact Jaccard over 3-word shingles is cheap
and needs no new dependency. Texts are compared without their first line when that line is a
draft stamp (a redline and its clean rendition differ only there).
"""

from __future__ import annotations

import re
from functools import lru_cache

WORD = re.compile(r"[0-9a-zäöüß]+")


def tokens(text: str) -> list[str]:
    """Lower-case word tokens (line breaks and punctuation are not words, so PDF re-wrapping is invisible)."""
    return WORD.findall((text or "").lower())


@lru_cache(maxsize=4096)
def shingles(text: str, k: int = 3) -> frozenset[int]:
    """Hashes of the ``k``-word shingles of ``text`` (a one-word text gives its single word)."""
    words = tokens(text)
    if len(words) < k:
        return frozenset({hash(" ".join(words))}) if words else frozenset()
    return frozenset(hash(" ".join(words[i:i + k])) for i in range(len(words) - k + 1))


def jaccard(a: str, b: str, k: int = 3) -> float:
    """Jaccard similarity of the ``k``-shingle sets of two texts (0.0 when either is empty)."""
    sa, sb = shingles(a, k), shingles(b, k)
    if not sa or not sb:
        return 0.0
    inter = len(sa & sb)
    return inter / (len(sa) + len(sb) - inter)


def containment(small: str, big: str, k: int = 3) -> float:
    """Share of ``small``'s shingles that occur in ``big`` (0.0 when ``small`` is empty)."""
    sa, sb = shingles(small, k), shingles(big, k)
    if not sa:
        return 0.0
    return len(sa & sb) / len(sa)


def normalised_body(text: str, *, drop_first_line: bool) -> str:
    """``text`` as compared for versions: optionally without its first (stamp) line, whitespace collapsed."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    if drop_first_line and lines:
        lines = lines[1:]
    return " ".join(" ".join(lines).split())
