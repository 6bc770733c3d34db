"""The embedded search backend: chunks in PostgreSQL, German + English full text and pgvector HNSW.

Spec: insertion-pipeline.md "Index" (chunks diffed by ordinal: replaced, not orphaned; permission
projection on every chunk; access-only updates bump ``access_version``; model name and dimension
recorded on the index); DESIGN.md "Two deployments"; notes/opensearch.md §6 (tsvector + GIN,
``websearch_to_tsquery``, ``ts_rank_cd`` — not BM25: no IDF, so tests assert order on fixtures,
never score values; pgvector HNSW with iterative index scans so filtered queries still return k
rows; ``allowed_principals && P AND NOT denied_principals && P`` inside both halves).

Tables: ``chunk`` (rows; ``embedding`` is an untyped ``vector``, float32), ``index_meta`` (the
``default`` index's embedder and dimension). The HNSW index ``ix_chunk_embedding_hnsw`` on
``(embedding::halfvec(d)) halfvec_cosine_ops`` (float16 in the graph: half the size, same ranking
for unit vectors) is created when the first embedder is recorded, and the vector half orders by the
same expression. This backend is also the record: the chunk rows
stay in PostgreSQL whatever other backend is synced from them.

The module keeps the pre-0005 helpers :func:`delete_object_chunks` and :func:`search` (lexical,
used by the tombstone path and older tests).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Engine, text
from sqlalchemy.engine import Connection

from ki.access.projection import AccessProjection
from ki.index.backend import (
    WEBSEARCH_SYNTAX,
    EmbedderMismatch,
    FilterReport,
    IndexDocument,
    RankedChunk,
    SearchFilters,
    WriteResult,
)
from ki.index.embeddings import EmbedderIdentity
from ki.index.facts import fact_sources
from ki.store.locks import lock_key

INDEX_NAME = "default"
HNSW_INDEX = "ix_chunk_embedding_hnsw"
#: hnsw.ef_search floor (pgvector default 40); raised to k when more rows are asked for.
EF_SEARCH = 40
#: At most this many matching rows are ranked by the lexical half (see _LEXICAL).
LEXICAL_RANK_CAP = 1000
#: The lexical half adds any-word matches when fewer than this many rows match every word.
OR_FALLBACK_BELOW = 10
#: (A query in web-search syntax, ``ki.index.backend.WEBSEARCH_SYNTAX``, gets no OR fallback.)

_registered: weakref.WeakSet[Any] = weakref.WeakSet()


def _register_vector(conn: Connection) -> None:
    """Teach this pooled psycopg connection the ``vector`` type (numpy arrays sent in binary)."""
    raw = conn.connection.driver_connection
    if raw in _registered:
        return
    from pgvector.psycopg import register_vector

    register_vector(raw)
    _registered.add(raw)


# -- name: upsert_rows --
# Write every row of the object (insert or update changed ones); the surplus delete follows.
_UPSERT = """
INSERT INTO chunk (source_object_id, content_hash, ordinal, text, title, allowed_principals, denied_principals,
                   access_version, embedding)
SELECT :oid, :h, t.ordinal, t.body, :title, CAST(:allowed AS text[]), CAST(:denied AS text[]), :version, {emb}
FROM unnest(CAST(:ordinals AS int[]), CAST(:bodies AS text[]){emb_arg}) AS t(ordinal, body{emb_col})
ON CONFLICT (source_object_id, ordinal) DO UPDATE
SET content_hash = EXCLUDED.content_hash, text = EXCLUDED.text, title = EXCLUDED.title,
    allowed_principals = EXCLUDED.allowed_principals, denied_principals = EXCLUDED.denied_principals,
    access_version = EXCLUDED.access_version, embedding = EXCLUDED.embedding, is_deleted = false, updated_at = now()
