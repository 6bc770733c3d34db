"""The OpenSearch index ki writes: its settings and strict mapping, its name, the client, the queries.

Spec: insertion-pipeline.md "Index" (permission projection; the model name and dimension recorded on
the index); notes/opensearch.md §2.3 (index shape: ``dynamic: strict``, keyword permission fields,
``knn_vector`` with ``engine: lucene`` — never the faiss default, whose native library is absent) and §2.2
(the permission filter inside ``knn.filter``, never a post-filter).

**One analysis for both backends.** The text fields hold the token streams of :mod:`ki.adapters.search.analysis`
(the same words, stems and compound parts the embedded index holds; ``whitespace`` analyzer, one position per
word), and the lexical half runs the same query tree (:mod:`ki.adapters.search.query_plan`, rendered by :func:`to_dsl`):
a word means the same on both backends, and both rank by BM25 (Lucene's and tantivy's, k1 1.2, b 0.75).
German and Dutch compounds are split by ki's splitter with the lexicons shipped in the repository
(:mod:`ki.adapters.search.compounds`), not by OpenSearch's ``dictionary_decompounder``: that filter emits every
dictionary word found inside a token at the token's own position (so a query cannot ask for the parts in
order: ``Mietvertrag`` would match any text holding ``Miete`` and ``Vertrag``), and it would need the word list
(≈ 230,000 words) in every index's settings.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import numpy as np
from sqlalchemy import Engine
from sqlalchemy.engine import Connection

from ki.adapters.search.backend import CLAUSE_KIND, ChunkRow, IndexDocument, SearchFilters
from ki.adapters.search.embedder import EmbedderIdentity
from ki.adapters.search.embeddings import normalise_rows
from ki.adapters.search.lexical import CLAUSE_TAG, DOC_FIELDS, LexHit, LexRow, row_source
from ki.adapters.search.query_plan import AllOf, AnyOf, AtLeast, BestOf, Filtered, InSet, Node, Phrase, Term, WithBonus
from ki.config.process import OpenSearchSettings, current
from ki.core import shared_clients
from ki.domain.access.projection import AccessProjection
from ki.store.chunks import live_chunk_rows

#: ``_meta.ki_schema`` of the mapping below; an index of another schema is rebuilt from the record.
KI_SCHEMA = 5
#: The large-documents index of ``<index>`` is ``<index>`` + this (:mod:`ki.adapters.search.opensearch`); a generated
#: index
#: name (:func:`index_name_for`) never holds a dot, so no database's index is another's large one.
LARGE_SUFFIX = ".large"
#: Candidates per half are over-fetched by this factor when matter / type / since filters are set.
FACT_FILTER_OVERFETCH = 4
#: Candidates per half beyond ``k`` (room for rows the record refuses).
OVERFETCH_MARGIN = 10
#: Query-tree field names (:mod:`ki.adapters.search.lexical`) → OpenSearch fields.
FIELD_MAP = {"oid": "source_object_id", "chash": "content_hash", "allow": "allowed_principals",
             "deny": "denied_principals"}
_WS = {"type": "text", "analyzer": "whitespace"}
_WS_FREQS = {"type": "text", "analyzer": "whitespace", "index_options": "freqs"}


#: The k-NN space of ki's vector field. ki's vectors are unit length (every embedder's output goes through
#: ``ki.adapters.search.embeddings.normalise_rows``; :func:`unit` again on the way out), so the inner product *is*
#: the cosine — and lucene's inner product costs one multiply-add per dimension where its cosine costs
#: three (scalar on Java 17; 51 % of the node's CPU during a bulk load went to ``cosine``): bulk indexing
#: 1,364 → 1,575–1,968 chunks/s on the 60,000-chunk probe, same ranking.
SPACE_TYPE = "innerproduct"


def vector_field(dimension: int) -> dict[str, Any]:
    """The ``knn_vector`` mapping: lucene HNSW, :data:`SPACE_TYPE` (never faiss: its native library is not shipped)."""
    return {"type": "knn_vector", "dimension": int(dimension),
            "method": {"name": "hnsw", "engine": "lucene", "space_type": SPACE_TYPE}}


def similarity_from_score(score: float, space_type: str) -> float:
    """The cosine similarity a lucene k-NN ``_score`` stands for.

    ``innerproduct`` (maximum inner product): ``1 + dot`` for ``dot ≥ 0``, ``1 / (1 - dot)`` below;
    ``cosinesimil`` (indexes made before :data:`SPACE_TYPE` changed): ``(1 + cos) / 2``.
    """
    if space_type == "cosinesimil":
        return 2.0 * score - 1.0
    return score - 1.0 if score >= 1.0 else 1.0 - 1.0 / score


def unit(vector: Any, source: str) -> np.ndarray:
    """A ``(d,)`` vector as float32 of unit length (a zero vector stays zero): what :data:`SPACE_TYPE` needs.
    ``source``: the embedder that made it, for the error message.

    Raises: ModelOutputInvalid for NaN or infinite values (:func:`~ki.adapters.search.embeddings.normalise_rows`).
    """
    return normalise_rows(np.asarray(vector)[None, :], expected_dim=None, source=source)[0]


#: ``index.refresh_interval`` of a new ki index (OpenSearch's default is 1 s).
REFRESH_INTERVAL = "250ms"


#: ``index.search.concurrent_segment_search.mode`` of a new ki index: one query searches its segments in
#: slices on the ``index_searcher`` pool, so an otherwise idle core shortens it (lucene's k-NN searches each
#: segment's graph separately: 20 segments, 20 graph searches). Measured on 2 cores, 60,000 rows in 55
#: segments: a filtered k-NN query p50/p95 5.6/9.1 ms sequential, 3.1–3.6/5.7–6.9 ms in slices. It spends
#: the same CPU in more threads; on a cluster whose CPUs are saturated set it to ``auto`` (a dynamic setting).
CONCURRENT_SEGMENT_SEARCH = "all"


def refresh_interval() -> str:
    """``index.refresh_interval`` of ki's indexes: ``KI_OPENSEARCH_REFRESH_INTERVAL``, else :data:`REFRESH_INTERVAL`."""
    return current(OpenSearchSettings).refresh_interval or REFRESH_INTERVAL


