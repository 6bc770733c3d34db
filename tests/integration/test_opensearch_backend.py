"""OpenSearch backend: the index shape and bulk faults, against the real node through a fault-injecting proxy.

Spec: insertion-pipeline.md "Index"; notes/opensearch.md §4 (bulk rules) and §5 (public failures → tests).
The node is the session's (tests/conftest.py ``opensearch_node``); requests go through
:class:`FaultProxy`, a threaded loopback HTTP proxy that forwards to the node and, when told, answers
a bulk request itself (413 above a size, 200 with every item 429, a whole-request 429) or rewrites a
row so that the real node refuses it (a real ``mapper_parsing_exception``). The read-only case sets
``index.blocks.read_only_allow_delete`` on the real node. The record is the test's real PostgreSQL.
"""

from __future__ import annotations

import http.client
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

import numpy as np
import pytest

from ki.adapters.search.backend import ChunkRow, EmbedderMismatch, IndexDocument, SearchFilters
from ki.adapters.search.embedder import EmbedderIdentity
from ki.adapters.search.embeddings import HashingEmbedder
from ki.adapters.search.opensearch import OpenSearchBackend
from ki.adapters.search.opensearch_bulk import BulkOptions, DocumentRejected, IndexReadOnly
from ki.adapters.search.opensearch_index import KI_SCHEMA
from ki.core.errors import InfrastructureError
from ki.core.retry import Treatment, classify_error
from ki.domain.access.projection import AccessProjection, principal_set
from tests.helpers.loopback import LoopbackServer, QuietHandler
from tests.helpers.postgres import insert_objects

pytestmark = pytest.mark.opensearch
opensearchpy = pytest.importorskip("opensearchpy")

EMB = HashingEmbedder(32)
IDENTITY = EmbedderIdentity(EMB.name, EMB.dimension)


class FaultProxy(LoopbackServer):
    """Forwards HTTP to the node; bulk requests (``/_bulk``) can be refused or rewritten.

    Attributes (set by tests): ``refuse_above_bytes`` (413 for bigger bulk bodies), ``reject_items``
    (answer that many bulk requests 200 with every item 429), ``reject_requests`` (that many whole-request
    429), ``corrupt_ids`` (rows whose ``ordinal`` becomes a string: the node refuses them).
    ``bulk_log``: (body bytes, status answered) of every bulk request.
    """

    thread_name = "opensearch-fault-proxy"

    def __init__(self, target: str):
        super().__init__()
        self.target = urlsplit(target)
        self.refuse_above_bytes: int | None = None
        self.reject_items = 0
        self.reject_requests = 0
        self.corrupt_ids: set[str] = set()
        self.bulk_log: list[tuple[int, int]] = []
        self.lock = threading.Lock()

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def _send(self, status: int, payload: bytes) -> None:
                self.send_bytes(status, payload, "application/json; charset=UTF-8")

            def _handle(self) -> None:
                body = self.read_body()
                if urlsplit(self.path).path.endswith("/_bulk"):
                    reply = proxy.bulk_fault(body)
                    if reply is not None:
                        self._send(*reply)
                        return
                    body = proxy.corrupt(body)
                conn = http.client.HTTPConnection(proxy.target.hostname, proxy.target.port, timeout=60)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "content-length", "connection")}
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                if urlsplit(self.path).path.endswith("/_bulk"):
                    with proxy.lock:
                        proxy.bulk_log.append((len(body), resp.status))
                self._send(resp.status, data)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle

        return Handler

    @staticmethod
    def actions(body: bytes) -> list[tuple[str, dict]]:
        lines = [ln for ln in body.decode().split("\n") if ln.strip()]
        out, i = [], 0
        while i < len(lines):
            (op, meta), = json.loads(lines[i]).items()
            out.append((op, meta))
            i += 1 if op == "delete" else 2
        return out

    def bulk_fault(self, body: bytes) -> tuple[int, bytes] | None:
        with self.lock:
            status = None
            if self.refuse_above_bytes is not None and len(body) > self.refuse_above_bytes:
                status = 413
            elif self.reject_requests > 0:
                self.reject_requests -= 1
                status = 429
            elif self.reject_items > 0:
                self.reject_items -= 1
                status = 200
            if status is None:
                return None
            self.bulk_log.append((len(body), status))
        if status == 413:
            return 413, b'{"error":"Request size exceeded (injected)","status":413}'
        if status == 429:
            return 429, json.dumps({"error": {"type": "es_rejected_execution_exception", "reason": "injected"},
                                    "status": 429}).encode()
        items = [{op: {"_index": meta.get("_index"), "_id": meta.get("_id"), "status": 429,
                       "error": {"type": "es_rejected_execution_exception", "reason": "rejected execution (injected)"}}}
                 for op, meta in self.actions(body)]
        return 200, json.dumps({"took": 1, "errors": True, "items": items}).encode()

    def corrupt(self, body: bytes) -> bytes:
        if not self.corrupt_ids:
            return body
        lines = body.decode().split("\n")
        for i, line in enumerate(lines):
            if line.strip().startswith('{"index"'):
                meta = json.loads(line)["index"]
                if meta.get("_id") in self.corrupt_ids:
                    src = json.loads(lines[i + 1])
                    src["ordinal"] = "not-a-number"
                    lines[i + 1] = json.dumps(src)
        return "\n".join(lines).encode()

    def bulk_requests(self) -> int:
        with self.lock:
            return len(self.bulk_log)

    def __enter__(self) -> FaultProxy:
        return self.start()


