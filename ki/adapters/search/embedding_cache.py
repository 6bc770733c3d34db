"""Embed a blob's rows once: vectors cached by (embedder, content hash, ordinal).

Spec: DESIGN.md "Duplicates and permissions" (identical bytes are embedded once per blob, but every
source object keeps its own permissions — the vectors are shared, the chunk rows are not);
"Conventions" (nothing blocks on a model call while holding a transaction). The per-blob session
advisory lock (namespace ``embed``) serialises workers embedding the same content, as Parse does
for conversions, so two copies indexed at once still embed once; no transaction is open while
the model runs.

A cached vector is reused only for the same input (SHA-256 of the exact text embedded). Chunk
inputs carry a header of title and type — properties of the bytes, the same for every copy — so a
blob's chunks are embedded once whatever its copies are called or where they are filed; only the
profile row (ordinal −1) also names the matter and is embedded once per (blob, matter).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ki.adapters.search.embeddings import Embedder, input_sha256
from ki.adapters.search.pgvector import register_vector
from ki.core.errors import RetryableStageError
from ki.store.chunks import cached_vector_rows, store_vectors
from ki.store.db import Database
from ki.store.locks import session_advisory_lock


@dataclass(frozen=True)
class EmbedResult:
    """``vectors``: ordinal → float32 ``(dimension,)``; ``embedded``: rows the model computed now;
    ``reused``: rows taken from the cache."""

    vectors: dict[int, np.ndarray]
    embedded: int
    reused: int


def _cached(db: Database, embedder_name: str, dim: int, content_hash: str, shas: Mapping[int, str]
            ) -> dict[int, np.ndarray]:
    """ordinal → cached float32 ``(dim,)`` vector of the exact input whose SHA-256 is ``shas[ordinal]``."""
    with db.engine.connect() as conn:
        register_vector(conn)
        cached = cached_vector_rows(conn, embedder_name, content_hash, list(shas))
    vectors: dict[int, np.ndarray] = {}
    for r in cached:
        vec = np.asarray(r.embedding.to_numpy() if hasattr(r.embedding, "to_numpy") else r.embedding,
                         dtype=np.float32)
        if r.input_sha256 == shas.get(r.ordinal) and vec.shape == (dim,):
            vectors[r.ordinal] = vec
    return vectors


def embed_rows(db: Database, embedder: Embedder, content_hash: str, inputs: Mapping[int, str], *,
               batch_size: int = 16) -> EmbedResult:
    """Vectors for ``inputs`` (ordinal → exact text to embed) of one blob, from the cache or the model;
    the ones the model computed are stored in the cache (committed before this returns).

    The index stage calls it once per batch of a document's rows (:data:`ki.stages.index_rows.STREAM_ROWS`),
    so only that batch's inputs and vectors are in memory; a retry after a crash reuses the batches
    already stored.
    Raises: the embedder's errors (gateway outage = infrastructure; ModelOutputInvalid for a bad shape).
    """
    if not inputs:
        return EmbedResult({}, 0, 0)
    dim = int(embedder.dimension)
    shas = {o: input_sha256(t) for o, t in inputs.items()}
    with session_advisory_lock(db, "embed", f"{embedder.name}\x00{content_hash}"):
        vectors = _cached(db, embedder.name, dim, content_hash, shas)
        missing = [o for o in inputs if o not in vectors]
        reused = len(inputs) - len(missing)
        if missing:
            computed = []
            for start in range(0, len(missing), max(1, batch_size)):
                batch = missing[start:start + batch_size]
                computed.append(embedder.embed_passages([inputs[o] for o in batch]))
            matrix = np.concatenate(computed, axis=0)
            for o, vec in zip(missing, matrix, strict=True):
                vectors[o] = vec
            with db.engine.begin() as conn:
                register_vector(conn)
                store_vectors(conn, embedder.name, content_hash, missing, [shas[o] for o in missing],
                              [vectors[o] for o in missing])
    return EmbedResult(vectors, len(missing), reused)


class CachedVectors:
    """The vectors :func:`embed_rows` stored for one blob, read back a batch at a time when its rows are
    written (so a huge document's vectors are never all in memory at once).

    Args:
        db: ki's database; embedder_name / dimension: the index's embedder; content_hash: the blob.
    """

    def __init__(self, db: Database, embedder_name: str, dimension: int, content_hash: str):
        self.db, self.embedder_name, self.dimension, self.content_hash = db, embedder_name, dimension, content_hash

    def get(self, inputs: Mapping[int, str]) -> dict[int, np.ndarray]:
        """ordinal → float32 ``(dimension,)`` for every ordinal of ``inputs`` (ordinal → exact embedded text).

        Raises: RetryableStageError when the cache lacks one (dropped meanwhile by ``ki index reset-vectors``):
        nothing is written, the stage runs again and embeds it.
        """
        shas = {o: input_sha256(t) for o, t in inputs.items()}
        vectors = _cached(self.db, self.embedder_name, self.dimension, self.content_hash, shas)
        if len(vectors) != len(shas):
            lost = sorted(set(shas) - set(vectors))
            raise RetryableStageError(f"the embedding cache lost {len(lost)} vector(s) of this content while it was "
                                      f"being indexed (ordinals {lost[:5]}…); the index stage runs again")
        return vectors
