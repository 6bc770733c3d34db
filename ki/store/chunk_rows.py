"""The embedded index's rows (``chunk``) and its embedder record (``index_meta``): every statement the
PostgreSQL search backend (:class:`ki.adapters.search.postgres.PostgresBackend`) sends.

Spec: insertion-pipeline.md "Index" (chunks diffed by ordinal: replaced, not orphaned; access-only updates bump
``access_version``; model name and dimension recorded on the index); notes/opensearch.md §6 (pgvector HNSW
with iterative index scans). Every function runs on the caller's connection and transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.store.index_record import log_changes
from ki.store.locks import xact_lock

HNSW_INDEX = "ix_chunk_embedding_hnsw"
# -- name: upsert_rows --
# Write every row of the object (insert or update changed ones); the surplus delete follows.
_UPSERT = """
INSERT INTO chunk (source_object_id, content_hash, ordinal, text, title, allowed_principals, denied_principals,
                   access_version, embedding, kind, meta)
SELECT :oid, :h, t.ordinal, t.body, :title, CAST(:allowed AS text[]), CAST(:denied AS text[]), :version, {emb},
       t.kind, CAST(t.meta AS jsonb)
FROM unnest(CAST(:ordinals AS int[]), CAST(:bodies AS text[]), CAST(:kinds AS text[]),
            CAST(:metas AS text[]){emb_arg}) AS t(ordinal, body, kind, meta{emb_col})
ON CONFLICT (source_object_id, ordinal) DO UPDATE
SET content_hash = EXCLUDED.content_hash, text = EXCLUDED.text, title = EXCLUDED.title,
    allowed_principals = EXCLUDED.allowed_principals, denied_principals = EXCLUDED.denied_principals,
    access_version = EXCLUDED.access_version, embedding = EXCLUDED.embedding, kind = EXCLUDED.kind,
    meta = EXCLUDED.meta, is_deleted = false, updated_at = now()
WHERE (chunk.content_hash, chunk.text, chunk.title, chunk.allowed_principals, chunk.denied_principals,
       chunk.access_version, chunk.embedding, chunk.kind, chunk.meta, chunk.is_deleted)
      IS DISTINCT FROM (EXCLUDED.content_hash, EXCLUDED.text, EXCLUDED.title, EXCLUDED.allowed_principals,
                        EXCLUDED.denied_principals, EXCLUDED.access_version, EXCLUDED.embedding, EXCLUDED.kind,
                        EXCLUDED.meta, false)
"""
#: Rows per upsert statement of one object's write (one transaction): a 120 MB text has ~70,000 chunks,
#: whose texts and vectors as one statement's parameters would be several copies of the file in memory.
WRITE_BATCH_ROWS = 1_000
UPSERT_WITH_VECTORS_SQL = text(_UPSERT.format(emb="t.emb", emb_arg=", CAST(:embs AS vector[])", emb_col=", emb"))
UPSERT_WITHOUT_VECTORS_SQL = text(_UPSERT.format(emb="NULL", emb_arg="", emb_col=""))

# -- name: delete_surplus --
DELETE_SURPLUS_SQL = text("""
DELETE FROM chunk WHERE source_object_id = :oid AND NOT (ordinal = ANY(CAST(:ordinals AS int[])))
""")

# -- name: retire_document_rows --
# The profile and clause rows of objects a newer final version of their document took them from.
RETIRE_SQL = text("""
DELETE FROM chunk WHERE source_object_id = ANY(CAST(:oids AS bigint[])) AND kind = ANY(CAST(:kinds AS text[]))
""")

# -- name: current_rows --
CURRENT_ROWS_SQL = text("""
SELECT ordinal, access_version, allowed_principals, denied_principals FROM chunk WHERE source_object_id = :oid
""")

# -- name: update_access --
# Access-only re-index: the permission fields and access_version only (spec: access_only_reindex).
UPDATE_ACCESS_SQL = text("""
UPDATE chunk SET allowed_principals = CAST(:allowed AS text[]), denied_principals = CAST(:denied AS text[]),
    access_version = access_version + 1, updated_at = now()
