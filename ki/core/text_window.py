"""Bounded text windows: what the reading stages read of a huge text.

Classify, Relate and Extract metadata read a document by rules (regexes, per-line loops) whose cost
grows with the text; a 120 MB text took minutes per stage. They read instead a *window*: the first
``head_chars`` characters and the last ``tail_chars`` (the header zone — Rubrum, letterhead, parties,
dates, references — and the closing zone — signatures, place and date, annex lists), joined by a blank
line. A text no longer than ``head_chars + tail_chars`` is read whole, unchanged, so results for
normal-sized documents do not move. The bound applied is recorded (:meth:`TextWindow.as_dict`) in each
stage's provenance and shown by ``ki export --json`` (``text_windows``). Indexing is never windowed.

Settings: ``pipeline.text_window.head_chars`` / ``tail_chars`` (:class:`ki.config.settings.TextWindowConfig`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

#: Where a cut may move to reach a line (or word) boundary, at most (characters).
_BOUNDARY_SLACK = 2_000
_SEPARATOR = "\n\n"
#: :func:`normalised_digest` hashes the text in slices of about this many characters.
_DIGEST_SLICE = 1 << 20


@dataclass(frozen=True)
class TextWindow:
    """The bound one stage applied to one text.

    Attributes:
        read_chars: characters of the text the stage read (the window, without the separator).
        total_chars: characters of the whole text.
        truncated: True when the stage read less than the whole text.
        head_chars / tail_chars: the configured bound (characters from the start / from the end).
    """

    read_chars: int
    total_chars: int
    truncated: bool
    head_chars: int
    tail_chars: int

    def as_dict(self) -> dict[str, Any]:
        """``{read_chars, total_chars, truncated, head_chars, tail_chars}`` (JSON-ready)."""
        return {"read_chars": self.read_chars, "total_chars": self.total_chars, "truncated": self.truncated,
                "head_chars": self.head_chars, "tail_chars": self.tail_chars}


def _head_end(text: str, limit: int) -> int:
    """End of the head: ``limit`` moved back to a line break (else a space) when one is near (exclusive)."""
    for sep in ("\n", " "):
        cut = text.rfind(sep, max(0, limit - _BOUNDARY_SLACK), limit)
        if cut > 0:
            return cut
    return limit


def _tail_start(text: str, start: int) -> int:
    """Start of the tail: ``start`` moved forward to just after a line break (else a space) when one is near."""
    for sep in ("\n", " "):
        cut = text.find(sep, start, min(len(text), start + _BOUNDARY_SLACK))
        if cut >= 0:
            return cut + 1
    return start


def window_text(text: str | None, *, head_chars: int, tail_chars: int) -> tuple[str, TextWindow]:
    """(window, bound) of ``text``: the whole text when ``len(text) <= head_chars + tail_chars``, else its
    first ``head_chars`` characters and its last ``tail_chars`` (each cut moved to a nearby line or word
    boundary, by at most 2,000 characters inward) joined by a blank line. Pure, linear in the window."""
    text = text or ""
    total = len(text)
    if total <= head_chars + tail_chars:
        return text, TextWindow(total, total, False, head_chars, tail_chars)
    return window_of_parts(text[:head_chars], text[total - tail_chars:] if tail_chars > 0 else "", total,
                           head_chars=head_chars, tail_chars=tail_chars)


def window_of_parts(head_part: str, tail_part: str, total: int, *, head_chars: int, tail_chars: int
                    ) -> tuple[str, TextWindow]:
    """:func:`window_text` of a text longer than ``head_chars + tail_chars`` from only its first ``head_chars``
    characters (``head_part``) and its last ``tail_chars`` (``tail_part``) — the same window, for a reader that
    pages through a huge text (``total`` characters) and need not read the middle."""
    head = head_part[:_head_end(head_part, head_chars)] if head_chars > 0 else ""
    tail = tail_part[_tail_start(tail_part, 0):] if tail_chars > 0 else ""
    window = head + _SEPARATOR + tail if head and tail else head or tail
    return window, TextWindow(len(head) + len(tail), total, True, head_chars, tail_chars)


def windowed_body(body: dict[str, Any], *, head_chars: int, tail_chars: int) -> tuple[dict[str, Any], TextWindow]:
    """A shallow copy of a ``structured_json`` body whose ``text`` (and ``original_text``, the view before
    tracked changes) are windowed by :func:`window_text`; the bound is that of ``text``. The body itself
    is not changed; when nothing is cut the same dict is returned."""
    text, bound = window_text(body.get("text"), head_chars=head_chars, tail_chars=tail_chars)
    original = body.get("original_text")
    cut_original = original is not None and len(original) > head_chars + tail_chars
    if not bound.truncated and not cut_original:
        return body, bound
    out = {**body, "text": text}
    if cut_original:
        out["original_text"] = window_text(original, head_chars=head_chars, tail_chars=tail_chars)[0]
    return out, bound


def normalised_digest(text: str | None) -> str:
    """SHA-1 hex digest of ``" ".join(text.split())`` computed slice by slice: the same value, in bounded
    extra memory (splitting a 120 MB text at once builds a list of millions of words)."""
    text = text or ""
    h = hashlib.sha1()
    pos, n, first = 0, len(text), True
    while pos < n:
        end = min(n, pos + _DIGEST_SLICE)
        while end < n and not text[end].isspace():  # never cut inside a word
            end += 1
        words = text[pos:end].split()
        if words:
            h.update(((" " if not first else "") + " ".join(words)).encode())
            first = False
        pos = end
    return h.hexdigest()
