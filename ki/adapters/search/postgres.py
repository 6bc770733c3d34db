"""The embedded search backend: the record in PostgreSQL, BM25 in a tantivy projection, pgvector HNSW.

Spec: insertion-pipeline.md "Index" (chunks diffed by ordinal: replaced, not orphaned; permission
projection on every chunk; access-only updates bump ``access_version``; model name and dimension
recorded on the index); DESIGN.md "Two deployments"; notes/opensearch.md §6 (pgvector HNSW with iterative
index scans so filtered queries still return k rows; ``allowed_principals && P AND NOT denied_principals
&& P`` inside the vector half) (the lexical half ranks every match: exact top k).

The lexical half runs on :mod:`ki.adapters.search.lexical` (tantivy, BM25) kept in step with the ``chunk`` rows by
:mod:`ki.adapters.search.projection`: every write here logs the object in ``index_change``
(:mod:`ki.store.index_record`)
in its transaction, and after the commit the projection's background applier applies it (one commit for the
writes of half a second). Searches catch the projection up first; every hit is confirmed by the record.

Tables: ``chunk`` (rows; ``embedding`` is an untyped ``vector``, float32), ``index_meta`` (the
``default`` index's embedder and dimension). The HNSW index ``ix_chunk_embedding_hnsw`` on
``(embedding::halfvec(d)) halfvec_cosine_ops`` (float16 in the graph: half the size, same ranking
for unit vectors) is created when the first embedder is recorded, and the vector half orders by the
same expression. This backend is also the record: the chunk rows
stay in PostgreSQL whatever other backend is synced from them (``lexical=False``: the record of
:class:`ki.adapters.search.opensearch.OpenSearchBackend`, which keeps no tantivy projection).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine
from sqlalchemy.engine import Connection

from ki.adapters.search.backend import (
    CLAUSE_KIND,
    PROFILE_KIND,
    EmbedderMismatch,
    FilterReport,
    IndexDocument,
    RankedChunk,
    SearchFilters,
    WriteResult,
    row_ordinals,
)
from ki.adapters.search.embedder import EmbedderIdentity
from ki.adapters.search.pgvector import register_vector
from ki.adapters.search.query import parse_query
from ki.domain.access.projection import AccessProjection
from ki.store import chunk_rows
from ki.store.chunk_rows import delete_object_chunks
from ki.store.index_record import acl_sql, filter_sql, head_and_epoch, log_changes

if TYPE_CHECKING:
    import numpy as np

INDEX_NAME = "default"
#: hnsw.ef_search floor (pgvector default 40); raised to k when more rows are asked for.
EF_SEARCH = 40

class PostgresBackend:
    """The embedded :class:`ki.adapters.search.backend.SearchBackend` (see the module docstring).

    Args:
        engine: the SQLAlchemy engine of ki's database (or a :class:`ki.store.db.Database`).
        index_name: the ``index_meta`` row (one index per database: ``default``).
        large_passages: ``retrieval.large_document_passages`` (None: its default): documents of more passages
            are searched in the projection's "large documents" index (:mod:`ki.adapters.search.projection`).
        index_wait: a lexical search waits for another process applying the projection's backlog (False: it waits
            for this process's appliers only, else searches what is applied — ``ki serve``).

    Attributes: ``lexical_lag``: logged changes the full-text projection had not applied when the last
    lexical search of this instance answered (0: it searched everything).

    Raises (every method): SQLAlchemy/psycopg errors when the database fails (an outage).
    """

    name = "postgres"
    lexical_lag = 0

    def __init__(self, engine: Engine | Any, *, index_name: str = INDEX_NAME, lexical: bool = True,
                 index_root: Path | None = None, large_passages: int | None = None, index_wait: bool = True):
        self.engine: Engine = getattr(engine, "engine", engine)
        self.index_name = index_name
        self.lexical = lexical
        self.index_root = index_root
        self.large_passages = large_passages
        self.index_wait = index_wait
        self._projection: Any = None

    def projection(self) -> Any:
        """The tantivy projection of this database (:func:`ki.adapters.search.projection.projection_for`)."""
        if self._projection is None:
            from ki.adapters.search.projection import projection_for

            self._projection = projection_for(self.engine, self.index_root, self.large_passages)
        return self._projection

    def generation(self) -> tuple[int, int]:
        """(the record's change-log head, the full-text projection's applied watermark; -1 without one): see
        :meth:`ki.adapters.search.backend.SearchBackend.generation`."""
        from ki.adapters.search.projection import projection_for

        with self.engine.connect() as conn:
            head, epoch = head_and_epoch(conn)
        if not self.lexical:
            return head, -1
        if self._projection is None:
            self._projection = projection_for(self.engine, self.index_root, self.large_passages, epoch=epoch)
        return head, self._projection.watermark()

    def _applied(self) -> None:
        """After a committed write: ask the projection to apply it soon (in the background; never waits)."""
        if self.lexical:
            self.projection().request_apply()

    # -- index identity ---------------------------------------------------------------------------

    def index_identity(self, conn: Connection | None = None) -> EmbedderIdentity | None:
        """The embedder the index records, or None (no vectors yet)."""
        if conn is None:
            with self.engine.connect() as c:
                return self.index_identity(c)
        row = chunk_rows.index_meta(conn, self.index_name)
        return EmbedderIdentity(row[0], row[1]) if row else None

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
            chunk_rows.lock_index_meta(conn, self.index_name)
            current = self.index_identity(conn)
            if current == identity:
                return
            if current is not None:
                raise EmbedderMismatch(current, identity, backend=self.name)
            chunk_rows.record_embedder(conn, self.index_name, identity.embedder, int(identity.dimension))

    def reset_vectors(self) -> int:
        """Drop every vector, the HNSW index, the embedding cache and the index's embedder record.

        The next index run records whatever ``retrieval.embedding_model`` gives. Returns the number of
        chunks whose vector was dropped. (``ki index reset-vectors``.)
        """
        with self.engine.begin() as conn:
            chunk_rows.lock_index_meta(conn, self.index_name)
            return chunk_rows.drop_vectors(conn, self.index_name)

    # -- writes -----------------------------------------------------------------------------------

    def write_document(self, doc: IndexDocument) -> WriteResult:
        """Upsert ``doc.rows`` by ordinal, then delete the object's other ordinals, in one transaction.

        An object tombstoned meanwhile gets no rows (its rows are removed). The object's
        ``access_version`` is kept, or bumped when the projection differs from its rows'. The write is logged
        (``index_change``) and applied to the lexical projection after the commit.
        Raises: EmbedderMismatch before anything is written.
        """
        self.ensure_embedder(doc.embedder)
        ordinals = row_ordinals(doc.rows)
        if len(set(ordinals)) != len(ordinals):
            raise ValueError(f"duplicate ordinals in the rows of object {doc.source_object_id}")
        with self.engine.begin() as conn:
            if not chunk_rows.object_live(conn, doc.source_object_id):
                result = WriteResult(0, 0, delete_object_chunks(conn, doc.source_object_id), 0, skipped_deleted=True)
            else:
                result = self._write_rows(conn, doc, ordinals)
        if result.upserted or result.deleted:
            self._applied()
        return result

    def _write_rows(self, conn: Connection, doc: IndexDocument, ordinals: list[int]) -> WriteResult:
        """The write of :meth:`write_document` for a live object, in its transaction (logged last)."""
        meta = chunk_rows.index_meta(conn, self.index_name, for_share=True)
        recorded = EmbedderIdentity(meta[0], meta[1]) if meta else None
        if recorded != doc.embedder:
            raise EmbedderMismatch(recorded, doc.embedder, backend=self.name)
        current = chunk_rows.current_rows(conn, doc.source_object_id)
        version = max((r.access_version for r in current), default=0)
        allowed, denied = list(doc.access.allowed), list(doc.access.denied)
        if any((sorted(r.allowed_principals), sorted(r.denied_principals)) != (allowed, denied) for r in current):
            version += 1
        upserted = 0
        if doc.embedder is not None and doc.rows:
            register_vector(conn)
        step = chunk_rows.WRITE_BATCH_ROWS  # batches: a huge file is not one giant statement
        for lo in range(0, len(doc.rows), step):
            batch = doc.rows[lo:lo + step]
            params = {"oid": doc.source_object_id, "h": doc.content_hash, "title": doc.title,
                      "allowed": allowed, "denied": denied, "version": version,
                      "ordinals": ordinals[lo:lo + step], "bodies": [r.text for r in batch],
                      "kinds": [r.kind for r in batch],
                      "metas": [None if r.meta is None else json.dumps(r.meta) for r in batch]}
            if doc.embedder is not None:
                import numpy as np  # only a vector index needs it (lexical-only search never loads numpy)

                embs = []
                for r in batch:
                    if r.embedding is None or r.embedding.shape != (doc.embedder.dimension,):
                        raise ValueError(f"row {r.ordinal} of object {doc.source_object_id} has no "
                                         f"{doc.embedder.dimension}-d vector")
                    embs.append(np.asarray(r.embedding, dtype=np.float32))
                params["embs"] = embs
            upserted += chunk_rows.upsert_rows(conn, params, with_vectors=doc.embedder is not None)
        deleted = chunk_rows.delete_surplus(conn, doc.source_object_id, ordinals)
        if upserted or deleted:
            log_changes(conn, [doc.source_object_id])
        return WriteResult(upserted, len(doc.rows) - upserted, deleted, version)

    def delete_object(self, source_object_id: int) -> int:
        """Remove the rows of a tombstoned object. Returns rows removed."""
        with self.engine.begin() as conn:
            n = delete_object_chunks(conn, source_object_id)
        self._applied()
        return n

    def retire_document_rows(self, source_object_ids: list[int]) -> int:
        """Remove the profile and clause rows of the objects (their passages stay), logged for the projections.
        Returns rows removed."""
        if not source_object_ids:
            return 0
        with self.engine.begin() as conn:
            n = chunk_rows.retire_rows(conn, sorted(source_object_ids), [PROFILE_KIND, CLAUSE_KIND])
            if n:
                log_changes(conn, source_object_ids)
        if n:
            self._applied()
        return n

    def update_access(self, source_object_id: int, access: AccessProjection) -> int | None:
        """Rewrite the permission fields of every row of the object and bump ``access_version``.

        Returns the new access_version, or None when the object has no rows.
        """
        with self.engine.begin() as conn:
            versions = chunk_rows.update_access(conn, source_object_id, list(access.allowed), list(access.denied))
            if versions:
                log_changes(conn, [source_object_id])
        if versions:
            self._applied()
        return max(versions, default=None)

    # -- search -----------------------------------------------------------------------------------

    def filter_report(self, filters: SearchFilters) -> FilterReport:
        """Which filters apply and why others are ignored (printed by ``ki search``)."""
        with self.engine.connect() as conn:
            return filter_sql(conn, filters)[2]

    def search_lexical(self, query: str, filters: SearchFilters, k: int) -> list[RankedChunk]:
        """The best row of each of the ``k`` best contents for ``query`` (:mod:`ki.adapters.search.query`), ranked by
        BM25 over every matching row (:mod:`ki.adapters.search.lexical_search`); the projection is caught up first,
        boundedly (:meth:`ki.adapters.search.projection.LexicalProjection.catch_up_for_search`, waiting for another
        process's applier only with ``index_wait``): the changes still not applied are left in :attr:`lexical_lag`
        for the answer's notes."""
        from ki.adapters.search.lexical_search import search_projection

        parsed = parse_query(query)
        if parsed.empty:
            return []
        proj = self.projection()
        self.lexical_lag = proj.catch_up_for_search(other_processes=self.index_wait)
        report = self.filter_report(filters)
        return search_projection(proj, self.engine, parsed, filters, k, engine_facts=frozenset(report.applied))

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
        import numpy as np  # a vector search has numpy loaded already (its query vector is an array)

        vec = np.asarray(vector, dtype=np.float32)
        if vec.shape != (identity.dimension,):
            raise ValueError(f"query vector has shape {vec.shape}; the index holds {identity}")
        register_vector(conn)
        where, params, _ = filter_sql(conn, filters)
        acl, acl_params = acl_sql(filters)
        params |= acl_params | {"v": vec, "k": int(k)}
        rows = chunk_rows.nearest_rows(conn, int(identity.dimension), acl=acl, where=where, params=params,
                                       ef_search=max(EF_SEARCH, int(k)))
        return [RankedChunk(r.source_object_id, r.ordinal, r.content_hash, 1.0 - float(r.distance)) for r in rows]
