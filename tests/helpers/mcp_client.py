"""A tool call through the ``mcp`` SDK's own client over streamable HTTP (tests against a real ``ki serve``)."""

from __future__ import annotations

import json

import anyio
import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def call_tool(url: str, headers: dict, tool: str, args: dict | None = None):
    """One tool call at ``url`` (``…/mcp/full``) with ``headers``; returns (is_error, payload: the tool's JSON
    answer as a dict, or the error text)."""
    async def go():
        async with httpx.AsyncClient(headers=headers, timeout=60, follow_redirects=True) as client, \
                streamable_http_client(url, http_client=client) as (read, write, _), \
                ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool(tool, args or {})
            body = result.content[0].text if result.content else ""
            return result.isError, (body if result.isError else json.loads(body))

    return anyio.run(go)
