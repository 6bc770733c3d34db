"""Search pages shared by every concurrent reader of the same query, options, access set and index generation.

Spec: DESIGN.md "CLI search" (the API always searches as the token's principal) and "Duplicates and permissions";
the sharing itself is :mod:`ki.api.shared_answers`. :func:`shared_search` is the one path ``GET /v1/search`` and the
MCP ``search`` tool take.

The key of a page (:func:`search_key`) is everything its content depends on that can change between two reads:

* the caller's **access set** — the principal set the permission filter uses
  (:func:`ki.domain.access.projection.principal_set`): a page is never served to a principal with another one;
* the **query text** exactly as given (a cursor is bound to it) and every **option** (limit, offset, cursor, mode,
  filters, parts, kind, clause type, party, final);
* the **configuration's version** (clause facets, backend, large-document threshold);
* the index's **generation** (:meth:`ki.adapters.search.backend.SearchBackend.generation`): every write, delete or
  access change of the index's rows is a new change-log head, and the embedded full-text projection applying one is a
  new watermark — so a document is found by the first search after its change is applied, and a revoked grant hides a
  document from the first search after the change is logged.

A page is served for at most :data:`ki.api.state.SEARCH_SECONDS` after it was computed; that bounds only what the
record adds to hits without a change of the index (a path, matter, version, "missing since").
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from datetime import date
from typing import Any

from ki.api.auth import Identity
from ki.api.schemas_search import SearchPage
from ki.api.state import ServerState
from ki.domain.access.projection import principal_set


class SearchRefused(Exception):
    """A search the caller may not run or asked for wrongly: ``status`` (403/422), ``code``, ``message``."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class SearchOptions:
    """What a search asks besides its query, normalised (no option's absence spelt two ways).

    ``kind`` ``clause`` searches clause rows only (the page grouped by document; ``clause_type`` — a clause-facet
    node, descendants included — implies it); ``party`` and ``final`` filter any search
    (:func:`ki.adapters.search.search.search`)."""

    limit: int = 10
    offset: int = 0
    cursor: str | None = None
    mode: str = "hybrid"
    matter: str | None = None
    doc_type: str | None = None
    since: date | None = None
    parts: tuple[str, ...] = ()
    not_parts: tuple[str, ...] = ()
    kind: str = "passage"
    clause_type: str | None = None
    party: str | None = None
    final: bool = False

    @classmethod
    def of(cls, *, parts: Any = None, not_parts: Any = None, cursor: str | None = None, clause_type: str | None = None,
           party: str | None = None, **values: Any) -> SearchOptions:
        """The options of keyword values as the route and the tool receive them (None or empty lists)."""
        return cls(parts=tuple(parts or ()), not_parts=tuple(not_parts or ()), cursor=cursor or None,
                   clause_type=clause_type or None, party=party or None, **values)


@dataclass(frozen=True)
class SearchContext:
    """Who searches and where the index stands: read once per request (one database statement)."""

    identity: Identity
    config: Any
    config_version: str
    generation: tuple[int, int]


@dataclass(frozen=True)
class SharedPage:
    """A search page and its JSON, shared by every reader of its key."""

    page: SearchPage
    json: bytes


def search_context(state: ServerState, identity: Identity) -> SearchContext:
    """The :class:`SearchContext` of ``identity`` now.

    Raises: :class:`SearchRefused` 403 ``no_principal`` (a token made without ``--principal``); the database's
    errors."""
    if not identity.principal:
        raise SearchRefused(403, "no_principal", f"the token {identity.name!r} has no principal to search as "
                                                 "(ki token create --principal ...)")
    config, version = state.versioned_config()
    return SearchContext(identity, config, version, state.index_generation(config, version))


def search_key(context: SearchContext, query: str, options: SearchOptions) -> Hashable:
    """The key a page is shared under (see the module doc)."""
    return (principal_set([context.identity.principal or ""]), query, options, context.config_version,
            context.generation)


def compute_page(state: ServerState, context: SearchContext, query: str, options: SearchOptions) -> SharedPage:
    """Run the search (:func:`ki.adapters.search.search.search`, waiting for no other process applying the
    full-text projection's backlog).

    Raises: :class:`SearchRefused` 422 ``invalid_cursor`` (malformed, or another query's/principal's) or
    ``invalid_search`` (limit, offset, mode out of range)."""
    from ki.adapters.search.search import search
    from ki.domain.entities.store import party_filter_ids

    o = options
    principal = context.identity.principal
    try:
        response = search(state.ctx.db, query, principals=[principal], limit=o.limit, offset=o.offset,
                          cursor=o.cursor, mode=o.mode, matter=o.matter, doc_type=o.doc_type, since=o.since,
                          parts=list(o.parts) or None, not_parts=o.not_parts, config=context.config,
                          clauses=o.kind == "clause", clause_type=o.clause_type, party=o.party,
                          party_entities=party_filter_ids(state.ctx.db, o.party), final=o.final, index_wait=False)
    except ValueError as exc:
        code = "invalid_cursor" if o.cursor and "cursor" in str(exc) else "invalid_search"
        raise SearchRefused(422, code, str(exc)) from exc
    page = SearchPage(principal=principal, **response.model_dump())
    return SharedPage(page, page.model_dump_json().encode())


def shared_search(state: ServerState, identity: Identity, query: str, options: SearchOptions) -> SharedPage:
    """The page of ``query`` as ``identity``'s principal: the shared one while its key holds, else computed (once
    for every concurrent reader). Raises: :class:`SearchRefused` (see :func:`search_context`, :func:`compute_page`).
    """
    context = search_context(state, identity)
    return state.search_answers.get(search_key(context, query, options),
                                    lambda: compute_page(state, context, query, options)).value