WHERE source_object_id = :oid
RETURNING access_version
""")


_VECTOR = """
WITH r AS MATERIALIZED (
    SELECT c.source_object_id, c.ordinal, c.content_hash,
           (c.embedding::halfvec({d})) <=> CAST(CAST(:v AS vector({d})) AS halfvec({d})) AS distance
    FROM chunk c JOIN source_object so ON so.id = c.source_object_id AND so.deleted_at IS NULL
    WHERE c.embedding IS NOT NULL AND NOT c.is_deleted AND {acl} {filters}
    ORDER BY (c.embedding::halfvec({d})) <=> CAST(CAST(:v AS vector({d})) AS halfvec({d}))
    LIMIT :k
)
SELECT * FROM r ORDER BY distance, source_object_id, ordinal
"""


def index_meta(conn: Connection, name: str, *, for_share: bool = False) -> tuple[str, int] | None:
    """(embedder, dimension) the index ``name`` records, None before its first vector; ``for_share``: the row
    locked FOR SHARE until the transaction ends (a write holds the embedder it checked)."""
    row = conn.execute(text("SELECT embedder, dimension FROM index_meta WHERE name = :name"
                            + (" FOR SHARE" if for_share else "")), {"name": name}).first()
    return (row.embedder, int(row.dimension)) if row else None


def lock_index_meta(conn: Connection, name: str) -> None:
    """The transaction's advisory lock on the index's embedder record (recording or dropping it)."""
    xact_lock(conn, "index_meta", name)


def record_embedder(conn: Connection, name: str, embedder: str, dimension: int) -> None:
    """Record the index's embedder and create the HNSW index for its dimension (under :func:`lock_index_meta`)."""
    conn.execute(text("INSERT INTO index_meta (name, embedder, dimension) VALUES (:n, :e, :d)"),
                 {"n": name, "e": embedder, "d": dimension})
    conn.execute(text(
        f"CREATE INDEX IF NOT EXISTS {HNSW_INDEX} ON chunk USING hnsw "
        f"((embedding::halfvec({int(dimension)})) halfvec_cosine_ops) WHERE embedding IS NOT NULL"))


def drop_vectors(conn: Connection, name: str) -> int:
    """Drop every vector, the HNSW index, the embedding cache and the index's embedder record (under
    :func:`lock_index_meta`). Returns the number of rows whose vector was dropped."""
    n = conn.execute(text("UPDATE chunk SET embedding = NULL WHERE embedding IS NOT NULL")).rowcount
    conn.execute(text(f"DROP INDEX IF EXISTS {HNSW_INDEX}"))
    conn.execute(text("DELETE FROM embedding_cache"))
    conn.execute(text("DELETE FROM index_meta WHERE name = :n"), {"n": name})
    return n


def object_live(conn: Connection, source_object_id: int) -> bool:
    """Whether the object exists and is not tombstoned, its row locked FOR SHARE (a tombstone waits for the
    write)."""
    row = conn.execute(text("SELECT deleted_at IS NULL AS live FROM source_object WHERE id = :id FOR SHARE"),
                       {"id": source_object_id}).first()
    return bool(row is not None and row.live)


def current_rows(conn: Connection, source_object_id: int) -> list[Any]:
    """The object's rows now: (ordinal, access_version, allowed_principals, denied_principals)."""
    return conn.execute(CURRENT_ROWS_SQL, {"oid": source_object_id}).fetchall()


def upsert_rows(conn: Connection, params: dict[str, Any], *, with_vectors: bool) -> int:
    """One batch of an object's rows (``params`` as :data:`_UPSERT` names them; ``embs`` with vectors). Returns
    the rows inserted or changed."""
    return conn.execute(UPSERT_WITH_VECTORS_SQL if with_vectors else UPSERT_WITHOUT_VECTORS_SQL, params).rowcount


def delete_surplus(conn: Connection, source_object_id: int, ordinals: Sequence[int]) -> int:
    """Delete the object's rows of other ordinals than ``ordinals``. Returns rows deleted."""
    return conn.execute(DELETE_SURPLUS_SQL, {"oid": source_object_id, "ordinals": list(ordinals)}).rowcount


def retire_rows(conn: Connection, source_object_ids: Sequence[int], kinds: Sequence[str]) -> int:
    """Delete the rows of those kinds of the objects. Returns rows deleted."""
    return conn.execute(RETIRE_SQL, {"oids": list(source_object_ids), "kinds": list(kinds)}).rowcount


def update_access(conn: Connection, source_object_id: int, allowed: list[str], denied: list[str]) -> list[int]:
    """Rewrite the permission fields of every row of the object, bumping ``access_version``. Returns the new
    versions ([] when the object has no rows)."""
    return [int(r.access_version) for r in conn.execute(
        UPDATE_ACCESS_SQL, {"oid": source_object_id, "allowed": allowed, "denied": denied})]


def nearest_rows(conn: Connection, dimension: int, *, acl: str, where: str, params: dict[str, Any],
                 ef_search: int) -> list[Any]:
    """The ``:k`` rows nearest ``:v`` by cosine distance through the HNSW index (iterative scan, so the permission
    filter ``acl`` and the conditions ``where`` still yield up to k rows): (source_object_id, ordinal,
    content_hash, distance), nearest first. Needs a transaction (SET LOCAL)."""
    conn.execute(text("SELECT set_config('hnsw.ef_search', :ef, true), "
                      "set_config('hnsw.iterative_scan', 'relaxed_order', true)"), {"ef": str(ef_search)})
    return conn.execute(text(_VECTOR.format(d=int(dimension), acl=acl, filters=where)), params).fetchall()


def delete_object_chunks(conn: Connection, source_object_id: int) -> int:
    """Remove every row of a tombstoned object in the caller's transaction, logged for the projections
    (unordered: a projection that misses it drops the row when a search meets it). Returns rows deleted."""
    n = conn.execute(text("DELETE FROM chunk WHERE source_object_id = :oid"), {"oid": source_object_id}).rowcount
    if n:
        log_changes(conn, [source_object_id], ordered=False)
    return n