@pytest.fixture
def proxy(opensearch_node):
    with FaultProxy(opensearch_node.url) as p:
        yield p


@pytest.fixture
def make_backend(ctx, proxy, monkeypatch):
    """Backends on this test's own index, talking through the proxy; indices dropped at the end."""
    monkeypatch.setenv("KI_OPENSEARCH_REFRESH_INTERVAL", "100ms")  # refresh=wait_for returns sooner
    made: list[OpenSearchBackend] = []
    index = f"ki-faults-{uuid.uuid4().hex[:10]}"

    def factory(**bulk) -> OpenSearchBackend:
        options = BulkOptions(**{"initial_backoff": 0.01, "max_backoff": 0.05, **bulk})
        client = opensearchpy.OpenSearch(hosts=[proxy.url], timeout=30, max_retries=0)
        backend = OpenSearchBackend(ctx.db, proxy.url, index=index, bulk=options, client=client)
        made.append(backend)
        return backend

    yield factory
    if made:
        made[0].drop_index()


def _doc(oid: int, rows: int, *, chars: int = 200, word: str = "Mietvertrag",
         access: AccessProjection | None = None) -> IndexDocument:
    texts = [(f"{word} Zeile {i} " + "Pflichten des Mieters " * (chars // 22))[:chars] for i in range(rows)]
    vectors = EMB.embed_passages(texts)
    return IndexDocument(oid, f"h{oid}", f"doc {oid}", [ChunkRow(i, t, vectors[i]) for i, t in enumerate(texts)],
                         access or AccessProjection(("*",)), IDENTITY)


def _index_rows(backend: OpenSearchBackend) -> dict[int, list[int]]:
    backend.client.indices.refresh(index=backend.index)
    hits = backend.client.search(index=backend.index, body={"size": 10000, "_source": ["source_object_id", "ordinal"],
                                                            "query": {"match_all": {}}})["hits"]["hits"]
    out: dict[int, list[int]] = {}
    for h in hits:
        out.setdefault(h["_source"]["source_object_id"], []).append(h["_source"]["ordinal"])
    return {k: sorted(v) for k, v in out.items()}


def test_index_mapping_is_strict_with_lucene_vectors_and_the_embedder_recorded(make_backend):
    backend = make_backend()
    backend.ensure_embedder(IDENTITY)
    mapping = backend.client.indices.get_mapping(index=backend.index)[backend.index]["mappings"]
    assert mapping["dynamic"] == "strict"
    assert mapping["_meta"] == {"ki_schema": KI_SCHEMA, "large_passages": backend.large_passages,
                                "embedder": IDENTITY.embedder, "dimension": 32}
    large = backend.client.indices.get_mapping(index=backend.large_index)[backend.large_index]["mappings"]
    assert large == mapping  # the large-documents index: the same mapping
    props = mapping["properties"]
    emb = props["embedding"]
    assert (emb["type"], emb["dimension"]) == ("knn_vector", 32)
    assert (emb["method"]["name"], emb["method"]["engine"], emb["method"]["space_type"]) == (
        "hnsw", "lucene", "innerproduct")
    # the token streams of ki.adapters.search.analysis, the same the embedded index holds (one analysis for both)
    assert all(props[f]["analyzer"] == "whitespace" for f in ("t_exact", "t_de", "t_en", "t_parts", "f_name"))
    assert props["f_name_x"]["index_options"] == "freqs" and props["kind"] == {"type": "keyword"}
    assert props["allowed_principals"] == props["denied_principals"] == {"type": "keyword"}
    assert backend.index_identity() == IDENTITY
    settings = backend.client.indices.get_settings(index=backend.index)[backend.index]["settings"]["index"]
    assert settings["search"]["concurrent_segment_search"]["mode"] == "all"
    assert settings["refresh_interval"] == "100ms"  # the fixture's KI_OPENSEARCH_REFRESH_INTERVAL
    # another embedder or dimension: refused before anything is written
    for other in (EmbedderIdentity(IDENTITY.embedder, 16), EmbedderIdentity("other", 32), None):
        with pytest.raises(EmbedderMismatch, match="opensearch search index holds hashing-v1:32"):
            make_backend().ensure_embedder(other)
    assert backend.client.count(index=backend.index)["count"] == 0


def test_oversized_batches_are_split_on_413_and_a_row_too_large_alone_fails_its_document(make_backend, proxy):
    backend = make_backend(max_batch_bytes=2**20)
    backend.ensure_embedder(IDENTITY)
    proxy.refuse_above_bytes = 20_000
    docs = [_doc(oid, 4, chars=1500) for oid in range(1, 13)] + [_doc(99, 1, chars=30_000)]
    report = backend.sync(docs)
    assert report.written == set(range(1, 13)) and set(report.failed) == {99}
    assert [(f.status, f.type) for f in report.failed[99]] == [(413, "request_entity_too_large")]
    assert report.splits >= 2
    refused = [size for size, status in proxy.bulk_log if status == 413]
    forwarded = [size for size, status in proxy.bulk_log if status == 200]
    assert refused and max(refused) > 20_000 and forwarded and max(forwarded) <= 20_000
    assert _index_rows(backend) == {oid: [0, 1, 2, 3] for oid in range(1, 13)}
    with pytest.raises(DocumentRejected) as err:
        report.raise_for(99, index=backend.index)
    assert classify_error(err.value).treatment == Treatment.retry


def test_a_mapping_conflict_fails_exactly_that_document_and_keeps_its_old_rows(ctx, make_backend, proxy):
    backend = make_backend()
    a, b, c = insert_objects(ctx, 3)
    for oid in (a, b, c):
        backend.write_document(_doc(oid, 3))
    proxy.corrupt_ids = {f"{b}-1"}
    report = backend.sync([_doc(a, 2, word="Kaufvertrag"), _doc(b, 2, word="Kaufvertrag"),
                           _doc(c, 2, word="Kaufvertrag")])
    assert report.written == {a, c} and set(report.failed) == {b}
    (failure,) = report.failed[b]
    assert (failure.id, failure.status, failure.type) == (f"{b}-1", 400, "mapper_parsing_exception")
    # a and c lost their surplus row; b kept every old row (nothing deleted before all new rows are in)
    assert _index_rows(backend) == {a: [0, 1], b: [0, 1, 2], c: [0, 1]}
    # through write_document the document fails, as a stage failure retried up to max_attempts
    with pytest.raises(DocumentRejected, match="mapper_parsing_exception") as err:
        backend.write_document(_doc(b, 2, word="Kaufvertrag"))
    assert err.value.source_object_id == b
    assert classify_error(err.value).treatment == Treatment.retry
    proxy.corrupt_ids = set()
    backend.write_document(_doc(b, 1, word="Kaufvertrag"))
    assert _index_rows(backend)[b] == [0]


def test_rejected_items_are_retried_with_backoff_and_the_retries_are_bounded(ctx, make_backend, proxy):
    oids = insert_objects(ctx, 3)
    backend = make_backend(max_retries=3)
    backend.ensure_embedder(IDENTITY)
    proxy.reject_items = 2  # two answers of 200 with every item 429, then the node's own
    report = backend.sync([_doc(oid, 2) for oid in oids])
    assert report.written == set(oids) and report.failed == {}
    assert [status for _, status in proxy.bulk_log] == [200, 200, 200] and report.requests == 3
    assert sum(len(v) for v in _index_rows(backend).values()) == 6

    bounded = make_backend(max_retries=2)
    proxy.bulk_log.clear()
    proxy.reject_items = 100
    with pytest.raises(InfrastructureError, match="HTTP 429 es_rejected_execution_exception") as err:
        bounded.write_document(_doc(oids[0], 2, word="Grundbuch"))
    assert proxy.bulk_requests() == 3  # the first try and max_retries=2 more, then it stops
    verdict = classify_error(err.value)
    assert verdict.treatment == Treatment.infrastructure and "429" in verdict.infrastructure

    proxy.bulk_log.clear()
    proxy.reject_items, proxy.reject_requests = 0, 100  # whole-request 429
    with pytest.raises(InfrastructureError, match="HTTP 429"):
        bounded.write_document(_doc(oids[0], 2, word="Grundbuch"))
    assert proxy.bulk_requests() == 3
    proxy.reject_requests = 0
    hits = backend.search_lexical("Grundbuch", SearchFilters(principals=None), 10)
    assert hits == []  # none of the refused writes reached the index


def test_a_read_only_index_is_an_infrastructure_fault_with_a_clear_message(ctx, make_backend, proxy, opensearch_node):
    backend = make_backend(max_retries=3)
    (oid,) = insert_objects(ctx, 1)
    backend.write_document(_doc(oid, 2, access=AccessProjection(("group:lit",))))
    direct = opensearchpy.OpenSearch(hosts=[opensearch_node.url])
    direct.indices.put_settings(index=backend.index, body={"index.blocks.read_only_allow_delete": True})
    try:
        proxy.bulk_log.clear()
        with pytest.raises(IndexReadOnly, match="read-only") as err:
            backend.write_document(_doc(oid, 3, word="Kaufvertrag", access=AccessProjection(("group:lit",))))
        assert proxy.bulk_requests() == 1  # classified at once: no blind retry of the block's 429 items
        verdict = classify_error(err.value)
        assert verdict.treatment == Treatment.infrastructure
        assert verdict.infrastructure == f"OpenSearch index {backend.index} read-only"
        assert "read_only_allow_delete" in str(err.value)
        with pytest.raises(IndexReadOnly):
            backend.update_access(oid, AccessProjection(("group:corp",)))
        # the record holds the narrowed grant: the lagging index over-permits nobody
        lit = SearchFilters(principals=principal_set(["group:lit"]))
        assert backend.search_lexical("Mietvertrag", lit, 10) == []
        corp = SearchFilters(principals=principal_set(["group:corp"]))
        assert backend.search_lexical("Mietvertrag", corp, 10) == []  # index still says group:lit only
    finally:
        direct.indices.put_settings(index=backend.index, body={"index.blocks.read_only_allow_delete": None})
    # block cleared: the access-only retry finds row 2 missing (its write was refused) and writes the
    # object whole from the record: the record's text, rows and permissions
    assert backend.update_access(oid, AccessProjection(("group:corp",))) is not None
    assert _index_rows(backend) == {oid: [0, 1, 2]}
    corp = SearchFilters(principals=principal_set(["group:corp"]))
    assert {h.source_object_id for h in backend.search_lexical("Kaufvertrag", corp, 10)} == {oid}
    assert backend.search_lexical("Kaufvertrag", lit, 10) == []
    vec = EMB.embed_query("Kaufvertrag")
    assert {h.source_object_id for h in backend.search_vector(vec, corp, 10)} == {oid}


def test_an_unreachable_node_is_an_outage(ctx):
    backend = OpenSearchBackend(ctx.db, "http://127.0.0.1:9", index="ki-unreachable",
                                client=opensearchpy.OpenSearch(hosts=["http://127.0.0.1:9"], max_retries=0, timeout=2))
    for call in (lambda: backend.ensure_embedder(IDENTITY),
                 lambda: backend.search_lexical("x", SearchFilters(principals=None), 5)):
        with pytest.raises(InfrastructureError, match="OpenSearch unreachable") as err:
            call()
        assert classify_error(err.value).treatment == Treatment.infrastructure
    assert np.isfinite(EMB.embed_query("x")).all()


def test_a_search_before_anything_is_indexed_finds_nothing(make_backend):
    backend = make_backend()
    operator = SearchFilters(principals=None)
    assert backend.index_identity() is None
    assert backend.search_halves("Mietvertrag", EMB.embed_query("Mietvertrag"), operator, 10) == ([], [])


def test_vector_scores_are_the_cosine_of_the_written_vectors(ctx, opensearch_node, monkeypatch):
    """Inner product of unit vectors on the node, read back as cosine similarity, for positive and negative
    similarities alike; the process's own client (orjson, float32 arrays) writes and queries."""
    monkeypatch.setenv("KI_OPENSEARCH_REFRESH_INTERVAL", "100ms")
    backend = OpenSearchBackend(ctx.db, opensearch_node.url, index=f"ki-scores-{uuid.uuid4().hex[:10]}")
    rng = np.random.default_rng(7)
    try:
        backend.ensure_embedder(IDENTITY)
        oids = insert_objects(ctx, 4)
        # not unit length on purpose: the projection normalises, cosine does not care
        vectors = {oid: rng.normal(size=(3, 32)).astype(np.float32) * 3.0 for oid in oids}
        for oid in oids:
            backend.write_document(IndexDocument(oid, f"h{oid}", f"doc {oid}", [
                ChunkRow(i, f"Zeile {i}", vectors[oid][i]) for i in range(3)], AccessProjection(("*",)), IDENTITY))
        query = rng.normal(size=32).astype(np.float32)
        got = backend.search_vector(query, SearchFilters(principals=None), 12)
        want = {(oid, i): float(v @ query / np.linalg.norm(v) / np.linalg.norm(query))
                for oid, vs in vectors.items() for i, v in enumerate(vs)}
        assert len(got) == 12
        assert min(want.values()) < -0.1 < 0.1 < max(want.values())  # both score branches exercised
        for hit in got:
            assert hit.score == pytest.approx(want[(hit.source_object_id, hit.ordinal)], abs=1e-4)
        assert [(h.source_object_id, h.ordinal) for h in got] == sorted(want, key=lambda k: -want[k])
    finally:
        backend.drop_index()


@pytest.mark.parametrize("item, expected", [
    ({"_id": "1-0", "status": 400, "error": {"type": "mapper_parsing_exception", "reason": "failed to parse",
                                             "caused_by": {"type": "illegal_argument_exception", "reason": "bad"}}},
     ("1-0", 400, "mapper_parsing_exception", "rejected")),
    ({"_id": "1-1", "status": 429, "error": {"type": "es_rejected_execution_exception", "reason": "queue full"}},
     ("1-1", 429, "es_rejected_execution_exception", "outage")),
    ({"_id": "1-2", "status": 429, "error": {"type": "cluster_block_exception", "reason": "read-only"}},
     ("1-2", 429, "cluster_block_exception", "read_only")),
    ({"_id": "1-3", "error": "no status, a bare string"}, ("1-3", 0, "error", "outage")),
    ({"_id": "1-4", "status": 503}, ("1-4", 503, "error", "outage")),
    ({"_id": "1-5", "status": 409, "error": {"type": "version_conflict_engine_exception"}},
     ("1-5", 409, "version_conflict_engine_exception", "rejected")),
])
def test_bulk_item_errors_of_every_recorded_shape_are_classified(item, expected):
    from ki.adapters.search.opensearch_bulk import item_failure

    f = item_failure(item)
    assert (f.id, f.status, f.type, f.kind) == expected
    if "caused_by" in json.dumps(item):
        assert "caused by illegal_argument_exception: bad" in f.reason


def _refresh_interval(backend: OpenSearchBackend) -> str:
    settings = backend.client.indices.get_settings(index=backend.both, name="index.refresh_interval")
    values = {idx: s["settings"]["index"]["refresh_interval"] for idx, s in settings.items()}
    assert set(values) == {backend.index, backend.large_index}
    (value,) = set(values.values())
    return value


def test_a_bulk_load_writes_with_refreshes_off_and_ends_with_one_refresh(ctx, make_backend):
    backend = make_backend()
    backend.ensure_embedder(IDENTITY)
    oids = insert_objects(ctx, 3)
    assert _refresh_interval(backend) == "100ms"
    with backend.bulk_load():
        assert _refresh_interval(backend) == "-1"
        report = backend.sync([_doc(oid, 3) for oid in oids], refresh=False)
        assert report.written == set(oids) and report.rows == 9
        assert backend.client.count(index=backend.both)["count"] == 0  # written, not yet refreshed
    assert _refresh_interval(backend) == "100ms"
    assert backend.client.count(index=backend.both)["count"] == 9  # the closing refresh, no explicit one


def test_a_rebuild_from_the_record_is_one_bulk_load(ctx, make_backend):
    backend = make_backend()
    oids = insert_objects(ctx, 4)
    for i, oid in enumerate(oids):
        backend.write_document(_doc(oid, i + 1))
    backend.drop_index()
    backend.ensure_embedder(IDENTITY)
    assert backend.client.count(index=backend.both)["count"] == 0
    assert backend.rebuild_from_record(batch=3) == 4
    assert _refresh_interval(backend) == "100ms"
    assert backend.client.count(index=backend.both)["count"] == 10
    assert _index_rows(backend) == {oid: list(range(i + 1)) for i, oid in enumerate(oids)}