WHERE (chunk.content_hash, chunk.text, chunk.title, chunk.allowed_principals, chunk.denied_principals,
       chunk.access_version, chunk.embedding, chunk.is_deleted)
      IS DISTINCT FROM (EXCLUDED.content_hash, EXCLUDED.text, EXCLUDED.title, EXCLUDED.allowed_principals,
                        EXCLUDED.denied_principals, EXCLUDED.access_version, EXCLUDED.embedding, false)
"""
UPSERT_WITH_VECTORS_SQL = text(_UPSERT.format(emb="t.emb", emb_arg=", CAST(:embs AS vector[])", emb_col=", emb"))
UPSERT_WITHOUT_VECTORS_SQL = text(_UPSERT.format(emb="NULL", emb_arg="", emb_col=""))

# -- name: delete_surplus --
DELETE_SURPLUS_SQL = text("""
DELETE FROM chunk WHERE source_object_id = :oid AND NOT (ordinal = ANY(CAST(:ordinals AS int[])))
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

INDEX_META_SQL = text("SELECT embedder, dimension FROM index_meta WHERE name = :name")

_ACL = """(c.allowed_principals && CAST(:principals AS text[])
          AND NOT (c.denied_principals && CAST(:principals AS text[])))"""

_AND_QUERY = ("websearch_to_tsquery('german', :q) || websearch_to_tsquery('english', :q) "
              "|| websearch_to_tsquery('simple', :q)")
# The OR fallback: every word that is a stop word in neither language, any of them may match.
_OR_QUERY = """(SELECT websearch_to_tsquery('german', s) || websearch_to_tsquery('english', s)
                       || websearch_to_tsquery('simple', s)
                FROM (SELECT string_agg(DISTINCT w, ' or ') AS s
                      FROM regexp_split_to_table(lower(:q), '[\\s[:punct:]]+') AS w
                      WHERE length(w) > 1 AND numnode(plainto_tsquery('german', w)) > 0
                        AND numnode(plainto_tsquery('english', w)) > 0) words)"""

# Matching rows are ranked by ts_rank_cd; at most :cap of them (in table order) are ranked, which bounds
# the cost of a query that matches a large part of the index (ranking reads each row's tsvector).
_LEXICAL = """
WITH q AS (SELECT {query} AS query),
m AS MATERIALIZED (
    SELECT c.source_object_id, c.ordinal, c.content_hash, c.tsv
    FROM q, chunk c JOIN source_object so ON so.id = c.source_object_id AND so.deleted_at IS NULL
    WHERE c.tsv @@ q.query AND NOT c.is_deleted AND {acl} {filters}
    LIMIT :cap
)
SELECT m.source_object_id, m.ordinal, m.content_hash, ts_rank_cd(m.tsv, q.query) AS score
FROM m, q
ORDER BY score DESC, m.source_object_id, m.ordinal
LIMIT :k
"""

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