def index_body(identity: EmbedderIdentity | None, large_passages: int | None = None) -> dict[str, Any]:
    """Settings and strict mapping of a new ki index (the vector field only with an embedder); ``_meta`` records
    :data:`KI_SCHEMA`, ``large_passages`` (the threshold the index pair was built with) and the embedder.

    ``KI_OPENSEARCH_REFRESH_INTERVAL`` sets ``index.refresh_interval`` (default :data:`REFRESH_INTERVAL`).
    Every index-stage write waits for the next refresh (``refresh=wait_for``: a finished stage is
    searchable), so the interval bounds the stage's latency: ``ki insert`` of the dev estate took
    42 s with OpenSearch's 1 s default and 18 s with 250 ms (9.6 s embedded)."""
    props: dict[str, Any] = {
        "source_object_id": {"type": "long"},
        "ordinal": {"type": "integer"},
        "content_hash": {"type": "keyword"},
        "generation": {"type": "keyword"},
        "access_version": {"type": "integer"},
        "kind": {"type": "keyword"},
        "allowed_principals": {"type": "keyword"},
        "denied_principals": {"type": "keyword"},
        "matter": {"type": "keyword"},
        "dtype": {"type": "keyword"},
        "ddate": {"type": "integer"},
        "mtime": {"type": "long"},
        **{f: _WS for f in ("t_exact", "t_de", "t_en", "t_parts")},
        **{f"f_{f}": _WS for f in DOC_FIELDS},
        **{f"f_{f}_x": _WS_FREQS for f in DOC_FIELDS},
    }
    meta: dict[str, Any] = {"ki_schema": KI_SCHEMA, "large_passages": large_passages}
    if identity is not None:
        props["embedding"] = vector_field(identity.dimension)
        meta |= {"embedder": identity.embedder, "dimension": int(identity.dimension)}
    settings: dict[str, Any] = {"knn": True, "number_of_shards": 1, "number_of_replicas": 0,
                                "search.concurrent_segment_search.mode": CONCURRENT_SEGMENT_SEARCH}
    settings["refresh_interval"] = refresh_interval()
    return {"settings": {"index": settings},
            "mappings": {"dynamic": "strict", "_meta": meta, "properties": props}}


