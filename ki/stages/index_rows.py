"""The index stage's rows of one document, made a batch at a time (bounded memory).

Spec: insertion-pipeline.md "Index" (every textual part chunked, body first; the profile row at ordinal −1 for
the latest final version; clause rows at ordinals 1000+ for final versions; each row embedded with the optional
context header). A 120 MB text has ~70,000 passages: holding them all as
strings, then all their embedding inputs, vectors and row objects at once took the ki process to 1.3 GB. Here
a document's passages are kept as positions in its parts' texts (:class:`PassagePlan`: three integer arrays,
~1.7 MB for 70,000 passages) and :class:`DocumentRows` builds the rows of one batch of
:data:`STREAM_ROWS` ordinals when they are embedded or written, then drops them.

The rows are exactly the ones the stage wrote before (same ordinals, kinds, meta, texts and embedding
inputs): :func:`ki.adapters.search.chunking.chunk_spans` gives the chunks of ``chunk_text`` as offsets.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, overload

import numpy as np

from ki.adapters.convert.model import TextualPart
from ki.adapters.search.backend import CLAUSE_KIND, PROFILE_KIND, PROFILE_ORDINAL, ChunkRow
from ki.adapters.search.chunking import chunk_spans
from ki.adapters.search.embeddings import embedding_input

#: The embedding cache's pseudo-ordinal of a document's matter header: embedded once per (blob, matter), never as
#: part of a passage (so every passage of a blob is embedded once, whatever matter its copies are filed under).
MATTER_ORDINAL = -2
#: The share of the matter header's vector in a passage's or clause's vector (the sum is re-normalised).
MATTER_WEIGHT = 0.25
#: Ordinals per batch of the index stage: embedded (one cache lookup and store) and built for the write
#: together; the PostgreSQL write's own statements are :data:`ki.store.chunk_rows.WRITE_BATCH_ROWS` rows.
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
    """Where the rows' vectors are read from when they are written
    (:class:`ki.adapters.search.embedding_cache.CachedVectors`)."""

    def get(self, inputs: Mapping[int, str]) -> dict[int, np.ndarray]:
        """ordinal → float32 vector for every ordinal of ``inputs`` (ordinal → exact embedded text)."""
        ...


def blend(vector: np.ndarray | None, matter: np.ndarray | None) -> np.ndarray | None:
    """``vector`` + :data:`MATTER_WEIGHT` × ``matter``, unit length (float32); ``vector`` itself when either is
    None. A passage's vector so names its matter (spec "Index": the context header names title, type and matter)
    while the passage itself is embedded once per blob."""
    if vector is None or matter is None:
        return vector
    out = np.asarray(vector, dtype=np.float32) + MATTER_WEIGHT * np.asarray(matter, dtype=np.float32)
    norm = float(np.linalg.norm(out))
    return (out / norm).astype(np.float32) if norm else np.asarray(vector, dtype=np.float32)


@dataclass(frozen=True)
class ClauseRows:
    """The clause rows of a final version (:mod:`ki.adapters.search.clauses`), in ordinal order from ``base``.

    ``texts``: each clause's text (the row's text); ``meta``: each row's ``meta`` (``clause_type``, ``number``,
    ``heading``, ``span``); ``chunk_chars``: the part of a clause that is embedded (its opening, heading first).
    """

    base: int
    texts: tuple[str, ...]
    meta: tuple[dict[str, Any], ...]
    chunk_chars: int

    def __len__(self) -> int:
        return len(self.texts)


class DocumentRows(Sequence[ChunkRow]):
    """Every row of one document, built on demand: the profile row (ordinal −1) when the object holds it, the
    passages (``0..n-1``), then the clause rows (``clauses.base + i``) when it holds them. Indexing or slicing
    builds only the rows asked for; iterating builds :data:`STREAM_ROWS` at a time. Passed as
    :attr:`ki.adapters.search.backend.IndexDocument.rows`.

    Args:
        profile_text: the profile row's text (what its vector is made from), or None when the object does not
            hold its document's profile (:mod:`ki.store.finality`); profile_meta: its ``meta``.
        plan: the passages.
        header: the context header prefixed to each passage's and clause's embedding input ("" for none).
        vectors: where the rows' vectors come from (None: rows without vectors).
        clauses: the clause rows (None: the object holds none).
        matter_header: the matter's part of the context header ("" for none): embedded once, apart
            (:data:`MATTER_ORDINAL`), and blended into each passage's and clause's vector (:func:`blend`).
    """

    def __init__(self, profile_text: str | None, profile_meta: dict[str, Any], plan: PassagePlan, *,
                 header: str = "", vectors: VectorSource | None = None, clauses: ClauseRows | None = None,
                 matter_header: str = ""):
        self.profile_text, self.profile_meta, self.plan = profile_text, profile_meta, plan
        self.header, self.vectors, self.clauses = header, vectors, clauses
        self.matter_header = matter_header
        self._matter_vector: np.ndarray | None = None
        self._head = 0 if profile_text is None else 1
        self._clause_at = self._head + len(plan)

    def with_vectors(self, vectors: VectorSource) -> DocumentRows:
        """The same rows, their vectors read from ``vectors``."""
        return DocumentRows(self.profile_text, self.profile_meta, self.plan, header=self.header, vectors=vectors,
                            clauses=self.clauses, matter_header=self.matter_header)

    def __len__(self) -> int:
        return self._clause_at + (len(self.clauses) if self.clauses else 0)

    def ordinal_at(self, pos: int) -> int:
        """The ordinal of the row at position ``pos``."""
        if pos < self._head:
            return PROFILE_ORDINAL
        if pos < self._clause_at:
            return pos - self._head
        assert self.clauses is not None
        return self.clauses.base + pos - self._clause_at

    def ordinals(self) -> list[int]:
        """The rows' ordinals in order (−1?, 0, …, n−1, clause ordinals), without building the rows."""
        out = [PROFILE_ORDINAL] if self._head else []
        out.extend(range(len(self.plan)))
        if self.clauses:
            out.extend(range(self.clauses.base, self.clauses.base + len(self.clauses)))
        return out

    def _input(self, pos: int) -> str:
        if pos < self._head:
            return self.profile_text or ""
        if pos < self._clause_at:
            return embedding_input(self.plan.text(pos - self._head), self.header)
        assert self.clauses is not None
        clause = self.clauses.texts[pos - self._clause_at]
        return embedding_input(clause[:self.clauses.chunk_chars], self.header)

    def inputs(self, lo: int, hi: int) -> dict[int, str]:
        """ordinal → the exact text embedded for the rows at positions ``lo..hi-1`` (the profile row's text
        alone; a passage or a clause's opening with the header:
        :func:`ki.adapters.search.embeddings.embedding_input`)."""
        return {self.ordinal_at(pos): self._input(pos) for pos in range(max(lo, 0), min(hi, len(self)))}

    def input_batches(self, size: int = STREAM_ROWS) -> Iterator[dict[int, str]]:
        """:meth:`inputs` of consecutive batches of ``size`` rows (the embedding pass); the first also holds the
        matter header at :data:`MATTER_ORDINAL`."""
        for lo in range(0, len(self), size):
            batch = self.inputs(lo, lo + size)
            if lo == 0 and self.matter_header:
                batch[MATTER_ORDINAL] = self.matter_header
            yield batch

    def matter_vector(self) -> np.ndarray | None:
        """The matter header's vector (read once from :attr:`vectors`), or None without a header or vectors."""
        if self._matter_vector is None and self.matter_header and self.vectors is not None:
            self._matter_vector = self.vectors.get({MATTER_ORDINAL: self.matter_header})[MATTER_ORDINAL]
        return self._matter_vector

    def _build(self, lo: int, hi: int) -> list[ChunkRow]:
        lo, hi = max(lo, 0), min(hi, len(self))
        if lo >= hi:
            return []
        vectors = self.vectors.get(self.inputs(lo, hi)) if self.vectors is not None else {}
        mv = self.matter_vector()
        rows: list[ChunkRow] = []
        for pos in range(lo, hi):
            o = self.ordinal_at(pos)
            if pos < self._head:
                rows.append(ChunkRow(o, self.profile_text or "", vectors.get(o), PROFILE_KIND, self.profile_meta))
            elif pos < self._clause_at:
                kind, text_, meta = self.plan.passage(o)
                rows.append(ChunkRow(o, text_, blend(vectors.get(o), mv), kind, meta))
            else:
                assert self.clauses is not None
                i = pos - self._clause_at
                rows.append(ChunkRow(o, self.clauses.texts[i], blend(vectors.get(o), mv), CLAUSE_KIND,
                                     self.clauses.meta[i]))
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
