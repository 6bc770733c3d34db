"""Pydantic model of the search API (``GET /v1/search``) and the MCP ``search`` tool.

A page is :class:`ki.adapters.search.search.SearchResponse` (hits best first, ``next_cursor`` /
``next_offset`` of the next page, None on the last) plus the principal it was searched as.
"""

from __future__ import annotations

from ki.adapters.search.search import SearchHit, SearchResponse

__all__ = ["SearchHit", "SearchPage"]


class SearchPage(SearchResponse):
    """One page of hits as ``principal`` sees them (only what that principal may see)."""

    principal: str
