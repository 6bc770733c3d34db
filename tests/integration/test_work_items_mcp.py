"""MCP at ``/mcp/full`` with the ``mcp`` SDK's own client over streamable HTTP, against a real ``ki serve`` app.

Issue 18 item 6 and "Tests": the tools are listed with their annotations; list / get / groups / retry by
filter (dry run, then the confirmation token) / retry one / cancel; every scope case (no token and a
revoked token → HTTP 401 before the SDK; a read-only token writing, a token without the scope → a tool
error); a search through MCP never shows a chunk the token's principal may not see. Real PostgreSQL and a
real run (the faulty estate of tests/helpers/work_items.py). Cost: ~40-80 s.
"""

from __future__ import annotations

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import text

from ki.api.app import create_app
from ki.app.tokens import create_token, revoke
from tests.helpers.mcp_client import call_tool as call
from tests.helpers.served import serve_app
from tests.helpers.work_items import CORRUPT, OUTAGE, faulty_estate

pytestmark = pytest.mark.timeout(600)
INDEXED = (9, 10, 11)  # the files every stage finished: their chunks are in the index


@pytest.fixture
def mcp_served(make_ctx, data_dir, tmp_path, monkeypatch):
    ctx, ids, faults, headers = faulty_estate(make_ctx, data_dir, tmp_path / "share", monkeypatch)
    app = create_app(ctx)
    with serve_app(app) as base:
        yield f"{base}/mcp/full", headers, ctx, ids, faults, app
        app.state.ki.launcher.wait_idle(120)


def list_tools(url: str, headers: dict):
    async def go():
        async with httpx.AsyncClient(headers=headers, timeout=60, follow_redirects=True) as client, \
                streamable_http_client(url, http_client=client) as (read, write, _), \
                ClientSession(read, write) as session:
            await session.initialize()
            return (await session.list_tools()).tools

    return anyio.run(go)


def test_tools_and_work_items_through_mcp(mcp_served):
    url, h, ctx, ids, faults, app = mcp_served
    tools = {t.name: t for t in list_tools(url, h["reader"])}
    assert set(tools) == {"list_work_items", "get_work_item", "list_failure_groups", "retry_work_item",
                          "retry_work_items", "cancel_work_item", "pipeline_status", "search"}
    assert tools["list_work_items"].annotations.readOnlyHint is True
    assert tools["retry_work_item"].annotations.readOnlyHint is False
    assert tools["retry_work_item"].annotations.destructiveHint is False
    assert tools["cancel_work_item"].annotations.destructiveHint is True

    err, page = call(url, h["reader"], "list_work_items", {"status": "failed", "kind": "convert"})
    assert not err, page
    assert sorted(i["source_object_id"] for i in page["items"]) == sorted(ids[i] for i in CORRUPT)
    err, groups = call(url, h["reader"], "list_failure_groups", {"kind": "convert"})
    assert sorted((g["count"], g["infrastructure"]) for g in groups["groups"]) == [(3, True), (5, False)]
    err, status = call(url, h["reader"], "pipeline_status")
    assert status["stages"]["convert"]["quarantined"] == 5 and status["stages"]["convert"]["failed"] == 3

    # retry by filter: a dry run first, then the token; a changed filter is refused
    flt = {"kind": "convert", "infrastructure": True}
    err, preview = call(url, h["operator"], "retry_work_items", {**flt, "dry_run": True})
    assert not err and preview["count"] == 3
    err, refusal = call(url, h["operator"], "retry_work_items",
                        {"kind": "convert", "dry_run": False, "confirmation_token": preview["confirmation_token"]})
    assert err and "confirmation_mismatch" in refusal
    faults.active = False
    err, result = call(url, h["operator"], "retry_work_items",
                       {**flt, "dry_run": False, "confirmation_token": preview["confirmation_token"]})
    assert not err and result["acted"] == 3 and "queued" in result["message"]
    app.state.ki.launcher.wait_idle(120)
    err, done = call(url, h["reader"], "list_work_items", {"kind": "index", "status": "done"})
    assert {ids[i] for i in OUTAGE} <= {i["source_object_id"] for i in done["items"]}

    # one item: cancel, then retry by id as the spec writes it; the history keeps every step
    item = page["items"][0]["id"]
    err, cancelled = call(url, h["operator"], "cancel_work_item", {"id": item})
    assert not err and cancelled["status"] == "cancelled"
    err, retried = call(url, h["operator"], "retry_work_item", {"id": item})
    assert not err and retried["status"] == "runnable" and "queued" in retried["message"]
    app.state.ki.launcher.wait_idle(120)
    err, detail = call(url, h["reader"], "get_work_item", {"id": item})
    assert [e["outcome"] for e in detail["history"]] == ["quarantined", "cancelled", "retried", "done"]
    assert detail["history"][1]["actor"] == "operator"
    err, missing = call(url, h["reader"], "get_work_item", {"id": "work_item:nonsense"})
    assert err and "work_item:<uuid>" in missing


