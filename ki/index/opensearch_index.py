"""The OpenSearch index ki writes: its settings and strict mapping, its name, the client, the permission filter.

Spec: insertion-pipeline.md "Index" (permission projection; the model name and dimension recorded on
the index); notes/opensearch.md §2.3 (index shape: ``dynamic: strict``, keyword permission fields,
``knn_vector`` with ``engine: lucene`` — never the faiss default, whose native library is absent —
text with English/German analyzers and a whitespace subfield for citations) and §2.2 (the permission
filter inside ``knn.filter``, never a post-filter).
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

import numpy as np
from sqlalchemy import Engine

from ki.index.backend import SearchFilters
from ki.index.embeddings import EmbedderIdentity

#: Text analysis: English stems on ``text``/``title``, German stems on ``.de``, exact tokens (citations,
#: docket numbers) on ``.exact``.
_TEXT = {"type": "text", "analyzer": "english", "fields": {"de": {"type": "text", "analyzer": "german"},
                                                           "exact": {"type": "text", "analyzer": "whitespace"}}}
#: The lexical half's fields and weights (the title counts double).
LEXICAL_FIELDS = ["text", "text.de", "text.exact", "title^2", "title.de^2"]
#: Candidates per half are over-fetched by this factor when matter / type / since filters are set.
FACT_FILTER_OVERFETCH = 4
#: Candidates per half beyond ``k`` (room for rows the record refuses).
OVERFETCH_MARGIN = 10


def vector_field(dimension: int) -> dict[str, Any]:
    """The ``knn_vector`` mapping: lucene HNSW, cosine (never faiss: its native library is not shipped)."""
    return {"type": "knn_vector", "dimension": int(dimension),
            "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}}


def index_body(identity: EmbedderIdentity | None) -> dict[str, Any]:
    """Settings and strict mapping of a new ki index (the vector field only with an embedder).

    ``KI_OPENSEARCH_REFRESH_INTERVAL`` (e.g. ``200ms``) sets ``index.refresh_interval`` (default 1 s: a
    ``refresh=wait_for`` write returns within it)."""
    props: dict[str, Any] = {
        "source_object_id": {"type": "long"},
        "ordinal": {"type": "integer"},
        "content_hash": {"type": "keyword"},
        "generation": {"type": "keyword"},
        "access_version": {"type": "integer"},
        "title": {"type": "text", "analyzer": "english", "fields": {"de": {"type": "text", "analyzer": "german"}}},
        "text": _TEXT,
        "allowed_principals": {"type": "keyword"},
        "denied_principals": {"type": "keyword"},
    }
    meta: dict[str, Any] = {"ki_schema": 1}
    if identity is not None:
        props["embedding"] = vector_field(identity.dimension)
        meta |= {"embedder": identity.embedder, "dimension": int(identity.dimension)}
    settings: dict[str, Any] = {"knn": True, "number_of_shards": 1, "number_of_replicas": 0}
    if os.environ.get("KI_OPENSEARCH_REFRESH_INTERVAL"):
        settings["refresh_interval"] = os.environ["KI_OPENSEARCH_REFRESH_INTERVAL"]
    return {"settings": {"index": settings},
            "mappings": {"dynamic": "strict", "_meta": meta, "properties": props}}


def index_name_for(engine: Engine) -> str:
    """``$KI_OPENSEARCH_INDEX``, else ``ki-chunks-<database name>`` (lower case, ``[a-z0-9_-]``)."""
    env = os.environ.get("KI_OPENSEARCH_INDEX")
    if env:
        return env
    name = re.sub(r"[^a-z0-9_-]+", "-", str(engine.url.database or "ki").lower()).strip("-_")
    return f"ki-chunks-{name or 'ki'}"


_CLIENTS: dict[str, Any] = {}
#: (url, index) → the identity the index records (key present: the index exists). Shared with the backend.
KNOWN_IDENTITIES: dict[tuple[str, str], EmbedderIdentity | None] = {}
LOCK = threading.Lock()


def client_for(url: str) -> Any:
    """The process's opensearch-py client for ``url`` (pooled; the transport retries 502/503/504 and
    timeouts twice, 30 s per request)."""
    from opensearchpy import OpenSearch

    with LOCK:
        client = _CLIENTS.get(url)
        if client is None:
            client = _CLIENTS[url] = OpenSearch(hosts=[url], timeout=30, max_retries=2, retry_on_timeout=True,
                                                retry_on_status=(502, 503, 504), pool_maxsize=16)
        return client


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
