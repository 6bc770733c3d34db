"""``GET /v1/search``: permission-filtered search as the token's principal, paged by offset or cursor.

Search results are paged, in the API as on the command line; DESIGN.md "CLI search" (the API always needs a
principal) and "The operator surface is one app" (scope ``search``). The query means what
:mod:`ki.adapters.search.query` says
(the CLI's and the MCP ``search`` tool's semantics); the page is :class:`ki.api.schemas_search.SearchPage`: ``hits``
best first, ``next_cursor`` (pass it back as ``cursor`` for the next page; None on the last page) and
``next_offset``. A cursor belongs to its query, filters, mode and principal: another query's cursor, or one not made
by ki, is a 422 ``invalid_cursor`` before anything runs. A token without a principal gets 403 ``no_principal``.
The route and the MCP tool (:func:`search_as`) share pages through :mod:`ki.api.search_answers`.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response

from ki.adapters.search.search import MAX_LIMIT, MAX_OFFSET
from ki.api.auth import Identity, authorize_request
from ki.api.errors import ApiError, error_responses
from ki.api.schemas_search import SearchPage
from ki.api.search_answers import (
    SearchContext,
    SearchOptions,
    SearchRefused,
    compute_page,
    search_context,
    search_key,
    shared_search,
)
from ki.api.state import ServerState, server_state
from ki.app.scopes import SEARCH

router = APIRouter(prefix="/v1/search", tags=["search"])

Mode = Literal["hybrid", "lexical", "vector"]
Kind = Literal["passage", "clause"]
#: The longest query text accepted (characters).
MAX_QUERY_CHARS = 1000


def search_as(state: ServerState, identity: Identity, query: str, **options: Any) -> SearchPage:
    """Search as ``identity``'s principal (its permission filter applied; the CLI's semantics); ``options`` are
    :class:`ki.api.search_answers.SearchOptions`' fields. The page may be one shared with concurrent readers of the
    same key (:mod:`ki.api.search_answers`).

    Raises: :class:`SearchRefused` 403 ``no_principal`` (a token made without ``--principal``); 422
    ``invalid_cursor`` (malformed, or another query's/principal's) or ``invalid_search`` (limit, offset, mode out of
    range).
    """
    return shared_search(state, identity, query, SearchOptions.of(**options)).page


def _context(request: Request) -> SearchContext:
    """The route's dependency: the token checked (scope ``search``) and the index's generation read, in one worker
    thread. Raises: AuthError (401/403), :class:`SearchRefused` 403 ``no_principal``."""
    identity = authorize_request(request, SEARCH)
    try:
        return search_context(request.app.state.ki, identity)
    except SearchRefused as exc:
        raise ApiError(exc.status, exc.code, exc.message) from exc


@router.get("", response_model=SearchPage, responses=error_responses(401, 403, 422))
async def search_route(
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
    state: ServerState = Depends(server_state), context: SearchContext = Depends(_context),
) -> Response:
    """The hits the token's principal may see, best first; pass ``next_cursor`` back as ``cursor``. A page computed
    for the same key within :data:`ki.api.state.SEARCH_SECONDS` is answered on the event loop, without a worker
    thread (:mod:`ki.api.search_answers`)."""
    options = SearchOptions.of(limit=limit, offset=offset, cursor=cursor, mode=mode, matter=matter, doc_type=type,
                               since=since, parts=part, not_parts=not_part, kind=kind, clause_type=clause_type,
                               party=party, final=final)
    key = search_key(context, q, options)
    try:
        answer = await state.search_answers.get_async(key, lambda: compute_page(state, context, q, options))
    except SearchRefused as exc:
        raise ApiError(exc.status, exc.code, exc.message) from exc
    return Response(answer.value.json, media_type="application/json")