class PostgresBackend:
    """The embedded :class:`ki.index.backend.SearchBackend` (see the module docstring).

    Args:
        engine: the SQLAlchemy engine of ki's database (or a :class:`ki.store.db.Database`).
        index_name: the ``index_meta`` row (one index per database: ``default``).

    Raises (every method): SQLAlchemy/psycopg errors when the database fails (an outage).
    """

    name = "postgres"

    def __init__(self, engine: Engine | Any, *, index_name: str = INDEX_NAME):
        self.engine: Engine = getattr(engine, "engine", engine)
        self.index_name = index_name

    # -- index identity ---------------------------------------------------------------------------

    def index_identity(self, conn: Connection | None = None) -> EmbedderIdentity | None:
        """The embedder the index records, or None (no vectors yet)."""
        if conn is None:
            with self.engine.connect() as c:
                return self.index_identity(c)
        row = conn.execute(INDEX_META_SQL, {"name": self.index_name}).first()
        return EmbedderIdentity(row.embedder, int(row.dimension)) if row else None

    def ensure_embedder(self, identity: EmbedderIdentity | None) -> None:
        """Refuse another embedder; record the first one and create the HNSW index for its dimension.

        Raises: EmbedderMismatch (nothing written).
        """
        current = self.index_identity()
        if current == identity:
            return
        if current is not None or identity is None:
            raise EmbedderMismatch(current, identity, backend=self.name)
        with self.engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": lock_key("index_meta", self.index_name)})
            current = self.index_identity(conn)
            if current == identity:
                return
            if current is not None:
                raise EmbedderMismatch(current, identity, backend=self.name)
            conn.execute(text("INSERT INTO index_meta (name, embedder, dimension) VALUES (:n, :e, :d)"),
                         {"n": self.index_name, "e": identity.embedder, "d": identity.dimension})
            conn.execute(text(
                f"CREATE INDEX IF NOT EXISTS {HNSW_INDEX} ON chunk USING hnsw "
                f"((embedding::halfvec({int(identity.dimension)})) halfvec_cosine_ops) WHERE embedding IS NOT NULL"))

    def reset_vectors(self) -> int:
        """Drop every vector, the HNSW index, the embedding cache and the index's embedder record.

        The next index run records whatever ``retrieval.embedding_model`` gives. Returns the number of
        chunks whose vector was dropped. (``ki index reset-vectors``.)
        """
        with self.engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": lock_key("index_meta", self.index_name)})
            n = conn.execute(text("UPDATE chunk SET embedding = NULL WHERE embedding IS NOT NULL")).rowcount
            conn.execute(text(f"DROP INDEX IF EXISTS {HNSW_INDEX}"))
            conn.execute(text("DELETE FROM embedding_cache"))
            conn.execute(text("DELETE FROM index_meta WHERE name = :n"), {"n": self.index_name})
        return n

    # -- writes -----------------------------------------------------------------------------------

    def write_document(self, doc: IndexDocument) -> WriteResult:
        """Upsert ``doc.rows`` by ordinal, then delete the object's other ordinals, in one transaction.

        An object tombstoned meanwhile gets no rows (its rows are removed). The object's
        ``access_version`` is kept, or bumped when the projection differs from its rows'.
        Raises: EmbedderMismatch before anything is written.
        """
        self.ensure_embedder(doc.embedder)
        ordinals = [r.ordinal for r in doc.rows]
        if len(set(ordinals)) != len(ordinals):
            raise ValueError(f"duplicate ordinals in the rows of object {doc.source_object_id}")
        with self.engine.begin() as conn:
            live = conn.execute(text("SELECT deleted_at IS NULL AS live FROM source_object WHERE id = :id FOR SHARE"),
                                {"id": doc.source_object_id}).first()
            if live is None or not live.live:
                deleted = delete_object_chunks(conn, doc.source_object_id)
                return WriteResult(0, 0, deleted, 0, skipped_deleted=True)
            meta = conn.execute(text("SELECT embedder, dimension FROM index_meta WHERE name = :name FOR SHARE"),
                                {"name": self.index_name}).first()
            recorded = EmbedderIdentity(meta.embedder, int(meta.dimension)) if meta else None
            if recorded != doc.embedder:
                raise EmbedderMismatch(recorded, doc.embedder, backend=self.name)
            current = conn.execute(CURRENT_ROWS_SQL, {"oid": doc.source_object_id}).fetchall()
            version = max((r.access_version for r in current), default=0)
            allowed, denied = list(doc.access.allowed), list(doc.access.denied)
            if any((sorted(r.allowed_principals), sorted(r.denied_principals)) != (allowed, denied) for r in current):
                version += 1
            upserted = 0
            if doc.rows:
                params = {"oid": doc.source_object_id, "h": doc.content_hash, "title": doc.title,
                          "allowed": allowed, "denied": denied, "version": version,
                          "ordinals": ordinals, "bodies": [r.text for r in doc.rows]}
                if doc.embedder is not None:
                    _register_vector(conn)
                    embs = []
                    for r in doc.rows:
                        if r.embedding is None or r.embedding.shape != (doc.embedder.dimension,):
                            raise ValueError(f"row {r.ordinal} of object {doc.source_object_id} has no "
                                             f"{doc.embedder.dimension}-d vector")
                        embs.append(np.asarray(r.embedding, dtype=np.float32))
                    params["embs"] = embs
                    upserted = conn.execute(UPSERT_WITH_VECTORS_SQL, params).rowcount
                else:
                    upserted = conn.execute(UPSERT_WITHOUT_VECTORS_SQL, params).rowcount
            deleted = conn.execute(DELETE_SURPLUS_SQL, {"oid": doc.source_object_id, "ordinals": ordinals}).rowcount
        return WriteResult(upserted, len(doc.rows) - upserted, deleted, version)

    def delete_object(self, source_object_id: int) -> int:
        """Remove the rows of a tombstoned object. Returns rows removed."""
        with self.engine.begin() as conn:
            return delete_object_chunks(conn, source_object_id)

    def update_access(self, source_object_id: int, access: AccessProjection) -> int | None:
        """Rewrite the permission fields of every row of the object and bump ``access_version``.

        Returns the new access_version, or None when the object has no rows.
        """
        with self.engine.begin() as conn:
            rows = conn.execute(UPDATE_ACCESS_SQL, {"oid": source_object_id, "allowed": list(access.allowed),
                                                    "denied": list(access.denied)}).fetchall()
        return max((r.access_version for r in rows), default=None)

    # -- search -----------------------------------------------------------------------------------

    def _filters(self, conn: Connection, filters: SearchFilters) -> tuple[str, dict[str, Any], FilterReport]:
        """SQL conditions on ``c`` (chunk) and ``so`` (source_object) for matter, type and since
        (:mod:`ki.index.facts`: applied when the model stages' tables exist, else noted)."""
        facts = fact_sources(conn)
        report = FilterReport()
        sql: list[str] = []
        params: dict[str, Any] = {}
        if filters.matter:
            cond = facts.matter_condition("c.source_object_id")
            if cond:
                sql.append(f"AND {cond}")
                params["matter"] = filters.matter
                report.applied.append("matter")
                if conn.execute(text("SELECT NOT EXISTS (SELECT 1 FROM matter_assignment)")).scalar():
                    report.notes.append("no document has a matter assignment yet (classify_matter has not run): "
                                        "--matter matches nothing")
            else:
                report.notes.append("--matter ignored: this database has no matter assignments yet "
                                    "(the classify_matter stage is not installed)")
        if filters.doc_type:
            cond = facts.type_condition("c.source_object_id")
            if cond:
                sql.append(f"AND {cond}")
                params["doc_type"] = filters.doc_type
                report.applied.append("type")
            else:
                report.notes.append("--type ignored: documents are not typed yet (the extract_metadata stage is "
                                    "not installed)")
        if filters.since:
            since = datetime(filters.since.year, filters.since.month, filters.since.day, tzinfo=UTC)
            params["since_ns"] = int(since.timestamp()) * 1_000_000_000
            doc_date = facts.date_value("c.source_object_id")
            if doc_date:
                params["since_date"] = filters.since
                sql.append(f"AND coalesce({doc_date} >= :since_date, so.mtime_ns >= :since_ns)")
            else:
                sql.append("AND so.mtime_ns >= :since_ns")
                report.notes.append("--since compares the file's modification date (document dates are not "
                                    "extracted yet)")
            report.applied.append("since")
        return " ".join(sql), params, report

    def filter_report(self, filters: SearchFilters) -> FilterReport:
        """Which filters apply and why others are ignored (printed by ``ki search``)."""
        with self.engine.connect() as conn:
            return self._filters(conn, filters)[2]

    @staticmethod
    def _acl(filters: SearchFilters) -> tuple[str, dict[str, Any]]:
        """The permission condition of both halves (none for the local operator)."""
        if filters.principals is None:
            return "TRUE", {}
        return _ACL, {"principals": list(filters.principals)}

    def search_lexical(self, query: str, filters: SearchFilters, k: int, *, conn: Connection | None = None
                       ) -> list[RankedChunk]:
        """Full-text rows, best ``ts_rank_cd`` first: rows with all words (German/English stems, exact words,
        the title); when fewer than ``OR_FALLBACK_BELOW`` rows match, rows matching any word that is a stop
        word in neither language follow (plain queries only, not web-search syntax). A query matching more
        than ``LEXICAL_RANK_CAP`` rows ranks the first that many in table order (bounded latency)."""
        if conn is None:
            with self.engine.connect() as c:
                return self.search_lexical(query, filters, k, conn=c)
        if not query.strip():
            return []
        where, params, _ = self._filters(conn, filters)
        acl, acl_params = self._acl(filters)
        params |= acl_params | {"q": query, "k": int(k), "cap": max(int(k), LEXICAL_RANK_CAP)}
        rows = conn.execute(text(_LEXICAL.format(query=_AND_QUERY, acl=acl, filters=where)), params).fetchall()
        out = [RankedChunk(r.source_object_id, r.ordinal, r.content_hash, float(r.score)) for r in rows]
        if len(out) < min(k, OR_FALLBACK_BELOW) and not WEBSEARCH_SYNTAX.search(query):
            seen = {(h.source_object_id, h.ordinal) for h in out}
            more = conn.execute(text(_LEXICAL.format(query=_OR_QUERY, acl=acl, filters=where)), params).fetchall()
            for r in more:
                if (r.source_object_id, r.ordinal) not in seen and len(out) < k:
                    out.append(RankedChunk(r.source_object_id, r.ordinal, r.content_hash, float(r.score)))
        return out

    def search_vector(self, vector: np.ndarray, filters: SearchFilters, k: int, *, conn: Connection | None = None
                      ) -> list[RankedChunk]:
        """Nearest rows by cosine distance through the HNSW index (iterative scan, so the permission
        filter still yields up to ``k`` rows); score = 1 − distance. [] when the index has no vectors.

        Raises: ValueError when ``vector`` does not have the index's dimension.
        """
        if conn is None:
            with self.engine.begin() as c:  # SET LOCAL needs a transaction
                return self.search_vector(vector, filters, k, conn=c)
        identity = self.index_identity(conn)
        if identity is None:
            return []
        vec = np.asarray(vector, dtype=np.float32)
        if vec.shape != (identity.dimension,):
            raise ValueError(f"query vector has shape {vec.shape}; the index holds {identity}")
        _register_vector(conn)
        where, params, _ = self._filters(conn, filters)
        acl, acl_params = self._acl(filters)
        params |= acl_params | {"v": vec, "k": int(k)}
        conn.execute(text("SELECT set_config('hnsw.ef_search', :ef, true), "
                          "set_config('hnsw.iterative_scan', 'relaxed_order', true)"),
                     {"ef": str(max(EF_SEARCH, int(k)))})
        sql = _VECTOR.format(d=int(identity.dimension), acl=acl, filters=where)
        rows = conn.execute(text(sql), params).fetchall()
        return [RankedChunk(r.source_object_id, r.ordinal, r.content_hash, 1.0 - float(r.distance)) for r in rows]


# --- pre-0005 helpers ------------------------------------------------------------------------------------


def delete_object_chunks(conn: Connection, source_object_id: int) -> int:
    """Remove every chunk of a tombstoned object in the caller's transaction. Returns rows deleted."""
    return conn.execute(text("DELETE FROM chunk WHERE source_object_id = :oid"), {"oid": source_object_id}).rowcount


def search(conn: Connection, query: str, *, principals: Sequence[str] | None = None, limit: int = 10) -> list[Any]:
    """Lexical search (best chunk per document, identical content collapsed) on ``conn``'s database.

    Args:
        principals: the caller's principals (``*`` is added); None = the local operator (all grants).
    Returns: :class:`ki.index.search.SearchHit` list, best first. For hybrid search and filters use
    :func:`ki.index.search.search`.
    """
    from ki.index.search import search_with_backend

    backend = PostgresBackend(conn.engine)
    return search_with_backend(backend, conn.engine, query, principals=principals, limit=limit, mode="lexical",
                               embedder=None).hits