def index_name_for(engine: Engine) -> str:
    """``$KI_OPENSEARCH_INDEX``, else ``ki-chunks-<database name>`` (lower case, ``[a-z0-9_-]``)."""
    configured = current(OpenSearchSettings).index
    if configured:
        return configured
    name = re.sub(r"[^a-z0-9_-]+", "-", str(engine.url.database or "ki").lower()).strip("-_")
    return f"ki-chunks-{name or 'ki'}"


#: (url, index) → the identity the index records (key present: the index exists). Shared with the backend.
KNOWN_IDENTITIES: dict[tuple[str, str], EmbedderIdentity | None] = {}
#: (url, index) → its vector field's space type as last read (how to read its k-NN scores).
SPACES: dict[tuple[str, str], str] = {}
LOCK = threading.Lock()


@shared_clients.on_reset
def forget_index_state() -> None:
    """Forget what the indices were last seen to record (``ki.app.wiring.reset``)."""
    with LOCK:
        KNOWN_IDENTITIES.clear()
        SPACES.clear()


def _serializer() -> Any:
    """opensearch-py's JSON serializer with orjson doing the work (numpy arrays natively, float32 as
    their shortest repr): a third of the client CPU of a bulk load of 384-d vectors with ``json``."""
    import orjson
    from opensearchpy.serializer import JSONSerializer

    class OrjsonSerializer(JSONSerializer):
        def dumps(self, data: Any) -> Any:
            if isinstance(data, (str, bytes)):
                return data
            try:
                return orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY).decode()
            except TypeError:  # what orjson does not know (e.g. Decimal): opensearch-py's own rules
                return super().dumps(data)

        def loads(self, s: Any) -> Any:
            return orjson.loads(s)

    return OrjsonSerializer()


def client_for(url: str, *, allow_link_local: bool = False) -> Any:
    """The process's opensearch-py client for ``url`` (pooled; the transport retries 502/503/504 and
    timeouts twice, 30 s per request; orjson serializer; no request while OpenSearch is paused:
    :class:`~ki.adapters.search.opensearch_transport.PausedAwareTransport`; no connection to a link-local or
    cloud-metadata address unless ``allow_link_local``:
    :class:`~ki.adapters.search.opensearch_transport.GuardedConnection`)."""
    from opensearchpy import OpenSearch, Urllib3HttpConnection

    from ki.adapters.search.opensearch_transport import GuardedConnection, PausedAwareTransport

    connection = Urllib3HttpConnection if allow_link_local else GuardedConnection
    return shared_clients.shared("opensearch", (url, allow_link_local), lambda: OpenSearch(
        hosts=[url], timeout=30, max_retries=2, retry_on_timeout=True, retry_on_status=(502, 503, 504),
        pool_maxsize=16, serializer=_serializer(), transport_class=PausedAwareTransport,
        connection_class=connection))


