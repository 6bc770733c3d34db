"""The index stage's rows of one document, made a batch at a time (bounded memory).

Spec: insertion-pipeline.md "Index" (every textual part chunked, body first; the profile row at ordinal −1;
each row embedded with the optional context header). A 120 MB text has ~70,000 passages: holding them all as
strings, then all their embedding inputs, vectors and row objects at once took the ki process to 1.3 GB. Here
a document's passages are kept as positions in its parts' texts (:class:`PassagePlan`: three integer arrays,
~1.7 MB for 70,000 passages) and :class:`DocumentRows` builds the rows of one batch of
:data:`STREAM_ROWS` ordinals when they are embedded or written, then drops them.

The rows are exactly the ones the stage wrote before (same ordinals, kinds, meta, texts and embedding
inputs): :func:`ki.index.chunking.chunk_spans` gives the chunks of ``chunk_text`` as offsets.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, overload

import numpy as np

from ki.convert.model import TextualPart
from ki.index.backend import PROFILE_KIND, PROFILE_ORDINAL, ChunkRow
from ki.index.chunking import chunk_spans
from ki.index.embeddings import embedding_input

#: Ordinals per batch of the index stage: embedded (one cache lookup and store) and built for the write
#: together; the PostgreSQL write's own statements are :data:`ki.index.postgres.WRITE_BATCH_ROWS` rows.
STREAM_ROWS = 1_000


def part_meta(part: TextualPart) -> dict[str, str] | None:
    """The ``meta`` of a part's rows: its key and, for comments, anchor and author (None for the body)."""
    if part.kind == "body":
        return None
    return {k: v for k, v in (("key", part.key), ("anchor", part.anchor), ("author", part.author)) if v}


@dataclass(frozen=True)
class PassagePlan:
    """Where each passage of a document is: ordinal ``i`` is ``parts[part[i]].text[start[i]:end[i]]``.

    Build with :meth:`of`; ``len(plan)`` is the number of passages (ordinals ``0..n-1``).
    """

    parts: tuple[TextualPart, ...]
    part: array
    start: array
    end: array

    @classmethod
    def of(cls, parts: Sequence[TextualPart], *, chunk_chars: int, overlap_chars: int) -> PassagePlan:
        """Chunk every part (``retrieval.chunk_chars`` / ``chunk_overlap_chars``), body first, in ordinal order.

        Raises ValueError when overlap ≥ chunk size.
        """
        idx, starts, ends = array("q"), array("q"), array("q")
        for i, p in enumerate(parts):
            for s, e in chunk_spans(p.text, chunk_chars=chunk_chars, overlap_chars=overlap_chars):
                idx.append(i)
                starts.append(s)
                ends.append(e)
        return cls(tuple(parts), idx, starts, ends)

    def __len__(self) -> int:
        return len(self.part)

    def text(self, ordinal: int) -> str:
        """The passage's text (a new string: the slice of its part)."""
        return self.parts[self.part[ordinal]].text[self.start[ordinal]:self.end[ordinal]]

    def passage(self, ordinal: int) -> tuple[str, str, dict[str, str] | None]:
        """(kind, text, meta) of passage ``ordinal``."""
        part = self.parts[self.part[ordinal]]
        return part.kind, part.text[self.start[ordinal]:self.end[ordinal]], part_meta(part)


class VectorSource(Protocol):
    """Where the rows' vectors are read from when they are written (:class:`ki.index.embedding_cache.CachedVectors`)."""

    def get(self, inputs: Mapping[int, str]) -> dict[int, np.ndarray]:
        """ordinal → float32 vector for every ordinal of ``inputs`` (ordinal → exact embedded text)."""
        ...


class DocumentRows(Sequence[ChunkRow]):
    """Every row of one document, profile first (position 0 = ordinal −1, position ``i`` = ordinal ``i−1``),
    built on demand: indexing or slicing builds only the rows asked for; iterating builds
    :data:`STREAM_ROWS` at a time. Passed as :attr:`ki.index.backend.IndexDocument.rows`.

    Args:
        profile_text: the profile row's text (what its vector is made from); profile_meta: its ``meta``.
        plan: the passages.
        header: the context header prefixed to each passage's embedding input ("" for none).
        vectors: where the rows' vectors come from (None: rows without vectors).
    """

    def __init__(self, profile_text: str, profile_meta: dict[str, Any], plan: PassagePlan, *, header: str = "",
                 vectors: VectorSource | None = None):
        self.profile_text, self.profile_meta, self.plan = profile_text, profile_meta, plan
        self.header, self.vectors = header, vectors

    def with_vectors(self, vectors: VectorSource) -> DocumentRows:
        """The same rows, their vectors read from ``vectors``."""
        return DocumentRows(self.profile_text, self.profile_meta, self.plan, header=self.header, vectors=vectors)

    def __len__(self) -> int:
        return 1 + len(self.plan)

    def ordinals(self) -> range:
        """The rows' ordinals in order (−1, 0, …, n−1), without building the rows."""
        return range(PROFILE_ORDINAL, len(self.plan))

    def inputs(self, lo: int, hi: int) -> dict[int, str]:
        """ordinal → the exact text embedded for the rows at positions ``lo..hi-1`` (the profile row's text
        alone; a passage with the header: :func:`ki.index.embeddings.embedding_input`)."""
        out: dict[int, str] = {}
        for pos in range(max(lo, 0), min(hi, len(self))):
            o = pos - 1
            out[o] = self.profile_text if o == PROFILE_ORDINAL else embedding_input(self.plan.text(o), self.header)
        return out

    def input_batches(self, size: int = STREAM_ROWS) -> Iterator[dict[int, str]]:
        """:meth:`inputs` of consecutive batches of ``size`` rows (the embedding pass)."""
        for lo in range(0, len(self), size):
            yield self.inputs(lo, lo + size)

    def _build(self, lo: int, hi: int) -> list[ChunkRow]:
        lo, hi = max(lo, 0), min(hi, len(self))
        if lo >= hi:
            return []
        vectors = self.vectors.get(self.inputs(lo, hi)) if self.vectors is not None else {}
        rows: list[ChunkRow] = []
        for pos in range(lo, hi):
            o = pos - 1
            if o == PROFILE_ORDINAL:
                rows.append(ChunkRow(o, self.profile_text, vectors.get(o), PROFILE_KIND, self.profile_meta))
            else:
                kind, text_, meta = self.plan.passage(o)
                rows.append(ChunkRow(o, text_, vectors.get(o), kind, meta))
        return rows

    @overload
    def __getitem__(self, index: int) -> ChunkRow: ...

    @overload
    def __getitem__(self, index: slice) -> list[ChunkRow]: ...

    def __getitem__(self, index: int | slice) -> ChunkRow | list[ChunkRow]:
        if isinstance(index, slice):
            lo, hi, step = index.indices(len(self))
            if step != 1:
                raise ValueError("DocumentRows slices have step 1")
            return self._build(lo, hi)
        pos = index + len(self) if index < 0 else index
        if not 0 <= pos < len(self):
            raise IndexError(index)
        return self._build(pos, pos + 1)[0]

    def __iter__(self) -> Iterator[ChunkRow]:
        for lo in range(0, len(self), STREAM_ROWS):
            yield from self._build(lo, lo + STREAM_ROWS)
