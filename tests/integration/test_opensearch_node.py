"""Smoke tests of the real OpenSearch 2.19.1 test node (tests/helpers/opensearch_node.py) with opensearch-py.

One node per test session (session fixture ``opensearch_node`` in tests/conftest.py); the node is built by
``.ci/install_opensearch.sh``. What is checked (docs/opensearch-node.md, shared notes §1.4):
version, plugins, a strict ki-shaped mapping with a lucene ``knn_vector``, bulk of 1,000 chunks with
every item result read, ``_refresh`` + ``_flush`` (segment write: where a faiss field would fail), a
``knn`` query with the ACL filter inside ``knn.filter`` returning k permitted hits, BM25 ``match`` on
the english/german/whitespace text fields, ``_delete_by_query``.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from collections.abc import Iterator

import pytest

from tests.helpers.opensearch_node import OPENSEARCH_VERSION, OpenSearchNode

pytestmark = pytest.mark.opensearch

opensearchpy = pytest.importorskip("opensearchpy", reason="opensearch-py not installed (pip install opensearch-py)")
from opensearchpy import OpenSearch, helpers  # noqa: E402

DIM = 8
N_DOCS = 100
CHUNKS_PER_DOC = 10  # 1,000 chunks
INDEX = "ki-smoke-chunks"
CHUNK_NS = uuid.UUID("5b0f1f8e-3c1e-4f43-9a53-2f5f0b7c1a10")

# A user who may read group g3's documents, minus those that deny them explicitly.
USER_PRINCIPALS = ["user:alice", "group:g3"]

WORDS_EN = ["contract", "motions", "dismissed", "court", "liability", "settlement", "witness", "appeal"]
WORDS_DE = ["Verträge", "Gerichts", "Klage", "Haftung", "Vergleich", "Zeugen", "Berufung", "Urteile"]


def _mapping(dim: int = DIM) -> dict:
    return {
        "settings": {"index": {"knn": True, "number_of_shards": 1, "number_of_replicas": 0}},
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "doc_id": {"type": "keyword"},
                "doc_version": {"type": "keyword"},
                "acl_hash": {"type": "keyword"},
                "embedder": {"type": "keyword"},
                "chunk_index": {"type": "integer"},
                "text": {
                    "type": "text",
                    "analyzer": "english",
                    "fields": {
                        "de": {"type": "text", "analyzer": "german"},
                        "exact": {"type": "text", "analyzer": "whitespace"},
                    },
                },
                "allowed_principals": {"type": "keyword"},
                "denied_principals": {"type": "keyword"},
                "meta": {"type": "object", "enabled": False},
                "embedding": {
                    "type": "knn_vector",
                    "dimension": dim,
                    "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
                },
            },
        },
    }


def _unit(rng: random.Random) -> list[float]:
    v = [rng.gauss(0.0, 1.0) for _ in range(DIM)]
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def _chunk_id(doc_id: str, chunk_index: int) -> str:
    return str(uuid.uuid5(CHUNK_NS, f"{doc_id}:{chunk_index}"))


def _make_chunks() -> list[dict]:
    rng = random.Random(20251129)
    chunks = []
    for d in range(N_DOCS):
        doc_id = f"doc-{d:04d}"
        allowed = [f"group:g{d % 10}", f"user:owner{d % 7}"]
        denied = ["user:alice"] if d % 30 == 3 else []  # deny overrides allow (doc-0003, doc-0033, ...)
        for c in range(CHUNKS_PER_DOC):
            words = [rng.choice(WORDS_EN) for _ in range(6)] + [rng.choice(WORDS_DE) for _ in range(3)]
            if c == 0:
                words.append(f"Rule 12(b)(6) docket {d}-cv-{c}")
            chunks.append(
                {
                    "_id": _chunk_id(doc_id, c),
                    "doc_id": doc_id,
                    "doc_version": "v1",
                    "acl_hash": f"acl-{d % 10}",
                    "embedder": "test-hash-8",
                    "chunk_index": c,
                    "text": " ".join(words),
                    "allowed_principals": allowed,
                    "denied_principals": denied,
                    "meta": {"path": f"/estate/{doc_id}.pdf", f"k{d}": "v"},
                    "embedding": _unit(rng),
                }
            )
    return chunks


def _permitted(chunk: dict, principals: list[str]) -> bool:
    return bool(set(chunk["allowed_principals"]) & set(principals)) and not (
        set(chunk["denied_principals"]) & set(principals)
    )


def _acl_filter(principals: list[str]) -> dict:
    return {
        "bool": {
            "filter": [{"terms": {"allowed_principals": principals}}],
            "must_not": [{"terms": {"denied_principals": principals}}],
        }
    }


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def os_client(opensearch_node: OpenSearchNode) -> Iterator[OpenSearch]:
    client = OpenSearch(hosts=[opensearch_node.url], timeout=60)
    yield client
    client.close()


@pytest.fixture(scope="module")
def chunks() -> list[dict]:
    return _make_chunks()


@pytest.fixture(scope="module")
def loaded_index(os_client: OpenSearch, chunks: list[dict]) -> str:
    """The smoke index with 1,000 chunks bulk-loaded, refreshed and flushed."""
    if os_client.indices.exists(index=INDEX):
        os_client.indices.delete(index=INDEX)
    os_client.indices.create(index=INDEX, body=_mapping())
    actions = ({"_index": INDEX, **c} for c in chunks)
    ok, errors = helpers.bulk(os_client, actions, chunk_size=250, raise_on_error=False, max_retries=0)
    assert errors == [], errors[:3]
    assert ok == len(chunks) == N_DOCS * CHUNKS_PER_DOC
    os_client.indices.refresh(index=INDEX)
    flush = os_client.indices.flush(index=INDEX)
    assert flush["_shards"]["failed"] == 0, flush
    return INDEX


# --------------------------------------------------------------------------- tests


def test_node_reports_version_and_plugins(opensearch_node: OpenSearchNode, os_client: OpenSearch) -> None:
    info = os_client.info()
    assert info["version"]["number"] == OPENSEARCH_VERSION
    assert os_client.cluster.health()["status"] == "green"
    components = {p["component"] for p in os_client.cat.plugins(format="json")}
    assert {
        "org.opensearch.transport.Netty4Plugin",
        "org.opensearch.analysis.common.CommonAnalysisPlugin",
        "org.opensearch.index.reindex.ReindexPlugin",
        "org.opensearch.painless.PainlessPlugin",
        "org.opensearch.knn.plugin.KNNPlugin",
    } <= components
    assert opensearch_node.url.startswith("http://127.0.0.1:")


def test_mapping_has_lucene_knn_vector(os_client: OpenSearch, loaded_index: str) -> None:
    props = os_client.indices.get_mapping(index=loaded_index)[loaded_index]["mappings"]["properties"]
    emb = props["embedding"]
    assert emb["type"] == "knn_vector"
    assert emb["dimension"] == DIM
    assert emb["method"]["engine"] == "lucene"
    assert emb["method"]["space_type"] == "cosinesimil"
    settings = os_client.indices.get_settings(index=loaded_index)[loaded_index]["settings"]["index"]
    assert settings["knn"] == "true"


def test_bulk_refresh_flush_counts(os_client: OpenSearch, loaded_index: str) -> None:
    assert os_client.count(index=loaded_index)["count"] == N_DOCS * CHUNKS_PER_DOC
    segments = os_client.indices.stats(index=loaded_index, metric="segments")
    assert segments["indices"][loaded_index]["primaries"]["segments"]["count"] >= 1
    # the flush committed the translog: nothing left uncommitted
    translog = os_client.indices.stats(index=loaded_index, metric="translog")
    assert translog["indices"][loaded_index]["primaries"]["translog"]["uncommitted_operations"] == 0


def test_strict_mapping_rejects_unknown_field_per_item(os_client: OpenSearch, loaded_index: str) -> None:
    actions = [
        {
            "_index": loaded_index,
            "_id": "strict-ok",
            "doc_id": "strict",
            "chunk_index": 0,
            "text": "fine",
            "allowed_principals": ["group:none"],
            "embedding": [1.0] + [0.0] * (DIM - 1),
        },
        {"_index": loaded_index, "_id": "strict-bad", "doc_id": "strict", "chunk_index": 1, "surprise": 1},
        {"_index": loaded_index, "_id": "strict-dim", "doc_id": "strict", "chunk_index": 2, "embedding": [1.0, 0.0]},
    ]
    ok, errors = helpers.bulk(os_client, actions, raise_on_error=False, refresh="wait_for")
    assert ok == 1
    by_id = {e["index"]["_id"]: e["index"] for e in errors}
    assert set(by_id) == {"strict-bad", "strict-dim"}
    assert by_id["strict-bad"]["status"] == 400
    assert by_id["strict-bad"]["error"]["type"] == "strict_dynamic_mapping_exception"
    assert by_id["strict-dim"]["status"] == 400
    assert by_id["strict-dim"]["error"]["type"] == "mapper_parsing_exception"
    # k-NN puts "Vector dimension mismatch. Expected: 8, Given: 2" into caused_by
    assert "dimension mismatch" in json.dumps(by_id["strict-dim"]["error"]).lower(), by_id["strict-dim"]
    os_client.delete_by_query(index=loaded_index, body={"query": {"term": {"doc_id": "strict"}}}, refresh=True)


def test_knn_with_acl_filter_returns_k_permitted_hits(
    os_client: OpenSearch, loaded_index: str, chunks: list[dict]
) -> None:
    rng = random.Random(7)
    query = _unit(rng)
    k = 10
    permitted = [c for c in chunks if _permitted(c, USER_PRINCIPALS)]
    assert 60 <= len(permitted) < 100  # restrictive: 10 % of the index minus denied documents
    body = {
        "size": k,
        "_source": ["doc_id", "allowed_principals", "denied_principals"],
        "query": {"knn": {"embedding": {"vector": query, "k": k, "filter": _acl_filter(USER_PRINCIPALS)}}},
    }
    hits = os_client.search(index=loaded_index, body=body)["hits"]["hits"]
    assert len(hits) == k
    by_id = {c["_id"]: c for c in chunks}
    for h in hits:
        assert _permitted(by_id[h["_id"]], USER_PRINCIPALS), h
        assert "user:alice" not in h["_source"]["denied_principals"]
    # exact cosine top-k over the permitted chunks: the filtered search finds (nearly) all of them
    expected = sorted(permitted, key=lambda c: -sum(a * b for a, b in zip(c["embedding"], query, strict=True)))[:k]
    overlap = {h["_id"] for h in hits} & {c["_id"] for c in expected}
    assert len(overlap) >= k - 1, (len(overlap), [h["_id"] for h in hits])
    # cosinesimil score is (1 + cos) / 2: descending, within (0, 1]
    scores = [h["_score"] for h in hits]
    assert scores == sorted(scores, reverse=True) and 0 < scores[-1] <= scores[0] <= 1.0


def test_knn_with_empty_allow_list_returns_nothing(os_client: OpenSearch, loaded_index: str) -> None:
    body = {
        "size": 5,
        "query": {
            "knn": {"embedding": {"vector": [1.0] + [0.0] * (DIM - 1), "k": 5, "filter": _acl_filter(["user:nobody"])}}
        },
    }
    assert os_client.search(index=loaded_index, body=body)["hits"]["hits"] == []


def test_bm25_match_english_german_and_exact(os_client: OpenSearch, loaded_index: str) -> None:
    def search(query: dict) -> dict:
        body = {"size": 5, "query": {"bool": {"must": [query], "filter": [_acl_filter(USER_PRINCIPALS)]}}}
        return os_client.search(index=loaded_index, body=body)["hits"]

    # english stemming: "motion" matches "motions"; BM25 scores are positive and ordered
    hits = search({"match": {"text": "motion"}})
    assert hits["total"]["value"] > 0
    assert all("motions" in h["_source"]["text"] for h in hits["hits"])
    scores = [h["_score"] for h in hits["hits"]]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0
    # german stemming on text.de: "Vertrag" matches "Verträge"
    hits = search({"match": {"text.de": "Vertrag"}})
    assert hits["total"]["value"] > 0
    assert all("Verträge" in h["_source"]["text"] for h in hits["hits"])
    # citations survive on the whitespace subfield
    hits = search({"match_phrase": {"text.exact": "Rule 12(b)(6) docket 13-cv-0"}})
    assert [h["_source"]["doc_id"] for h in hits["hits"]][:1] == ["doc-0013"]


def test_delete_by_query_removes_stale_and_whole_documents(os_client: OpenSearch, loaded_index: str) -> None:
    total = os_client.count(index=loaded_index)["count"]
    # a new version of doc-0042 with 3 chunks, then the stale v1 chunks go (never a window with none)
    doc = "doc-0042"
    new = [
        {
            "_index": loaded_index,
            "_id": _chunk_id(doc, c),
            "doc_id": doc,
            "doc_version": "v2",
            "chunk_index": c,
            "text": "amended complaint",
            "allowed_principals": ["group:g2"],
            "embedding": [0.0] * (DIM - 1) + [1.0],
        }
        for c in range(3)
    ]
    ok, errors = helpers.bulk(os_client, new, raise_on_error=False, refresh="wait_for")
    assert (ok, errors) == (3, [])
    stale = {"bool": {"filter": [{"term": {"doc_id": doc}}], "must_not": [{"term": {"doc_version": "v2"}}]}}
    res = os_client.delete_by_query(index=loaded_index, body={"query": stale}, refresh=True, conflicts="proceed")
    assert res["deleted"] == CHUNKS_PER_DOC - 3 and res["failures"] == []
    assert os_client.count(index=loaded_index, body={"query": {"term": {"doc_id": doc}}})["count"] == 3
    # whole-document delete
    res = os_client.delete_by_query(index=loaded_index, body={"query": {"term": {"doc_id": "doc-0007"}}}, refresh=True)
    assert res["deleted"] == CHUNKS_PER_DOC
    assert os_client.count(index=loaded_index)["count"] == total - (CHUNKS_PER_DOC - 3) - CHUNKS_PER_DOC


def test_knn_method_needs_index_knn_true(os_client: OpenSearch) -> None:
    body = _mapping()
    body["settings"]["index"]["knn"] = False
    with pytest.raises(opensearchpy.exceptions.RequestError) as err:
        os_client.indices.create(index="ki-smoke-no-knn", body=body)
    assert "index.knn" in str(err.value.info)


def test_node_files_under_workdir(opensearch_node: OpenSearchNode) -> None:
    # data under workdir/home, the launcher's log beside it, node.portsfile's file under home/logs
    assert (opensearch_node.home / "data").is_dir()
    assert opensearch_node.log_path.is_file()
    assert (opensearch_node.home / "logs" / "http.ports").is_file()


def test_node_start_time_and_memory(opensearch_node: OpenSearchNode, loaded_index: str, record_property) -> None:
    """Last on purpose: RSS after 1,000 chunks, queries and deletes."""
    start_mib = opensearch_node.start_rss_bytes / 2**20
    rss_mib = opensearch_node.rss_bytes() / 2**20
    record_property("opensearch_start_seconds", round(opensearch_node.start_seconds, 1))
    record_property("opensearch_rss_start_mib", round(start_mib))
    record_property("opensearch_rss_mib", round(rss_mib))
    print(
        f"opensearch node: start {opensearch_node.start_seconds:.1f}s, RSS {start_mib:.0f} MiB after start, "
        f"{rss_mib:.0f} MiB after the smoke tests"
    )
    assert 0 < opensearch_node.start_seconds < 90
    assert 100 < rss_mib < 2048  # -Xmx1g plus metaspace, code cache, direct buffers
