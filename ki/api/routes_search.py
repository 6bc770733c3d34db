"""``GET /v1/search``: permission-filtered search as the token's principal, paged by offset or cursor.

Search results are paged, in the API as on the command line; DESIGN.md "CLI search" (the API always needs a
principal) and "The operator surface is one app" (scope ``search``). The query means what
:mod:`ki.adapters.search.query` says
(the CLI's and the MCP ``search`` tool's semantics); the page is :class:`ki.api.schemas_search.SearchPage`: ``hits``
best first, ``next_cursor`` (pass it back as ``cursor`` for the next page; None on the last page) and
``next_offset``. A cursor belongs to its query, filters, mode and principal: another query's cursor, or one not made
by ki, is a 422 ``invalid_cursor`` before anything runs. A token without a principal gets 403 ``no_principal``.
:func:`search_as` is the one path the HTTP route and the MCP tool share.
"""

from __future__ import annotations

from datetime import date
from typing import Literal

from fastapi import APIRouter, Depends, Query

from ki.adapters.search.search import MAX_LIMIT, MAX_OFFSET
from ki.api.auth import Identity, require_scope
from ki.api.errors import ApiError, error_responses
from ki.api.schemas_search import SearchPage
from ki.api.state import ServerState, server_state
from ki.app.scopes import SEARCH

router = APIRouter(prefix="/v1/search", tags=["search"])

Mode = Literal["hybrid", "lexical", "vector"]
Kind = Literal["passage", "clause"]
#: The longest query text accepted (characters).
MAX_QUERY_CHARS = 1000


class SearchRefused(Exception):
    """A search the caller may not run or asked for wrongly: ``status`` (403/422), ``code``, ``message``."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def search_as(state: ServerState, identity: Identity, query: str, *, limit: int = 10, offset: int = 0,
              cursor: str | None = None, mode: str = "hybrid", matter: str | None = None,
              doc_type: str | None = None, since: date | None = None, parts: list[str] | None = None,
              not_parts: list[str] | None = None, kind: str = "passage", clause_type: str | None = None,
              party: str | None = None, final: bool = False) -> SearchPage:
    """Search as ``identity``'s principal (its permission filter applied; the CLI's semantics).

    ``kind`` ``clause`` searches clause rows only (the page grouped by document; ``clause_type`` — a clause-facet
    node, descendants included — implies it); ``party`` and ``final`` filter any search
    (:func:`ki.adapters.search.search.search`).

    Raises:
        SearchRefused: 403 ``no_principal`` (a token made without ``--principal``); 422 ``invalid_cursor``
            (malformed, or another query's/principal's) or ``invalid_search`` (limit, offset, mode out of range).
    """
    if not identity.principal:
        raise SearchRefused(403, "no_principal", f"the token {identity.name!r} has no principal to search as "
                                                 "(ki token create --principal ...)")
    from ki.adapters.search.search import search
    from ki.domain.entities.store import party_filter_ids

    try:
        response = search(state.ctx.db, query, principals=[identity.principal], limit=limit, offset=offset,
                          cursor=cursor or None, mode=mode, matter=matter, doc_type=doc_type, since=since,
                          parts=parts or None, not_parts=not_parts or (), config=state.config(),
                          clauses=kind == "clause", clause_type=clause_type or None, party=party or None,
                          party_entities=party_filter_ids(state.ctx.db, party or None),
                          final=final)
    except ValueError as exc:
        code = "invalid_cursor" if cursor and "cursor" in str(exc) else "invalid_search"
        raise SearchRefused(422, code, str(exc)) from exc
    return SearchPage(principal=identity.principal, **response.model_dump())


@router.get("", response_model=SearchPage, responses=error_responses(401, 403, 422))
def search_route(
    q: str = Query(..., min_length=1, max_length=MAX_QUERY_CHARS,
                   description='words, "phrases", -excluded, or (see the README "Search")'),
    limit: int = Query(10, ge=1, le=MAX_LIMIT), offset: int = Query(0, ge=0, le=MAX_OFFSET),
    cursor: str | None = Query(None, max_length=200, description="next_cursor of the previous page (wins over offset)"),
    mode: Mode = "hybrid", matter: str | None = Query(None, max_length=200),
    type: str | None = Query(None, max_length=200, description="an ontology node id"),  # noqa: A002 - the CLI's name
    since: date | None = Query(None, description="documents dated on or after (YYYY-MM-DD)"),
    part: list[str] | None = Query(None, description="search only these parts (deleted, comment, fields …)"),
    not_part: list[str] | None = Query(None, description="never these parts"),
    kind: Kind = Query("passage", description="clause: clause rows of final versions only, grouped by document"),
    clause_type: str | None = Query(None, max_length=200, description="a clause-facet node (descendants "
                                    "included); implies kind=clause"),
    party: str | None = Query(None, max_length=200, description="documents naming this party (aliases included)"),
    final: bool = Query(False, description="only final/executed versions"),
    state: ServerState = Depends(server_state), identity: Identity = Depends(require_scope(SEARCH)),
) -> SearchPage:
    """The hits the token's principal may see, best first; pass ``next_cursor`` back as ``cursor``."""
    try:
        return search_as(state, identity, q, limit=limit, offset=offset, cursor=cursor, mode=mode, matter=matter,
                         doc_type=type, since=since, parts=part, not_parts=not_part, kind=kind,
                         clause_type=clause_type, party=party, final=final)
    except SearchRefused as exc:
        raise ApiError(exc.status, exc.code, exc.message) from exc