def test_every_scope_case_through_mcp(mcp_served):
    url, h, ctx, ids, _faults, _app = mcp_served
    err, page = call(url, h["reader"], "list_work_items", {"status": "failed"})
    item = page["items"][0]["id"]
    # no token, an unknown token: refused at the HTTP layer, before any tool
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    r = httpx.post(url, json=init, headers=accept, timeout=30)
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    assert httpx.post(url, json=init, headers={**accept, "Authorization": "Bearer ki_x"}, timeout=30).status_code == 401
    with pytest.raises(BaseException):  # noqa: B017 - the SDK raises its transport's 401 in a task group
        list_tools(url, {})
    # a host that is not this server's → 421 from the SDK's DNS-rebinding protection
    r = httpx.post(url, json=init, headers={**accept, **h["reader"], "Host": "evil.example:80"}, timeout=30)
    assert r.status_code == 421
    # a read-only token writing, a token of another scope reading: tool errors naming the scope
    for tool, args in (("retry_work_item", {"id": item}), ("cancel_work_item", {"id": item}),
                       ("retry_work_items", {"dry_run": True})):
        err, message = call(url, h["reader"], tool, args)
        assert err and "write:work_item" in message
    err, message = call(url, h["searcher"], "list_work_items")
    assert err and "read:work_item" in message
    err, message = call(url, h["reader"], "search", {"query": "Mandantschaft"})
    assert err and "'search'" in message
    with ctx.db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM audit_log WHERE action LIKE 'work_item%'")).scalar_one() == 0
    # revoked: refused from the next request on
    with ctx.db.engine.connect() as conn:
        gone = conn.execute(text("SELECT id FROM api_token WHERE name = 'gone'")).scalar_one()
    assert not call(url, h["gone"], "pipeline_status")[0]
    revoke(ctx.db.engine, gone)
    assert httpx.post(url, json=init, headers={**accept, **h["gone"]}, timeout=30).status_code == 401


def test_search_through_mcp_is_the_principals(mcp_served):
    url, h, ctx, ids, _faults, _app = mcp_served
    alice_only, bob_only, both = (ids[i] for i in INDEXED)
    with ctx.db.engine.begin() as conn:
        for oid, allowed in ((alice_only, ["alice"]), (bob_only, ["bob"]), (both, ["alice", "group:legal"])):
            conn.execute(text("UPDATE chunk SET allowed_principals = CAST(:a AS text[]) WHERE source_object_id = :o"),
                         {"a": allowed, "o": oid})
        assert conn.execute(text("SELECT count(DISTINCT source_object_id) FROM chunk")).scalar_one() == 3
    tokens = {}
    for principal in ("alice", "bob", "carol"):
        tokens[principal] = {"Authorization": "Bearer " + create_token(
            ctx.db.engine, name=f"search-{principal}", scopes=["search"], principal=principal)[1]}
    seen = {}
    for principal, headers in tokens.items():
        err, body = call(url, headers, "search", {"query": "Mandantschaft", "mode": "lexical", "limit": 50})
        assert not err, body
        assert body["principal"] == principal
        seen[principal] = {hit["source_object_id"] for hit in body["hits"]}
    assert seen == {"alice": {alice_only, both}, "bob": {bob_only}, "carol": set()}
    err, message = call(url, h["searcher"], "search", {"query": "Mandantschaft"})  # a token without a principal
    assert err and "no principal" in message
