"""The search API: a query and a principal → hits with document, version, matter, type, snippet, score.

Spec: insertion-pipeline.md "Index" (permission projection; deleted documents disappear with their
chunks); DESIGN.md "CLI search" (the CLI runs as the local operator unless ``--as`` is given; the
API always needs a principal) and "Duplicates and permissions" (identical content shown once per
principal). Ranking: :func:`ki.index.hybrid.hybrid_search` (lexical + vector by RRF, k = 60) on
the configured backend; the query is embedded with the embedder the *index* records (so a query
always meets vectors of its own model), and the vector half is skipped while the index has none.

Hits are hydrated from PostgreSQL, the record of every backend: path, title, a snippet with the
query's words between « », and — once the Classify / Relate / Extract-metadata stages have
written them — the document id, version order, matter reference and document type (None before).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import Engine, text

from ki import services
from ki.access.projection import principal_set
from ki.index.backend import SearchBackend, SearchFilters
from ki.index.embeddings import Embedder, EmbedderIdentity
from ki.index.facts import fact_sources
from ki.index.hybrid import FusedHit, hybrid_search

SNIPPET_OPTIONS = 'StartSel=«,StopSel=»,MaxWords=30,MinWords=12,MaxFragments=2,FragmentDelimiter=" … "'


class SearchHit(BaseModel):
    """One result: a document's best chunk, identical content shown once.

    Attributes:
        source_object_id: the file (or embedded message/attachment) — the hit's document in the index.
        path: its path (``container » attachment`` for embedded objects).
        title: the indexed title (the converter's title, else the file name).
        snippet: up to two fragments with matches between « ».
        score: RRF score ``Σ 1/(60 + rank)`` over the halves the hit appears in; higher is better.
        ordinal: the chunk (-1 = the document's profile row).
        content_hash: SHA-256 of the bytes.
        document_id / version: the Document and version order (None until Relate has run).
        matter: the matter reference (None until Classify has run).
        doc_type: the ontology node (None until Extract metadata has run).
        lexical_rank / vector_rank: the hit's rank in each half (None when absent from it).
    """

    source_object_id: int
    path: str
    title: str | None
    snippet: str
    score: float
    ordinal: int
    content_hash: str
    document_id: int | None = None
    version: int | None = None
    matter: str | None = None
    doc_type: str | None = None
    lexical_rank: int | None = None
    vector_rank: int | None = None


class SearchResponse(BaseModel):
    """``hits`` best first; ``notes`` say which filters were ignored and why; ``embedder`` is the index's
    vector model (None: lexical only); ``mode`` what ran (``hybrid``, ``lexical``, ``vector``)."""

    hits: list[SearchHit]
    notes: list[str] = Field(default_factory=list)
    mode: str
    embedder: str | None = None


def query_embedder(identity: EmbedderIdentity | None) -> Embedder | None:
    """The process's embedder of an index identity (:func:`ki.services.query_embedder`); None without vectors."""
    return services.query_embedder(identity)


def backend_for(db: Any, config: Any = None) -> SearchBackend:
    """The search backend the configuration selects.

    ``components.opensearch_url`` unset → :class:`ki.index.postgres.PostgresBackend` (embedded); set →
    :class:`ki.index.opensearch.OpenSearchBackend` on that URL, which writes the PostgreSQL record
    first and syncs OpenSearch after it (the index stage writes both; searches run on OpenSearch).
    Raises: ConfigurationError when the URL is set but opensearch-py is not installed.
    """
    from ki.index.postgres import PostgresBackend

    url = getattr(config.components, "opensearch_url", None) if config is not None else None
    if not url:
        return PostgresBackend(db)
    from ki.index.opensearch import OpenSearchBackend

    try:
        import opensearchpy  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the opensearch extra is missing
        from ki.errors import ConfigurationError

        raise ConfigurationError("components.opensearch_url is set, but opensearch-py is not installed: "
                                 "pip install 'ki[opensearch]'") from exc
    return OpenSearchBackend(db, url)


def search(db: Any, query: str, *, principals: Sequence[str] | None, operator: bool = False,
           matter: str | None = None, doc_type: str | None = None, since: date | None = None,
           limit: int = 10, mode: str = "hybrid", config: Any = None) -> SearchResponse:
    """Search the index as ``principals`` (``*`` is always held).

    Args:
        db: a :class:`ki.store.db.Database` or engine.
        query: words, "phrases", -excluded (web-search syntax; plain queries also match any word
            when too few documents contain them all).
        principals: the caller's principals (user and groups). Required unless ``operator``.
        operator: the local operator (CLI without ``--as``): all grants, no permission filter.
        matter / doc_type / since: filters (see :class:`ki.index.backend.SearchFilters`); a filter the
            database cannot apply yet is ignored and named in ``notes``.
        limit: hits wanted (1..200). mode: ``hybrid``, ``lexical`` or ``vector``.
    Raises: ValueError when neither principals nor operator are given, or for a bad mode/limit.
    """
    if principals is None and not operator:
        raise ValueError("search needs the caller's principals (operator=True only for the local operator)")
    if not 1 <= limit <= 200:
        raise ValueError("limit must be between 1 and 200")
    engine = getattr(db, "engine", db)
    backend = backend_for(db, config)
    filters = SearchFilters(principals=None if operator else principal_set(principals or []),
                            matter=matter, doc_type=doc_type, since=since)
    identity = backend.index_identity()
    embedder = query_embedder(identity) if mode != "lexical" else None
    response = search_with_backend(backend, engine, query, filters=filters, limit=limit, mode=mode,
                                   embedder=embedder)
    response.notes = backend.filter_report(filters).notes + response.notes
    return response


def search_with_backend(backend: SearchBackend, engine: Engine, query: str, *, filters: SearchFilters | None = None,
                        principals: Sequence[str] | None = None, limit: int = 10, mode: str = "hybrid",
                        embedder: Embedder | None = None) -> SearchResponse:
    """Run a search on ``backend`` and hydrate the hits from ``engine``'s database.

    ``filters`` wins over ``principals`` (None = the local operator). Scores are RRF scores in every
    mode (one half alone ranks by ``1/(60 + rank)``).
    """
    if filters is None:
        filters = SearchFilters(principals=None if principals is None else principal_set(principals))
    notes: list[str] = []
    vector = None
    if embedder is not None and mode != "lexical":
        vector = embedder.embed_query(query)
    elif mode == "vector":
        notes.append("the index holds no vectors (retrieval.embedding_model = none): no vector results")
    fused = hybrid_search(backend, query, filters, query_vector=vector, limit=limit, mode=mode)
    hits = hydrate(engine, query, fused)
    return SearchResponse(hits=hits, notes=notes, mode=mode,
                          embedder=None if embedder is None else getattr(embedder, "name", None))


_HYDRATE = """
WITH q AS (SELECT coalesce({or_query}, {and_query}) AS query)
SELECT h.i, c.source_object_id, so.path, c.title, c.ordinal, c.content_hash,
       coalesce(ts_headline('german', c.text, q.query, :opts), left(c.text, 240)) AS snippet
       {extra}
FROM unnest(CAST(:oids AS bigint[]), CAST(:ords AS int[]), CAST(:idx AS int[])) AS h(oid, ord, i)
JOIN chunk c ON c.source_object_id = h.oid AND c.ordinal = h.ord
JOIN source_object so ON so.id = h.oid AND so.deleted_at IS NULL
CROSS JOIN q
ORDER BY h.i
"""


def hydrate(engine: Engine, query: str, fused: Sequence[FusedHit]) -> list[SearchHit]:
    """Path, title, snippet and (when present) document, version, matter and type of each fused hit.

    Hits whose object was tombstoned after the search ran are dropped.
    """
    if not fused:
        return []
    from ki.index.postgres import _AND_QUERY, _OR_QUERY

    with engine.connect() as conn:
        facts = fact_sources(conn)
        document_id, version = facts.version_values("h.oid")
        extra = [f"{facts.matter_value('h.oid')} AS matter", f"{document_id} AS document_id",
                 f"{version} AS version", f"{facts.type_value('h.oid')} AS doc_type"]
        sql = _HYDRATE.format(or_query=_OR_QUERY, and_query=f"({_AND_QUERY})",
                              extra="".join(f", {e}" for e in extra))
        rows = conn.execute(text(sql), {
            "q": query, "opts": SNIPPET_OPTIONS,
            "oids": [h.source_object_id for h in fused], "ords": [h.ordinal for h in fused],
            "idx": list(range(len(fused))),
        }).fetchall()
    out = []
    for r in rows:
        h = fused[r.i]
        out.append(SearchHit(
            source_object_id=r.source_object_id, path=r.path, title=r.title, snippet=" ".join(r.snippet.split()),
            score=float(h.score), ordinal=r.ordinal, content_hash=r.content_hash,
            document_id=r.document_id, version=r.version, matter=r.matter, doc_type=r.doc_type,
            lexical_rank=h.lexical_rank, vector_rank=h.vector_rank))
    return out
