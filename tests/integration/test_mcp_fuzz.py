"""Property-based fuzzing of the MCP tools (schemathesis over their input schemas), as test_api_fuzz does for REST.

The tools' input schemas (``tools/list``) become an OpenAPI 3.1 document, one operation per tool whose body is
the tool's arguments; schemathesis generates valid and invalid argument objects for each, and every one is
sent as a ``tools/call`` through one session of the ``mcp`` SDK's client to a real served app (an admin token
with a principal, so every handler runs). Checks: no answer is an internal error or quotes SQL or a traceback,
an invalid argument is a JSON-RPC ``-32602`` (never a tool run), and the session survives everything.
Cost: ~30-90 s.
"""

from __future__ import annotations

import contextlib
import json
import os

import anyio
import anyio.from_thread
import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from schemathesis import GenerationMode

from ki.api.app import create_app
from ki.app.tokens import create_token
from tests.helpers.served import serve_app

pytestmark = pytest.mark.timeout(900)
LEAKS = ("internal_error", "select ", "traceback", "psycopg", "sqlalchemy")


@contextlib.asynccontextmanager
async def _session(url: str, headers: dict):
    async with httpx.AsyncClient(headers=headers, timeout=60) as client, \
            streamable_http_client(url, http_client=client) as (read, write, _), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _document(tools) -> dict:
    return {"openapi": "3.1.0", "info": {"title": "ki MCP tools", "version": "1"},
            "paths": {f"/{t.name}": {"post": {
                "operationId": t.name,
                "requestBody": {"required": True, "content": {"application/json": {"schema": t.inputSchema}}},
                "responses": {"200": {"description": "the tool's answer"}}}} for t in tools}}


def test_mcp_tools_never_fail_internally_on_any_arguments(make_ctx):
    ctx = make_ctx(workers=2)
    token = create_token(ctx.db.engine, name="fuzzer", scopes=["admin"], principal="user:fuzzer")[1]
    app = create_app(ctx)
    examples = int(os.environ.get("KI_FUZZ_EXAMPLES", "25"))
    with serve_app(app) as base, anyio.from_thread.start_blocking_portal() as portal, \
            portal.wrap_async_context_manager(_session(f"{base}/mcp/full",
                                                       {"Authorization": f"Bearer {token}"})) as session:
        tools = portal.call(session.list_tools).tools
        assert len(tools) == 8
        schema = schemathesis.openapi.from_dict(_document(tools))
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) == 8
        seen = {"ok": 0, "tool_error": 0, "rpc_error": 0}

        async def call(name: str, arguments: dict) -> tuple[str, str]:
            try:
                result = await session.call_tool(name, arguments)
            except McpError as exc:
                return "rpc_error", f"{exc.error.code} {exc.error.message}"
            text = result.content[0].text if result.content else ""
            return ("tool_error" if result.isError else "ok"), text

        def fuzzer(operation, name: str):  # noqa: ANN202 - a hypothesis test of one tool
            @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE)
                   | operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))
            @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
            def fuzz(case) -> None:
                if not isinstance(case.body, dict):
                    return  # tools/call takes an object; the SDK client sends nothing else
                kind, text = portal.call(call, name, case.body)
                seen[kind] += 1
                assert not any(leak in text.lower() for leak in LEAKS), (name, case.body, text[:500])
                if kind == "rpc_error":
                    assert text.startswith("-32602 "), (name, case.body, text)

            return fuzz

        for operation in operations:
            name = operation.path.lstrip("/")
            try:
                fuzzer(operation, name)()
            except Exception as exc:
                raise AssertionError(f"{name}: {exc}") from exc
        kind, text = portal.call(call, "pipeline_status", {})
        assert kind == "ok" and "stages" in json.loads(text)  # the session survived every case
    assert seen["ok"] > 0 and seen["rpc_error"] > 0, seen
