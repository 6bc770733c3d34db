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
from sqlalchemy import text

from ki.index.embeddings import Embedder, input_sha256
from ki.index.pgvector import register_vector
from ki.store.db import Database
from ki.store.locks import session_advisory_lock

# -- name: cached_vectors --
CACHED_SQL = text("""
SELECT ordinal, input_sha256, embedding FROM embedding_cache WHERE embedder = :e AND content_hash = :h
""")

# -- name: store_vectors --
STORE_SQL = text("""
INSERT INTO embedding_cache (embedder, content_hash, ordinal, input_sha256, embedding)
SELECT :e, :h, t.ordinal, t.sha, t.emb
FROM unnest(CAST(:ordinals AS int[]), CAST(:shas AS text[]), CAST(:embs AS vector[])) AS t(ordinal, sha, emb)
ON CONFLICT (embedder, content_hash, ordinal, input_sha256) DO NOTHING
""")


@dataclass(frozen=True)
class EmbedResult:
    """``vectors``: ordinal → float32 ``(dimension,)``; ``embedded``: rows the model computed now;
    ``reused``: rows taken from the cache."""

    vectors: dict[int, np.ndarray]
    embedded: int
    reused: int


def embed_rows(db: Database, embedder: Embedder, content_hash: str, inputs: Mapping[int, str], *,
               batch_size: int = 16) -> EmbedResult:
    """Vectors for ``inputs`` (ordinal → exact text to embed) of one blob, from the cache or the model.

    Raises: the embedder's errors (gateway outage = infrastructure; ModelOutputInvalid for a bad shape).
    """
    if not inputs:
        return EmbedResult({}, 0, 0)
    dim = int(embedder.dimension)
    shas = {o: input_sha256(t) for o, t in inputs.items()}
    with session_advisory_lock(db, "embed", f"{embedder.name}\x00{content_hash}"):
        with db.engine.connect() as conn:
            register_vector(conn)
            cached = conn.execute(CACHED_SQL, {"e": embedder.name, "h": content_hash}).fetchall()
        vectors: dict[int, np.ndarray] = {}
        for r in cached:
            vec = np.asarray(r.embedding.to_numpy() if hasattr(r.embedding, "to_numpy") else r.embedding,
                             dtype=np.float32)
            if r.ordinal in shas and r.input_sha256 == shas[r.ordinal] and vec.shape == (dim,):
                vectors[r.ordinal] = vec
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
                conn.execute(STORE_SQL, {"e": embedder.name, "h": content_hash, "ordinals": missing,
                                         "shas": [shas[o] for o in missing], "embs": [vectors[o] for o in missing]})
    return EmbedResult(vectors, len(missing), reused)
