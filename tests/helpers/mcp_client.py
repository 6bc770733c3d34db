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


def call_tools(url: str, headers: dict, calls: list[tuple[str, dict]]) -> list[tuple[str, object]]:
    """Several tool calls in one client session, in order; each outcome is ``("ok", JSON answer)``,
    ``("tool_error", text)`` or ``("rpc_error", (code, message))`` — a JSON-RPC error does not end the
    session, so later calls still run."""
    from mcp.shared.exceptions import McpError

    async def go():
        outcomes: list[tuple[str, object]] = []
        async with httpx.AsyncClient(headers=headers, timeout=60, follow_redirects=True) as client, \
                streamable_http_client(url, http_client=client) as (read, write, _), \
                ClientSession(read, write) as session:
            await session.initialize()
            for tool, args in calls:
                try:
                    result = await session.call_tool(tool, args)
                except McpError as exc:
                    outcomes.append(("rpc_error", (exc.error.code, exc.error.message)))
                    continue
                body = result.content[0].text if result.content else ""
                outcomes.append(("tool_error", body) if result.isError else ("ok", json.loads(body)))
        return outcomes

    return anyio.run(go)