def as_array(value: Any) -> np.ndarray:
    """A pgvector value (``Vector`` or array) as float32 numpy."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)


def acl_filter(filters: SearchFilters) -> dict[str, Any] | None:
    """The permission filter of both halves (None for the local operator): some ``allowed_principals``
    in the caller's principals and none of ``denied_principals`` (deny beats allow; an empty allow-list
    admits nobody)."""
    if filters.principals is None:
        return None
    p = list(filters.principals)
    return {"bool": {"filter": [{"terms": {"allowed_principals": p}}],
                     "must_not": [{"terms": {"denied_principals": p}}]}}


def part_filter(filters: SearchFilters) -> list[dict[str, Any]]:
    """The vector half's part filters: ``kind`` in the searched parts, and a clause type among ``clause_types``
    (:data:`ki.adapters.search.lexical.CLAUSE_TAG`); [] when the search takes every part."""
    out: list[dict[str, Any]] = []
    if filters.kinds is not None:
        out.append({"terms": {"kind": list(filters.kinds)}})
    if filters.clause_types is not None:
        out.append({"terms": {"kind": [CLAUSE_TAG + t for t in filters.clause_types]}})
    if filters.not_kinds:
        out.append({"bool": {"must_not": [{"terms": {"kind": list(filters.not_kinds)}}]}})
    return out


#: What a search reads of each hit, from doc values only: no stored field at all (not even ``_id``), so no
#: stored-field block is decompressed — the ``_source`` (mostly the row's vector) and its JSON parse cost
#: more than the hit's own score.
HIT_FIELDS = ["source_object_id", "ordinal", "content_hash"]
_HIT_READ = {"stored_fields": "_none_", "docvalue_fields": HIT_FIELDS}


def hit_row(hit: dict[str, Any]) -> dict[str, Any]:
    """``{source_object_id: int, ordinal: int, content_hash: str}`` of a search hit read with
    :data:`HIT_FIELDS` as doc values. Raises: KeyError when the hit lacks one of them."""
    fields = hit.get("fields") or {}
    return {"source_object_id": int(fields["source_object_id"][0]), "ordinal": int(fields["ordinal"][0]),
            "content_hash": str(fields["content_hash"][0])}


def to_dsl(node: Node) -> dict[str, Any]:
    """Render a :mod:`ki.adapters.search.query_plan` tree as OpenSearch query DSL (filters in ``bool.filter``)."""

    def f(name: str) -> str:
        return FIELD_MAP.get(name, name)

    def boosted(q: dict[str, Any], b: float) -> dict[str, Any]:
        if b != 1.0:
            inner = next(iter(q.values()))
            inner["boost"] = b
        return q

    if isinstance(node, Term):
        return {"term": {f(node.field): {"value": node.value, "boost": node.boost}}}
    if isinstance(node, Phrase):
        return {"match_phrase": {f(node.field): {"query": " ".join(node.words), "boost": node.boost}}}
    if isinstance(node, AnyOf):
        return boosted({"bool": {"should": [to_dsl(c) for c in node.children], "minimum_should_match": 1}},
                       node.boost)
    if isinstance(node, AllOf):
        return boosted({"bool": {"must": [to_dsl(c) for c in node.children]}}, node.boost)
    if isinstance(node, BestOf):
        return boosted({"dis_max": {"queries": [to_dsl(c) for c in node.children],
                                    "tie_breaker": node.tie_breaker}}, node.boost)
    if isinstance(node, WithBonus):
        return {"bool": {"must": [to_dsl(node.query)], "should": [to_dsl(node.bonus)]}}
    if isinstance(node, InSet):
        return {"terms": {f(node.field): list(node.values)}}
    if isinstance(node, AtLeast):
        return {"range": {f(node.field): {"gte": node.value}}}
    if isinstance(node, Filtered):
        return {"bool": {"must": [to_dsl(node.query)], "filter": [to_dsl(m) for m in node.must],
                         "must_not": [to_dsl(m) for m in node.must_not]}}
    raise TypeError(f"not a query node: {node!r}")


#: Rows a lexical round asks OpenSearch for, per row the round wants (rows are cheap: three doc values each).
LEXICAL_ROWS_FACTOR = 3


def lexical_body(node: Node, size: int) -> dict[str, Any]:
    """One round of the lexical half: the tree's best ``size`` × :data:`LEXICAL_ROWS_FACTOR` rows, best first
    (the caller keeps each content's first row: :func:`ki.adapters.search.lexical_search.rank_contents`, whose next
    round
    excludes the contents taken, so a document with many matching passages still takes one place).

    No ``collapse`` and ``track_total_hits: false``: both let Lucene skip blocks of rows that cannot reach the
    top (block-max WAND / MaxScore on impacts); a collapsing collector scores every matching row and the
    default hit count scores the first 10,000. Measured at 1,000,000 chunks (bench/search_exact.py
    --os-variants, 2 shared cores, warm): p95 52.6 ms vs 47.1 ms for the ``collapse`` rounds — within run-to-run
    noise, the same top 10s; kept because it cannot be slower in principle, not because it measured faster."""
    return {"size": size * LEXICAL_ROWS_FACTOR, **_HIT_READ, "track_total_hits": False, "query": to_dsl(node)}


def lex_hits(hits: list[dict[str, Any]], tier: int) -> list[LexHit]:
    """Search hits (read with :data:`HIT_FIELDS`) as :class:`ki.adapters.search.lexical.LexHit`."""
    out = []
    for h in hits:
        r = hit_row(h)
        out.append(LexHit(r["source_object_id"], r["ordinal"], r["content_hash"], float(h["_score"]), tier))
    return out


def vector_body(vector: np.ndarray, filters: SearchFilters, size: int) -> dict[str, Any]:
    """The vector half: lucene ``knn`` on ``embedding`` (``size`` nearest), permission filter inside
    ``knn.filter`` (filtered HNSW / exact pre-filter: ``size`` permitted rows come back)."""
    knn: dict[str, Any] = {"vector": unit(vector, "of the query"), "k": size}
    acl = acl_filter(filters)
    parts = part_filter(filters)
    if acl and parts:
        knn["filter"] = {"bool": {"filter": [acl, *parts]}}
    elif acl or parts:
        knn["filter"] = acl or {"bool": {"filter": parts}}
    return {"size": size, **_HIT_READ, "query": {"knn": {"embedding": knn}}}


def row_actions(index: str, doc: IndexDocument, *, generation: str, access_version: int,
                facts: tuple[tuple[str, ...], tuple[str, ...], Any, Any] | None = None) -> list[dict[str, Any]]:
    """The bulk ``index`` actions of a document's rows (ids ``<object>-<ordinal>``; every row carries the
    sync's ``generation``, the permission projection, the analysed streams of
    :func:`ki.adapters.search.lexical.row_source`
    and the object's ``facts`` (:func:`ki.store.index_record.object_facts`; None: unknown, no fact filter matches).

    Raises: ValueError when a row lacks a vector of the document embedder's dimension.
    """
    matters, doc_types, doc_date, mtime_ns = facts or ((), (), None, None)
    out = []
    for r in doc.rows:
        row = LexRow(doc.source_object_id, r.ordinal, doc.content_hash, r.kind, r.text,
                     dict((r.meta or {}).get("fields") or {}), tuple(doc.access.allowed), tuple(doc.access.denied),
                     matters, doc_types, doc_date, mtime_ns,
                     (r.meta or {}).get("clause_type") if r.kind == CLAUSE_KIND else None)
        src = {FIELD_MAP.get(k, k): v for k, v in row_source(row).items()}
        src |= {"generation": generation, "access_version": access_version}
        if doc.embedder is not None:
            if r.embedding is None or r.embedding.shape != (doc.embedder.dimension,):
                raise ValueError(f"row {r.ordinal} of object {doc.source_object_id} has no "
                                 f"{doc.embedder.dimension}-d vector")
            # a float32 array: the client's orjson writes each value's shortest repr
            src["embedding"] = unit(r.embedding, doc.embedder.embedder)
        out.append({"_op_type": "index", "_index": index, "_id": f"{doc.source_object_id}-{r.ordinal}", "_source": src})
    return out


def documents_from_record(conn: Connection, source_object_ids: list[int], identity: EmbedderIdentity | None
                          ) -> tuple[list[IndexDocument], dict[int, int]]:
    """The objects as the record (``chunk``) holds them: IndexDocuments and each one's access_version.
    Objects without rows are absent; vectors only when every row has one and the record has an embedder."""
    from ki.adapters.search.pgvector import register_vector

    register_vector(conn)
    rows = live_chunk_rows(conn, list(source_object_ids))
    by_object: dict[int, list[Any]] = {}
    for r in rows:
        by_object.setdefault(r.source_object_id, []).append(r)
    docs, versions = [], {}
    for oid, rs in by_object.items():
        first = rs[0]
        vectors = identity is not None and all(r.embedding is not None for r in rs)
        docs.append(IndexDocument(
            oid, first.content_hash, first.title,
            [ChunkRow(r.ordinal, r.text, as_array(r.embedding) if vectors else None, r.kind, r.meta) for r in rs],
            AccessProjection(tuple(first.allowed_principals), tuple(first.denied_principals)),
            identity if vectors else None))
        versions[oid] = max(r.access_version for r in rs)
    return docs, versions
