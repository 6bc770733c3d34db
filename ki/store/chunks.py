"""Reads of the ``chunk`` rows (the search record) and the embedding cache beside them.

Spec: insertion-pipeline.md "Index" (re-index diffs by ordinal; an access-only update when only permissions
changed; OpenSearch synced from the record); DESIGN.md "Duplicates and permissions" (identical bytes are
embedded once per blob: ``embedding_cache`` by embedder, content hash, ordinal and input hash). The chunk rows
themselves are written by :class:`ki.adapters.search.postgres.PostgresBackend`. Every function takes a connection the
caller owns; one that reads or writes vectors needs pgvector's types registered on it
(:func:`ki.adapters.search.pgvector.register_vector`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.engine import Connection

INDEXED_HASHES_SQL = text("SELECT DISTINCT content_hash FROM chunk WHERE source_object_id = :o")


def indexed_hashes(conn: Connection, source_object_id: int) -> set[str]:
    """The content hashes the object's chunk rows were made from (empty: not indexed)."""
    return set(conn.execute(INDEXED_HASHES_SQL, {"o": source_object_id}).scalars())


def chunk_object_ids(conn: Connection) -> list[int]:
    """Every object the record holds chunk rows of, ascending."""
    return list(conn.execute(text("SELECT DISTINCT source_object_id FROM chunk ORDER BY 1")).scalars())


def chunk_ordinals(conn: Connection, source_object_id: int) -> list[int]:
    """The ordinals of the object's chunk rows, ascending (−1: the profile row)."""
    return list(conn.execute(text("SELECT ordinal FROM chunk WHERE source_object_id = :o ORDER BY ordinal"),
                             {"o": source_object_id}).scalars())


def live_chunk_rows(conn: Connection, source_object_ids: list[int]) -> Sequence[Row]:
    """The live chunk rows of the objects (text, permissions, vector, kind, meta), by object and ordinal."""
    return conn.execute(text(
        "SELECT source_object_id, ordinal, text, title, content_hash, allowed_principals, denied_principals, "
        "access_version, embedding, kind, meta FROM chunk WHERE source_object_id = ANY(:o) AND NOT is_deleted "
        "ORDER BY source_object_id, ordinal"), {"o": list(source_object_ids)}).fetchall()


# -- name: cached_vectors --
# Only the asked ordinals: the index stage embeds a huge file's ~70,000 rows a batch at a time.
CACHED_SQL = text("""
SELECT ordinal, input_sha256, embedding FROM embedding_cache
WHERE embedder = :e AND content_hash = :h AND ordinal = ANY(CAST(:ordinals AS int[]))
""")

# -- name: store_vectors --
STORE_SQL = text("""
INSERT INTO embedding_cache (embedder, content_hash, ordinal, input_sha256, embedding)
SELECT :e, :h, t.ordinal, t.sha, t.emb
FROM unnest(CAST(:ordinals AS int[]), CAST(:shas AS text[]), CAST(:embs AS vector[])) AS t(ordinal, sha, emb)
ON CONFLICT (embedder, content_hash, ordinal, input_sha256) DO NOTHING
""")


def cached_vector_rows(conn: Connection, embedder: str, content_hash: str, ordinals: list[int]) -> Sequence[Row]:
    """``ordinal``, ``input_sha256``, ``embedding`` of the cached vectors of those ordinals of one blob."""
    return conn.execute(CACHED_SQL, {"e": embedder, "h": content_hash, "ordinals": ordinals}).fetchall()


def store_vectors(conn: Connection, embedder: str, content_hash: str, ordinals: list[int], shas: list[str],
                  vectors: list[Any]) -> None:
    """Cache one blob's vectors (``ordinals[i]``'s input hashed ``shas[i]`` embedded as ``vectors[i]``); a vector
    already cached for the same input is kept."""
    conn.execute(STORE_SQL, {"e": embedder, "h": content_hash, "ordinals": ordinals, "shas": shas,
                             "embs": vectors})
