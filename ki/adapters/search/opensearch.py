"""The search backend at scale: OpenSearch (BM25 + lucene k-NN), synced from the PostgreSQL record.

Spec: insertion-pipeline.md "Index" (chunk rows plus an OpenSearch bulk sync; permission projection on
every row; re-index diffs by ordinal; access-only updates; the model name and dimension recorded on
the index, another model refused before any write); DESIGN.md "Two deployments" (OpenSearch for
scale, the same fusion); notes/opensearch.md §2.3 (index shape), §3 (client-side RRF), §4 (bulk).

**PostgreSQL stays the record; the index stage writes both.** Every write goes to
:class:`~ki.adapters.search.postgres.PostgresBackend` first (the ``chunk`` rows that search hits are hydrated
from: path, snippet, matter, type), then to OpenSearch (:mod:`ki.adapters.search.opensearch_bulk`). A failed
OpenSearch sync fails the stage (retried), and the rewrite by ordinal makes the retry complete the
sync. Searches run both halves on OpenSearch with the caller's permission filter (``terms`` on
``allowed_principals``, ``must_not terms`` on ``denied_principals``: deny beats allow; inside
``knn.filter`` for the vector half); the lexical half is the query tree of :mod:`ki.adapters.search.query_plan` over the
streams of :mod:`ki.adapters.search.analysis` (the same semantics and analysis as the embedded backend), in rounds of
the best rows (no ``collapse``, no hit count: Lucene skips what cannot reach the top), each content's first row
kept and the taken contents excluded from the next round (:func:`ki.adapters.search.lexical_search.rank_contents`); the
record confirms each candidate in one query: the row
exists, its object is not tombstoned, the record's permissions admit the caller (a narrowed grant
never over-permits while OpenSearch lags), and the matter / type / since filters hold (they are
facts of the record; candidates are over-fetched ×4 when one is set). Rows the record no longer
has (tombstoned objects: the scan drops their ``chunk`` rows in PostgreSQL only) are deleted from
OpenSearch when a search meets them. Fusion stays in :mod:`ki.adapters.search.hybrid` (RRF).

Index: one per ki database, ``ki-chunks-<database name>`` (``KI_OPENSEARCH_INDEX`` overrides),
``dynamic: strict``, 1 shard, 0 replicas, ``index.knn: true``; the vector field
(``knn_vector``, ``engine: lucene``, ``innerproduct`` of unit vectors, HNSW) is added with the first embedder, whose
identity is recorded in the mapping's ``_meta`` (``embedder``, ``dimension``, ``ki_schema``: an index of an
older mapping is deleted and written again from the record by the next index write).

**Large documents apart** (a 120 MB file changes no other query's top 10): an object of more than
``retrieval.large_document_passages`` passages (:func:`ki.store.index_record.is_large`) has its rows in a second
index, ``<index>.large`` (same mapping), never in both: a write puts the rows in the index its passage count
picks and its surplus delete removes the object's rows of other generations from both (a document that grows
or shrinks across the threshold moves). Lucene computes BM25 statistics per shard, so per index here (one
shard each): the huge file's passages never enter the document frequencies and average lengths the other
documents are scored by. Every search asks both indexes in one request (``<index>,<index>.large``) and
OpenSearch merges by score; the rounds keep one row per content across both. The threshold is recorded in
``_meta.large_passages``: an index pair of another threshold (or a main index without its large one) is
rebuilt from the record.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine

from ki.adapters.search.backend import (
    EmbedderMismatch,
    IndexDocument,
    WriteResult,
    row_ordinals,
)
from ki.adapters.search.embedder import EmbedderIdentity
from ki.adapters.search.opensearch_bulk import (
    BulkOptions,
    SyncReport,
    bulk_execute,
    classify_transport_error,
    delete_by_query,
    sync_documents,
)
from ki.adapters.search.opensearch_index import (
    KI_SCHEMA,
    KNOWN_IDENTITIES,
    LARGE_SUFFIX,
    LOCK,
    SPACE_TYPE,
    SPACES,
    client_for,
    documents_from_record,
    index_body,
    index_name_for,
    refresh_interval,
    row_actions,
    vector_field,
)
from ki.adapters.search.opensearch_search import OpenSearchSearch
from ki.adapters.search.postgres import PostgresBackend
from ki.domain.access.projection import AccessProjection
from ki.store.chunks import chunk_object_ids, chunk_ordinals
from ki.store.index_record import is_large, object_facts


class OpenSearchBackend(OpenSearchSearch):
    """The OpenSearch :class:`ki.adapters.search.backend.SearchBackend` (see the module docstring).

    Args:
        db: ki's database (Engine or :class:`ki.store.db.Database`): the record (``chunk`` rows).
        url: the node or cluster (``components.opensearch_url``), e.g. ``http://127.0.0.1:9200``.
        index: the index name (default :func:`index_name_for`).
        bulk: bulk tuning (:class:`~ki.adapters.search.opensearch_bulk.BulkOptions`).
        client: an opensearch-py client (default :func:`client_for`).
        large_passages: ``retrieval.large_document_passages`` (None: its default): documents of more passages
            live in ``<index>.large`` (see the module docstring).
        allow_link_local: ``components.allow_link_local_urls`` (the default client refuses connections to
            link-local and cloud-metadata addresses: ConfigurationError).

    Raises (every method): InfrastructureError (unreachable, 5xx, 429 exhausted), IndexReadOnly
    (writes to a blocked index), PostgreSQL errors of the record.
    """

    name = "opensearch"

    def __init__(self, db: Any, url: str, *, index: str | None = None, bulk: BulkOptions | None = None,
                 client: Any = None, large_passages: int | None = None, allow_link_local: bool = False):
        from ki.adapters.search.projection import default_large_passages

        self.record = PostgresBackend(db, lexical=False)
        self.engine: Engine = self.record.engine
        self.url = url
        self.index = index or index_name_for(self.engine)
        self.large_index = self.index + LARGE_SUFFIX
        self.large_passages = default_large_passages() if large_passages is None else int(large_passages)
        self.bulk = bulk or BulkOptions()
        self.client = client if client is not None else client_for(url, allow_link_local=allow_link_local)
        self._outdated = False
        self._large_missing = False

    def _fail(self, exc: BaseException, what: str) -> Exception:
        return classify_transport_error(exc, index=self.index, what=what)

    # -- the index and its embedder record ----------------------------------------------------------

    @property
    def both(self) -> str:
        """Both indexes, as one comma-separated name (searches and deletes)."""
        return f"{self.index},{self.large_index}"

    def target(self, passages: int) -> str:
        """The index of a document of ``passages`` passages (see the module docstring)."""
        return self.large_index if is_large(passages, self.large_passages) else self.index

    def _read_identity(self) -> tuple[bool, EmbedderIdentity | None]:
        """(index exists, the identity its ``_meta`` records); marks the pair outdated when the index is of
        another schema or threshold, and notes whether its large-documents index is missing."""
        from opensearchpy.exceptions import NotFoundError, OpenSearchException

        try:
            resp = self.client.indices.get_mapping(index=self.both, ignore_unavailable=True)
        except NotFoundError:
            return False, None
        except OpenSearchException as exc:
            raise self._fail(exc, "reading the index mapping") from exc
        if self.index not in resp:
            return False, None
        mappings = resp.get(self.index, {}).get("mappings", {}) or {}
        meta = mappings.get("_meta") or {}
        self._outdated = meta.get("ki_schema") != KI_SCHEMA or meta.get("large_passages") != self.large_passages
        self._large_missing = self.large_index not in resp
        method = ((mappings.get("properties") or {}).get("embedding") or {}).get("method") or {}
        with LOCK:
            SPACES[(self.url, self.index)] = str(method.get("space_type") or SPACE_TYPE)
        if meta.get("embedder") is None:
            return True, None
        return True, EmbedderIdentity(str(meta["embedder"]), int(meta["dimension"]))

    def generation(self) -> tuple[int, int]:
        """The record's change-log head (the index stage writes OpenSearch right after the record): see
        :meth:`ki.adapters.search.backend.SearchBackend.generation`."""
        return self.record.generation()

    def index_identity(self) -> EmbedderIdentity | None:
        """The embedder the OpenSearch index records (cached per process once seen), or None."""
        key = (self.url, self.index)
        with LOCK:
            if key in KNOWN_IDENTITIES:
                return KNOWN_IDENTITIES[key]
        exists, identity = self._read_identity()
        if exists:
            with LOCK:
                KNOWN_IDENTITIES[key] = identity
        return identity

    def ensure_embedder(self, identity: EmbedderIdentity | None) -> None:
        """Create the index if missing; refuse ``identity`` unless both the OpenSearch index and the record
        hold the same one (or none yet); record it on both. Raises: EmbedderMismatch before any write.

        Reads the mapping on every call (one small GET per document write), never a cached identity: an
        index dropped by ``reset-vectors`` in another process must be re-created with ki's strict mapping,
        not auto-created by the next bulk request with a dynamic one."""
        from opensearchpy.exceptions import OpenSearchException, RequestError

        key = (self.url, self.index)
        exists, current = self._read_identity()
        rebuild = exists and self._outdated
        if rebuild:  # an index of an older mapping (another analysis): made again from the record below
            self.drop_index()
            exists, current = False, None
        if exists and current != identity and (current is not None or identity is None):
            raise EmbedderMismatch(current, identity, backend=self.name)
        recorded = self.record.index_identity()
        if recorded != identity and (recorded is not None or identity is None):
            raise EmbedderMismatch(recorded, identity, backend=self.record.name)
        try:
            if not exists:
                try:
                    self.client.indices.create(index=self.index, body=index_body(identity, self.large_passages))
                    self._create_large(identity)
                    with LOCK:
                        SPACES[key] = SPACE_TYPE
                except RequestError as exc:  # created meanwhile by another worker
                    if "resource_already_exists_exception" not in str(exc):
                        raise
                    exists, current = self._read_identity()
                    if current != identity:
                        if current is not None or identity is None:
                            raise EmbedderMismatch(current, identity, backend=self.name) from exc
                        exists = True
                    else:
                        exists = False
            if exists and self._large_missing:  # another worker is creating it, or it was deleted: make it
                self._create_large(current)
            if exists and current is None and identity is not None:
                self.client.indices.put_mapping(index=self.both, body={
                    "_meta": {"ki_schema": KI_SCHEMA, "large_passages": self.large_passages,
                              "embedder": identity.embedder, "dimension": int(identity.dimension)},
                    "properties": {"embedding": vector_field(identity.dimension)}})
        except OpenSearchException as exc:
            raise self._fail(exc, "creating the index") from exc
        self.record.ensure_embedder(identity)
        with LOCK:
            KNOWN_IDENTITIES[key] = identity
        if rebuild:
            self.rebuild_from_record()

    def _create_large(self, identity: EmbedderIdentity | None) -> None:
        """Create ``<index>.large`` with the main index's mapping (nothing when another worker did)."""
        from opensearchpy.exceptions import RequestError

        try:
            self.client.indices.create(index=self.large_index, body=index_body(identity, self.large_passages))
        except RequestError as exc:
            if "resource_already_exists_exception" not in str(exc):
                raise

    def rebuild_from_record(self, batch: int = 500) -> int:
        """Write every object the record holds to OpenSearch (after its index was made again), as one
        :meth:`bulk_load`. Returns objects."""
        with self.engine.connect() as conn:
            oids = chunk_object_ids(conn)
        with self.bulk_load():
            for i in range(0, len(oids), batch):
                self.resync_from_record(oids[i:i + batch], refresh=False)
        return len(oids)

    def reset_vectors(self) -> int:
        """Drop the record's vectors (:meth:`PostgresBackend.reset_vectors`) and the OpenSearch index
        (re-created by the next index run). Returns the record's vectors dropped."""
        n = self.record.reset_vectors()
        self.drop_index()
        return n

    def drop_index(self) -> None:
        """Delete the OpenSearch index and its large-documents index (nothing when they do not exist) and forget
        the cached identity."""
        from opensearchpy.exceptions import OpenSearchException

        try:
            self.client.indices.delete(index=self.both, ignore_unavailable=True)
        except OpenSearchException as exc:
            raise self._fail(exc, "deleting the index") from exc
        with LOCK:
            KNOWN_IDENTITIES.pop((self.url, self.index), None)
            SPACES.pop((self.url, self.index), None)

    # -- writes -------------------------------------------------------------------------------------

    def sync(self, docs: list[IndexDocument], access_versions: dict[int, int] | None = None, *,
             refresh: bool = True) -> SyncReport:
        """Bulk-write ``docs`` to OpenSearch only (the record is written by the caller), each to the index its
        passage count picks (:meth:`target`), then delete their surplus rows in both indexes. Per-document
        outcome in the report (``raise_for``); whole-request faults raise. ``refresh``: wait until the rows are
        searchable (False inside :meth:`bulk_load` only)."""
        generation = uuid.uuid4().hex
        versions = access_versions or {}
        with self.engine.connect() as conn:
            facts = object_facts(conn, [d.source_object_id for d in docs])
        by_index: dict[str, list[IndexDocument]] = {}
        for d in docs:
            by_index.setdefault(self.target(sum(o >= 0 for o in row_ordinals(d.rows))), []).append(d)
        report = SyncReport()
        for index, group in by_index.items():
            docs_actions = [(d.source_object_id, row_actions(index, d, generation=generation,
                                                             access_version=versions.get(d.source_object_id, 0),
                                                             facts=facts.get(d.source_object_id)))
                            for d in group]
            other = self.large_index if index == self.index else self.index
            report = report.merge(sync_documents(self.client, index, docs_actions, generation=generation,
                                                 options=self.bulk, elsewhere=(other,), refresh=refresh))
        return report

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Refreshes of both indexes off while the block writes (``refresh_interval: -1``; its syncs pass
        ``refresh=False``), then the configured interval back and one refresh: every refresh makes a segment,
        which later merges rewrite, and a ``wait_for`` per batch waits for one. A writer meanwhile waiting for a
        refresh (``wait_for``) returns at the closing refresh; searches meanwhile see what was refreshed before.

        Raises: InfrastructureError / IndexReadOnly (settings or refresh refused; the interval is put back first).
        """
        from opensearchpy.exceptions import OpenSearchException

        def interval(value: str) -> None:
            self.client.indices.put_settings(index=self.both, body={"index": {"refresh_interval": value}})

        try:
            interval("-1")
        except OpenSearchException as exc:
            raise self._fail(exc, "turning refreshes off for a bulk load") from exc
        try:
            yield
        finally:
            try:
                interval(refresh_interval())
                self.client.indices.refresh(index=self.both)
            except OpenSearchException as exc:
                raise self._fail(exc, "turning refreshes back on after a bulk load") from exc

    def write_document(self, doc: IndexDocument) -> WriteResult:
        """Write the record (upsert by ordinal, surplus delete), then sync the rows to OpenSearch (new rows
        first, then the object's rows of earlier writes deleted; ``refresh=wait_for``).

        Raises: EmbedderMismatch (nothing written anywhere); DocumentRejected (the node refused rows of this
        document: its old OpenSearch rows stay); IndexReadOnly / InfrastructureError (an outage).
        """
        self.ensure_embedder(doc.embedder)
        result = self.record.write_document(doc)
        if result.skipped_deleted:
            self._delete_object_rows(doc.source_object_id)
            return result
        report = self.sync([doc], {doc.source_object_id: result.access_version})
        report.raise_for(doc.source_object_id, index=self.index)
        return result

    def _delete_object_rows(self, source_object_id: int) -> int:
        if self.index_identity() is None and not self._read_identity()[0]:
            return 0
        return delete_by_query(self.client, self.both, {"term": {"source_object_id": source_object_id}},
                               what="the object delete")

    def delete_objects(self, source_object_ids: list[int]) -> int:
        """Remove the OpenSearch rows of several objects (tombstoned by a scan, which removed their
        record rows in its own transaction), in one ``_delete_by_query``. Returns rows deleted.

        Raises: IndexReadOnly / InfrastructureError.
        """
        if not source_object_ids:
            return 0
        with LOCK:
            known = (self.url, self.index) in KNOWN_IDENTITIES  # the index existed when last seen
        if not known and not self._read_identity()[0]:
            return 0
        return delete_by_query(self.client, self.both, {"terms": {"source_object_id": list(source_object_ids)}},
                               what="the tombstone delete")

    def retire_document_rows(self, source_object_ids: list[int]) -> int:
        """Remove the objects' profile and clause rows from the record, then write the objects to OpenSearch as
        the record now holds them (:meth:`resync_from_record`). Returns the record's rows removed."""
        n = self.record.retire_document_rows(source_object_ids)
        if n:
            self.resync_from_record(sorted(source_object_ids))
        return n

    def delete_object(self, source_object_id: int) -> int:
        """Remove the object's rows from the record and from OpenSearch. Returns the record's rows removed."""
        n = self.record.delete_object(source_object_id)
        self._delete_object_rows(source_object_id)
        return n

    def update_access(self, source_object_id: int, access: AccessProjection) -> int | None:
        """Rewrite only the permission fields (and ``access_version``) of the object's rows: the record
        first, then partial ``update`` actions by id on OpenSearch (bulk, ``refresh=wait_for``). Rows the
        index lacks (an index younger than the record) are written whole from the record instead.

        Returns the new access_version, or None when the object has no rows.
        Raises: IndexReadOnly / InfrastructureError (the OpenSearch rows keep their old permissions; the
        record already holds the new ones, and searches confirm every hit against it: never over-permits);
        DocumentRejected.
        """
        version = self.record.update_access(source_object_id, access)
        if version is None:
            return None
        with self.engine.connect() as conn:
            ordinals = chunk_ordinals(conn, source_object_id)
        fields = {"allowed_principals": list(access.allowed), "denied_principals": list(access.denied),
                  "access_version": version}
        index = self.target(sum(o >= 0 for o in ordinals))
        actions = [{"_op_type": "update", "_index": index, "_id": f"{source_object_id}-{o}", "doc": fields}
                   for o in ordinals]
        result = bulk_execute(self.client, actions, index=index, options=self.bulk)
        missing = [f for f in result.failed.values() if f.type == "document_missing_exception"]
        others = [f for f in result.failed.values() if f.type != "document_missing_exception"]
        if others:
            SyncReport(failed={source_object_id: others}).raise_for(source_object_id, index=self.index)
        if missing:
            self.resync_from_record([source_object_id])
        return version

    def resync_from_record(self, source_object_ids: list[int], *, refresh: bool = True) -> SyncReport:
        """Write the objects' rows to OpenSearch exactly as the record holds them (text, vectors,
        permissions, access_version), deleting their other rows. Objects without rows are removed.
        ``refresh``: as :meth:`sync`."""
        with self.engine.connect() as conn:
            docs, versions = documents_from_record(conn, source_object_ids, self.record.index_identity(conn))
        by_object = {d.source_object_id for d in docs}
        for oid in set(source_object_ids) - set(by_object):
            self._delete_object_rows(oid)
        report = self.sync(docs, versions, refresh=refresh) if docs else SyncReport()
        for oid in report.failed:
            report.raise_for(oid, index=self.index)
        return report
