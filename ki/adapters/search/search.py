"""The search API: a query and a principal → a page of hits a person can read.

Spec: insertion-pipeline.md "Index" (permission projection; deleted documents disappear with their chunks);
DESIGN.md "CLI search" (the CLI runs as the local operator unless ``--as`` is given; the API always needs a
principal) and "Duplicates and permissions" (identical content shown once per principal).
Query semantics: :mod:`ki.adapters.search.query` (both backends). Ranking:
:func:`ki.adapters.search.hybrid.hybrid_search`
(lexical + vector by RRF, k = 60) on the configured backend; the query is embedded with the embedder the
*index* records, and the vector half is skipped while the index has none.

Each hit is one document (one content: identical copies the searcher may also see are listed in
``also_at``), hydrated from PostgreSQL, the record of every backend: path, title, the matched passage with the
hit between « » (no added header), which part matched (``body``, ``comment``, ``footnote``, ``deleted`` …) or
which document fields (file name, title, folder …), and — once the model stages have written them — the
document id, version order, matter reference and document type. ``score`` is the fused score normalised to
0–1 for the query (1 = first in every half that ran); the order is the fused rank. Pages: ``offset`` /
``limit``, or the ``next_cursor`` of the previous page.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import Engine

from ki.adapters.observability.metrics import record_search
from ki.adapters.search.backend import CLAUSE_KIND, PROFILE_KIND, SearchBackend, SearchFilters
from ki.adapters.search.clause_filters import clause_types_under
from ki.adapters.search.embedder import Embedder, EmbedderIdentity
from ki.adapters.search.factory import backend_for
from ki.adapters.search.hybrid import RRF_K, FusedHit, hybrid_search
from ki.adapters.search.query import ParsedQuery, parse_query
from ki.adapters.search.query_embedder import query_embedder as shared_query_embedder
from ki.adapters.search.snippets import highlight, labelled_fields, matched_fields
from ki.domain.access.projection import principal_set
from ki.store.facts import fact_sources
from ki.store.index_record import also_at, hit_rows

MAX_LIMIT = 200
MAX_OFFSET = 1000


class SearchHit(BaseModel):
    """One result: a document's best passage (or its fields), identical content shown once.

    Attributes:
        source_object_id: the file (or embedded message/attachment) — the hit's document in the index.
        path: its path (``container » attachment`` for embedded objects).
        title: the indexed title (the converter's title, else the file name).
        snippet: the matched passage (up to two fragments) with matches between « »; for a hit on the
            document's fields, ``field: value`` of each field that matched.
        part: what matched: ``body``, ``comment``, ``footnote``, ``header``, ``deleted`` (struck text of a
            tracked change) …, or ``fields`` (file name, title, folder, type, matter, party).
        matched: the fields or the part that matched, for people (``["file name", "folder"]``, ``["comment"]``).
        part_key / anchor: the part's key (``header:1``, ``comment:7``) and a comment's anchor text.
        score: the fused score normalised to 0–1 for this query; higher is better (order = fused rank).
        rrf_score: the raw RRF score ``Σ 1/(60 + rank)``.
        ordinal: the row (-1 = the document's profile row: its fields).
        content_hash: SHA-256 of the bytes.
        also_at: paths of identical copies the searcher may also see.
        document_id / version / matter / doc_type: once the model stages have run (else None).
        lexical_rank / vector_rank: the hit's rank in each half (None when absent from it).
        clause_type / clause_number / clause_heading: a clause hit's (``part`` ``clause``) clause-facet node (None:
            untyped), number (``§ 4``, ``12.3``) and heading.
        missing_since: when a scan first found the file (or the file holding it) missing from its share;
            None while it is listed. Such a hit stays searchable until ``pipeline.deletion_confirmations``
            scans agree (an unmounted share deletes nothing), and says so in ``missing`` ("missing from the
            share since 2026-03-04 14:05 UTC").
    """

    source_object_id: int
    path: str
    title: str | None
    snippet: str
    part: str = "body"
    matched: list[str] = Field(default_factory=list)
    part_key: str | None = None
    anchor: str | None = None
    score: float
    rrf_score: float = 0.0
    ordinal: int
    content_hash: str
    also_at: list[str] = Field(default_factory=list)
    document_id: int | None = None
    version: int | None = None
    matter: str | None = None
    doc_type: str | None = None
    lexical_rank: int | None = None
    vector_rank: int | None = None
    missing_since: datetime | None = None
    missing: str | None = None
    clause_type: str | None = None
    clause_number: str | None = None
    clause_heading: str | None = None


class SearchResponse(BaseModel):
    """``hits`` best first; ``notes`` say which filters were ignored and why; ``embedder`` is the index's
    vector model (None: lexical only); ``mode`` what ran (``hybrid``, ``lexical``, ``vector``); ``offset`` of
    the page; ``next_offset`` / ``next_cursor`` of the next page (None: this is the last); ``explanation``
    how the query was understood (``explain=True``)."""

    hits: list[SearchHit]
    notes: list[str] = Field(default_factory=list)
    mode: str
    embedder: str | None = None
    offset: int = 0
    next_offset: int | None = None
    next_cursor: str | None = None
    explanation: list[str] | None = None


def query_embedder(identity: EmbedderIdentity | None) -> Embedder | None:
    """The process's embedder of an index identity (:func:`ki.adapters.search.query_embedder.query_embedder`); None
    without vectors."""
    return shared_query_embedder(identity)


def _digest(query: str, filters: SearchFilters, mode: str) -> str:
    blob = json.dumps([query, mode, filters.principals, filters.matter, filters.doc_type,
                       filters.since.isoformat() if filters.since else None, filters.kinds, list(filters.not_kinds),
                       filters.clause_types, filters.party_entities, filters.final])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def encode_cursor(query: str, filters: SearchFilters, mode: str, offset: int) -> str:
    """An opaque cursor for the page at ``offset`` of this query (same query, filters and mode only)."""
    raw = json.dumps({"o": offset, "q": _digest(query, filters, mode)}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, query: str, filters: SearchFilters, mode: str) -> int:
    """The offset a cursor stands for. Raises: ValueError for a malformed cursor or one of another query."""
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        offset, digest = int(data["o"]), str(data["q"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError("the cursor is not one ki search made") from exc
    if digest != _digest(query, filters, mode):
        raise ValueError("the cursor belongs to another query (or other filters): start again without it")
    return offset


def search(db: Any, query: str, *, principals: Sequence[str] | None, operator: bool = False,
           matter: str | None = None, doc_type: str | None = None, since: date | None = None,
           parts: Sequence[str] | None = None, not_parts: Sequence[str] = (), limit: int = 10, offset: int = 0,
           cursor: str | None = None, mode: str = "hybrid", explain: bool = False, config: Any = None,
           clauses: bool = False, clause_type: str | None = None, party: str | None = None,
           party_entities: Sequence[int] | None = None, final: bool = False, index_wait: bool = True
           ) -> SearchResponse:
    """Search the index as ``principals`` (``*`` is always held).

    Args:
        db: a :class:`ki.store.db.Database` or engine.
        query: words, "phrases", -excluded, ``or`` (:mod:`ki.adapters.search.query`).
        principals: the caller's principals (user and groups). Required unless ``operator``.
        operator: the local operator (CLI without ``--as``): all grants, no permission filter.
        matter / doc_type / since: filters (see :class:`ki.adapters.search.backend.SearchFilters`); a filter the
            database cannot apply yet is ignored and named in ``notes``.
        parts / not_parts: search only / never these parts (``deleted``, ``comment``, ``fields`` …).
        limit: hits per page (1..200); offset: hits skipped (0..1000), or ``cursor`` (wins over offset).
        mode: ``hybrid``, ``lexical`` or ``vector``; explain: add how the query was understood.
        clauses: search clause rows only (kind ``clause``), the page grouped by document; clause_type: a
            clause-facet node, descendants included (implies ``clauses``); party / party_entities: documents
            naming one of those entities (the name asked for, and the ids the caller resolved it to through the
            entity ledger and its aliases: :func:`ki.domain.entities.store.entities_named_by`); final: final/executed
            versions only (:mod:`ki.store.finality`); index_wait: wait for another process applying the
            embedded full-text projection's backlog (False: answer from what is applied, the note naming the lag —
            :func:`ki.adapters.search.factory.backend_for`).
    Raises: ValueError when neither principals nor operator are given, for a bad mode/limit/offset/cursor, for a
        clause type the ontology's clause facet does not hold, for ``party`` without ``party_entities``.
    """
    if principals is None and not operator:
        raise ValueError("search needs the caller's principals (operator=True only for the local operator)")
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}")
    clauses = clauses or clause_type is not None
    kinds = (CLAUSE_KIND,) if clauses else tuple(PROFILE_KIND if p == "fields" else p for p in parts) if parts else None
    engine = getattr(db, "engine", db)
    if party is not None and party_entities is None:
        raise ValueError("party needs the entity ids it names (ki.domain.entities.store.entities_named_by)")
    party_ids = tuple(party_entities) if party_entities is not None else None
    filters = SearchFilters(principals=None if operator else principal_set(principals or []), matter=matter,
                            doc_type=doc_type, since=since, kinds=kinds,
                            not_kinds=tuple(PROFILE_KIND if p == "fields" else p for p in not_parts),
                            clause_types=clause_types_under(config, clause_type) if clause_type else None,
                            party_entities=party_ids, party=party, final=final)
    if cursor:
        offset = decode_cursor(cursor, query, filters, mode)
    if not 0 <= offset <= MAX_OFFSET:
        raise ValueError(f"offset must be between 0 and {MAX_OFFSET}")
    backend = backend_for(db, config, index_wait=index_wait)
    embedder = query_embedder(backend.index_identity()) if mode != "lexical" else None
    response = search_with_backend(backend, engine, query, filters=filters, limit=limit, offset=offset, mode=mode,
                                   embedder=embedder, explain=explain)
    response.notes = backend.filter_report(filters).notes + response.notes
    lag = getattr(backend, "lexical_lag", 0)  # the embedded backend's projection, still catching up
    if lag:
        response.notes.append(f"the full-text index is catching up: {lag:,} recent changes are not searchable by "
                              "their words yet (they are being applied now)")
    if clauses:
        response.hits = grouped_by_document(response.hits)
    return response


def search_with_backend(backend: SearchBackend, engine: Engine, query: str, *, filters: SearchFilters | None = None,
                        principals: Sequence[str] | None = None, limit: int = 10, offset: int = 0,
                        mode: str = "hybrid", embedder: Embedder | None = None, explain: bool = False
                        ) -> SearchResponse:
    """Run a search on ``backend`` and hydrate the page from ``engine``'s database.

    ``filters`` wins over ``principals`` (None = the local operator). Raises: ValueError for a bad mode.
    """
    started = time.monotonic()
    if filters is None:
        filters = SearchFilters(principals=None if principals is None else principal_set(principals))
    parsed = parse_query(query)
    notes: list[str] = []
    vector = None
    if embedder is not None and mode != "lexical":
        vector = embedder.embed_query(query)
    elif mode == "vector":
        notes.append("the index holds no vectors (retrieval.embedding_model = none): no vector results")
    if parsed.empty and mode != "vector":
        notes.append("the query holds no word to search for" + (" (only exclusions)" if parsed.excluded else ""))
    fused = hybrid_search(backend, query, filters, query_vector=vector, limit=offset + limit + 1, mode=mode)
    halves = int(mode in ("hybrid", "lexical") and not parsed.empty)
    halves += int(mode in ("hybrid", "vector") and vector is not None)
    best = max(1, halves) / (RRF_K + 1)
    page = fused[offset:offset + limit]
    more = len(fused) > offset + limit
    hits = hydrate(engine, parsed, page, filters, best_score=best)
    record_search(getattr(backend, "name", "unknown"), time.monotonic() - started)
    return SearchResponse(
        hits=hits, notes=notes, mode=mode, embedder=None if embedder is None else getattr(embedder, "name", None),
        offset=offset, next_offset=offset + limit if more else None,
        next_cursor=encode_cursor(query, filters, mode, offset + limit) if more else None,
        explanation=parsed.explain() if explain else None)


def _snippet(row: Any, parsed: ParsedQuery) -> tuple[str, str, list[str]]:
    """(snippet, part, matched) of a hydrated row."""
    meta = row.meta or {}
    if row.kind == PROFILE_KIND:
        fields = dict(meta.get("fields") or {})
        found = matched_fields(fields, parsed)
        if found:
            return " · ".join(f"{label}: {value}" for label, value in found), "fields", [lab for lab, _ in found]
        if fields:
            return labelled_fields(fields), "fields", []
        opening = " ".join((row.text or "").split())
        return opening[:240], "fields", []
    snippet, _ok = highlight(row.text or "", parsed)
    return snippet, row.kind or "body", [(row.kind or "body").replace("_", " ")]


def missing_note(since: datetime | None) -> str | None:
    """``missing from the share since 2026-03-04 14:05 UTC`` for a file a scan found missing (None: listed)."""
    if since is None:
        return None
    return f"missing from the share since {since.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def hydrate(engine: Engine, query: str | ParsedQuery, fused: Sequence[FusedHit], filters: SearchFilters | None = None,
            *, best_score: float | None = None) -> list[SearchHit]:
    """Path, title, snippet, part, identical copies and (when present) document, version, matter and type of
    each fused hit. Hits whose object was tombstoned after the search ran are dropped.

    ``best_score``: the RRF score that normalises to 1 (default: one half, rank 1).
    """
    if not fused:
        return []
    parsed = parse_query(query) if isinstance(query, str) else query
    best = best_score or 1.0 / (RRF_K + 1)
    with engine.connect() as conn:
        facts = fact_sources(conn)
        rows = hit_rows(conn, facts, [(h.source_object_id, h.ordinal) for h in fused])
        also = also_at(conn, filters or SearchFilters(principals=None), [h.content_hash for h in fused],
                       [h.source_object_id for h in fused])
    out = []
    for r in rows:
        h = fused[r.i]
        snippet, part, matched = _snippet(r, parsed)
        meta = r.meta or {}
        out.append(SearchHit(
            source_object_id=r.source_object_id, path=r.path, title=r.title, snippet=snippet, part=part,
            matched=matched, part_key=meta.get("key"), anchor=meta.get("anchor"),
            score=round(min(1.0, h.score / best), 4), rrf_score=float(h.score), ordinal=r.ordinal,
            content_hash=r.content_hash, also_at=also.get(r.content_hash, []), document_id=r.document_id,
            version=r.version, matter=r.matter, doc_type=r.doc_type, lexical_rank=h.lexical_rank,
            vector_rank=h.vector_rank, missing_since=r.missing_since, missing=missing_note(r.missing_since),
            **(clause_fields(meta) if r.kind == CLAUSE_KIND else {})))
    return out


def clause_fields(meta: dict[str, Any]) -> dict[str, Any]:
    """A clause row's ``meta`` as the hit's ``clause_type``, ``clause_number`` and ``clause_heading``."""
    return {"clause_type": meta.get("clause_type"), "clause_number": meta.get("number") or None,
            "clause_heading": meta.get("heading") or None}


def grouped_by_document(hits: list[SearchHit]) -> list[SearchHit]:
    """``hits`` with each document's hits together, documents in the order of their best hit (a clause search's
    page: one agreement's clauses under it)."""
    order: dict[Any, int] = {}
    for h in hits:
        order.setdefault(h.document_id if h.document_id is not None else f"o{h.source_object_id}", len(order))
    return sorted(hits, key=lambda h: order[h.document_id if h.document_id is not None else f"o{h.source_object_id}"])


#: The query :func:`warm` runs: a German compound and an English word, so both lexicons, the stemmers, every
#: lexical index, the embedder and the hydration statements are loaded.
WARM_QUERY = "Mietvertragskündigung agreement"


def warm(db: Any, config: Any = None) -> float:
    """Run one search as the local operator and return its wall seconds, so the next search of this process
    finds everything loaded (a server's first ``/v1/search`` after start). Raises what :func:`search` raises
    (a database or index fault); callers that only want it warm log and continue."""
    import time

    started = time.perf_counter()
    search(db, WARM_QUERY, principals=None, operator=True, limit=1, config=config)
    return time.perf_counter() - started
