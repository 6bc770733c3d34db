"""Bounded, strict requests against a real ``ki serve`` app on a loopback port.

The attacker's reproductions: an unauthenticated 100 MB ``PUT /api/config`` (refused before its body is
read, the server's memory flat under a stream of them), deeply nested JSON carrying a NUL (400, never a
500), a 100 KB MCP search query and ``list_failure_groups limit=-1`` (JSON-RPC errors naming the argument,
no SQL), a NUL in an MCP argument (a JSON-RPC error; the client's session goes on), misspelt filters and
extra fields (422 on REST, a JSON-RPC error on MCP) and a bulk action with an empty filter (refused
without ``all=true``). Real PostgreSQL, real uvicorn. Cost: ~20-40 s.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from ki.api.app import create_app
from ki.api.guard import CONFIG_BODY_BYTES, MAX_DEPTH
from ki.app.tokens import create_token
from tests.helpers.mcp_client import call_tools
from tests.helpers.served import serve_app

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def served(make_ctx):
    """(base URL, {name: headers}, ctx) of a served app on a fresh database."""
    ctx = make_ctx(workers=2)
    headers = {}
    for name, scopes in (("admin", ["admin"]), ("operator", ["read:pipeline", "write:pipeline", "write:work_item"]),
                         ("searcher", ["search"])):
        token = create_token(ctx.db.engine, name=name, scopes=scopes, principal="user:alice")[1]
        headers[name] = {"Authorization": f"Bearer {token}"}
    app = create_app(ctx)
    with serve_app(app) as base:
        yield base, headers, ctx
        app.state.ki.launcher.wait_idle(60)


def _raw(base: str, head: str, first: bytes = b"", rest: int = 0, timeout: float = 10.0) -> tuple[int, float]:
    """Send ``head`` (request line and headers) and ``first`` body bytes, then read the status line while
    a thread keeps sending ``rest`` more bytes (in 1 MiB chunks of chunked encoding when ``head`` says
    so); (status, seconds until the answer)."""
    host, port = urlsplit(base).hostname, urlsplit(base).port
    sock = socket.create_connection((host, port), timeout=timeout)
    started = time.monotonic()
    sock.sendall(head.encode() + b"\r\n" + first)

    def flood() -> None:
        chunk = b"x" * (1 << 20)
        if "chunked" in head:
            chunk = b"100000\r\n" + chunk + b"\r\n"
        try:
            for _ in range(rest >> 20):
                sock.sendall(chunk)
        except OSError:
            pass  # the server answered and closed: what we want

    sender = threading.Thread(target=flood, daemon=True)
    sender.start()
    try:
        line = b""
        while b"\r\n" not in line:
            got = sock.recv(4096)
            if not got:
                break
            line += got
    finally:
        elapsed = time.monotonic() - started
        sock.close()
        sender.join(timeout)
    return int(line.split(b" ", 2)[1]), elapsed


def _peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/self/status")


def test_oversized_and_unauthenticated_bodies_are_refused_before_they_are_read(served):
    base, h, ctx = served
    # a declared 100 MB body: 413 from the headers alone (nothing of the body sent)
    status, seconds = _raw(base, "PUT /api/config HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                 "Content-Length: 100000000\r\n")
    assert status == 413 and seconds < 5
    # a chunked (undeclared) body without a token: 401 before any of it is read
    status, _ = _raw(base, "PUT /api/config HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n",
                     b"10\r\n" + b"{" * 16 + b"\r\n")
    assert status == 401
    # with a token, a chunked body is cut off at the limit: 413
    token = h["admin"]["Authorization"]

    def chunks():
        for _ in range(CONFIG_BODY_BYTES // 65536 + 2):
            yield b" " * 65536

    r = httpx.put(f"{base}/api/config", content=chunks(), headers={"Authorization": token}, timeout=30)
    assert r.status_code == 413 and r.json()["error"] == "too_large"
    # memory stays flat under a stream of oversized unauthenticated bodies (the server is this process)
    before = _peak_rss_mb()
    for i in range(12):
        head = ("PUT /api/config HTTP/1.1\r\nHost: 127.0.0.1\r\n" + ("Content-Length: 20971520\r\n" if i % 2 else
                                                                      "Transfer-Encoding: chunked\r\n"))
        status, _ = _raw(base, head, rest=20 << 20)
        assert status == (413 if i % 2 else 401)
    assert _peak_rss_mb() - before < 60, "the server buffered refused bodies"
    assert not (ctx.settings.data_dir / "config.json").exists()


def test_deep_json_and_nul_are_400_and_422_never_500(served):
    base, h, ctx = served
    deep = "[" * 50_000 + '"\\u0000"' + "]" * 50_000
    for method, path in (("PUT", "/api/config"), ("POST", "/api/actions/sync"), ("POST", "/v1/work-items/retry")):
        r = httpx.request(method, base + path, content=deep if path == "/api/config" else deep[:20_000],
                          headers={**h["admin"], "Content-Type": "application/json"})
        assert r.status_code in (400, 413) and r.json()["error"] in ("too_deep", "too_large"), (path, r.text)
        unauthenticated = httpx.request(method, base + path, content=deep[:20_000],
                                        headers={"Content-Type": "application/json"})
        assert unauthenticated.status_code == 401, path
    r = httpx.put(f"{base}/api/config", headers=h["admin"], content="[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert r.status_code == 400 and str(MAX_DEPTH) in r.json()["message"]
    r = httpx.put(f"{base}/api/config", headers=h["admin"], json={"changes": {"firm.name": "a\u0000b"}, "version": "0"})
    assert r.status_code == 422 and "NUL" in r.json()["message"]
    assert httpx.get(f"{base}/api/status", headers=h["admin"]).status_code == 200  # still serving


def test_mcp_arguments_have_the_rest_bounds_and_json_rpc_errors(served):
    base, h, ctx = served
    url = f"{base}/mcp/full"
    outcomes = call_tools(url, h["admin"], [
        ("search", {"query": "Halvorsen " * 10_000}),
        ("list_failure_groups", {"limit": -1}),
        ("list_work_items", {"reason": "a\u0000b"}),
        ("retry_work_items", {"sttus": "failed"}),
        ("retry_work_items", {"dry_run": True}),
        ("retry_work_items", {"dry_run": True, "all": True}),
        ("search", {"query": "x", "limit": 10_000}),
        ("pipeline_status", {}),
    ])
    kinds = [kind for kind, _ in outcomes]
    assert kinds == ["rpc_error", "rpc_error", "rpc_error", "rpc_error", "tool_error", "ok", "rpc_error", "ok"], \
        outcomes
    for kind, detail in outcomes:
        if kind == "rpc_error":
            code, message = detail
            assert code == -32602 and "select" not in message.lower()
    assert "query" in outcomes[0][1][1] and "1000" in outcomes[0][1][1]
    assert "limit" in outcomes[1][1][1]
    assert "NUL" in outcomes[2][1][1]
    assert "sttus" in outcomes[3][1][1]
    assert "filter_required" in outcomes[4][1]
    assert outcomes[5][1]["count"] == 0 and outcomes[5][1]["filter"] == {}
    # the tools say they take nothing else
    from tests.integration.test_work_items_mcp import list_tools

    assert all(t.inputSchema.get("additionalProperties") is False for t in list_tools(url, h["admin"]))


def test_unknown_parameters_and_fields_are_refused(served):
    base, h, ctx = served
    r = httpx.post(f"{base}/v1/work-items/cancel?knd=convert", headers=h["operator"], json={"dry_run": True})
    assert r.status_code == 422 and r.json()["error"] == "unknown_parameter" and "knd" in r.json()["message"]
    r = httpx.get(f"{base}/api/runs?limt=5", headers=h["admin"])
    assert r.status_code == 422 and "limt" in r.json()["fields"]
    r = httpx.post(f"{base}/api/actions/sync", headers=h["admin"], json={"source_id": 1, "x": 1})
    assert r.status_code == 422 and "x" in r.json()["fields"]
    with ctx.db.engine.connect() as conn:
        from ki.store import runs

        assert runs.runs_page(conn, kinds=["sync"], status=None, limit=5, offset=0)[1] == 0
    r = httpx.post(f"{base}/v1/work-items/cancel", headers=h["operator"], json={"dry_run": True, "confirm": 1})
    assert r.status_code == 422
    # an empty filter needs all=true, dry run or not
    for body in ({"dry_run": True}, {"dry_run": False, "confirmation_token": "x"}):
        r = httpx.post(f"{base}/v1/work-items/cancel", headers=h["operator"], json=body)
        assert r.status_code == 422 and r.json()["error"] == "filter_required", r.text
    r = httpx.post(f"{base}/v1/work-items/cancel", headers=h["operator"], json={"dry_run": True, "all": True})
    assert r.status_code == 200 and r.json()["filter"] == {}
    r = httpx.post(f"{base}/v1/work-items/cancel?kind=convert", headers=h["operator"], json={"dry_run": True})
    assert r.status_code == 200 and r.json()["filter"] == {"kind": "convert"}
    assert httpx.get(f"{base}/login?ended=1").status_code == 200
    assert json.loads(httpx.get(f"{base}/healthz?x=1").text)["error"] == "unknown_parameter"
