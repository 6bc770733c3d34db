"""Hybrid ranking shared by every backend: two permission-filtered halves fused by reciprocal rank fusion.

Spec: insertion-pipeline.md "Index"; notes/opensearch.md §3 (BM25 / text rank + kNN, both with the
identical ACL filter, fused client-side with RRF, k ≈ 60 — the neural-search plugin is not used);
DESIGN.md "Duplicates and permissions" (search collapses identical content per principal).

Each half's chunk ranking is first reduced to a ranking of distinct contents: a document's best
chunk stands for it, and objects with the same content hash (identical bytes under several
names, each with its own permissions) stand once, by the first visible object. Because both
halves ran with the caller's filter, the collapse is per principal: someone who may see only the
second copy gets the second copy. RRF then scores each content ``Σ 1 / (k + rank)`` over the
halves it appears in (ranks from 1).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from ki.adapters.search.backend import RankedChunk, SearchBackend, SearchFilters

if TYPE_CHECKING:
    import numpy as np

RRF_K = 60
K = TypeVar("K", bound=Hashable)


def rrf_fuse(rankings: Sequence[Sequence[K]], *, k: int = RRF_K) -> list[tuple[K, float]]:
    """Reciprocal rank fusion of ranked key lists (best first; duplicates within a list ignored).

    Returns (key, score) best first; ties keep the order of first appearance across the lists.
    """
    scores: dict[K, float] = {}
    order: dict[K, int] = {}
    for ranking in rankings:
        seen: set[K] = set()
        rank = 0
        for key in ranking:
            if key in seen:
                continue
            seen.add(key)
            rank += 1
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
            order.setdefault(key, len(order))
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))


@dataclass(frozen=True)
class Candidate:
    """A content's representative in one half: the object, its best chunk, the half's score."""

    source_object_id: int
    ordinal: int
    content_hash: str
    score: float


def collapse(chunks: Sequence[RankedChunk]) -> list[Candidate]:
    """A chunk ranking → a ranking of distinct contents (best chunk per object, first object per content)."""
    seen_objects: set[int] = set()
    seen_contents: set[str] = set()
    out: list[Candidate] = []
    for c in chunks:
        if c.source_object_id in seen_objects:
            continue
        seen_objects.add(c.source_object_id)
        if c.content_hash in seen_contents:
            continue
        seen_contents.add(c.content_hash)
        out.append(Candidate(c.source_object_id, c.ordinal, c.content_hash, c.score))
    return out


@dataclass(frozen=True)
class FusedHit:
    """One fused result: representative object and chunk, RRF ``score``, and its rank in each half (or None)."""

    source_object_id: int
    ordinal: int
    content_hash: str
    score: float
    lexical_rank: int | None
    vector_rank: int | None


def fuse(lexical: Sequence[RankedChunk], vector: Sequence[RankedChunk], *, limit: int, k: int = RRF_K
         ) -> list[FusedHit]:
    """Collapse each half and fuse them by RRF; the representative comes from the better-ranked half
    (the lexical one on a tie, whose chunk gives the better snippet)."""
    lex = collapse(lexical)
    vec = collapse(vector)
    lex_rank = {c.content_hash: (i + 1, c) for i, c in enumerate(lex)}
    vec_rank = {c.content_hash: (i + 1, c) for i, c in enumerate(vec)}
    fused = rrf_fuse([[c.content_hash for c in lex], [c.content_hash for c in vec]], k=k)
    out: list[FusedHit] = []
    for key, score in fused[:limit]:
        lr = lex_rank.get(key)
        vr = vec_rank.get(key)
        rep = lr[1] if lr and (vr is None or lr[0] <= vr[0]) else vr[1]  # type: ignore[index]
        out.append(FusedHit(rep.source_object_id, rep.ordinal, key, score,
                            lr[0] if lr else None, vr[0] if vr else None))
    return out


def hybrid_search(backend: SearchBackend, query: str, filters: SearchFilters, *, query_vector: np.ndarray | None,
                  limit: int = 10, candidates: int | None = None, mode: str = "hybrid") -> list[FusedHit]:
    """Run the halves ``mode`` asks for (``hybrid``, ``lexical``, ``vector``) with the same filter and fuse.

    A backend with ``search_halves(query, vector, filters, k)`` (OpenSearch: one ``_msearch``) answers
    both halves of a hybrid search in one call; the fusion is the same.

    Args:
        query_vector: the query's embedding from the index's own embedder; None = no vector half.
        limit: results wanted.
        candidates: what each half returns (default ``max(30, 2 × limit)``): the lexical half that many
            distinct contents (best row each), the vector half that many rows. When the lexical half runs
            alone (``lexical`` mode, or no vector) it asks for ``limit``: its ranking is exact, so its top
            ``limit`` is the top ``limit`` of any deeper list, and each content beyond is a row the record reads.
    Returns: at most ``limit`` fused hits, best first.
    """
    if mode not in ("hybrid", "lexical", "vector"):
        raise ValueError(f"unknown search mode {mode!r}")
    alone = mode == "lexical" or (mode == "hybrid" and query_vector is None)
    n = candidates or (limit if alone else max(30, 2 * limit))
    both = getattr(backend, "search_halves", None)  # one round trip for both halves (OpenSearch: _msearch)
    if both is not None and mode == "hybrid" and query.strip() and query_vector is not None:
        lexical, vector = both(query, query_vector, filters, n)
        return fuse(lexical, vector, limit=limit)
    lexical = backend.search_lexical(query, filters, n) if mode in ("hybrid", "lexical") and query.strip() else []
    vector = (backend.search_vector(query_vector, filters, n)
              if mode in ("hybrid", "vector") and query_vector is not None else [])
    return fuse(lexical, vector, limit=limit)
