"""Bounded requests at the edge: size limits, authentication before the body, nesting depth and NUL.

Every request passes :class:`RequestGuard` before any route (or the MCP SDK) runs:

1. a NUL in the path or the query string → 422 (PostgreSQL text and jsonb cannot hold U+0000);
2. a declared ``Content-Length`` over the route's limit (:func:`body_limit`) → 413, nothing read;
3. a request carrying a body to an authenticated surface (``/api/``, ``/v1/``, ``/mcp``) without a
   live token (bearer header or the page's session cookie) → 401, nothing read;
4. the body is streamed and refused with 413 as soon as it passes the limit (a chunked body declares
   no length);
5. JSON nested deeper than :data:`MAX_DEPTH` → 400 (no parser recursion: the depth is counted on the
   bytes), a NUL in the body (raw or a ``\\u0000`` escape) → 422.

On ``/mcp`` the refusals of a read body are JSON-RPC error objects (``-32600`` for nesting, ``-32602``
for a NUL, with the request's id), so an MCP client keeps its session. Every other refusal has the
API's error shape (``ki.api.schemas.ErrorBody``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from urllib.parse import unquote_to_bytes

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ki.core.json_strings import strings

#: Deepest JSON nesting accepted (arrays and objects).
MAX_DEPTH = 32
#: Body limits in bytes: the configuration edit, an MCP message (large enough that an over-long argument
#: is refused by the tool's own bounds as a JSON-RPC error), the sign-in form, everything else.
CONFIG_BODY_BYTES = 1 << 20
MCP_BODY_BYTES = 1 << 20
FORM_BODY_BYTES = 4 << 10
DEFAULT_BODY_BYTES = 64 << 10
#: Path prefixes whose requests need a token: a body sent there is read only once the token is known.
AUTHENTICATED_PREFIXES = ("/api/", "/v1/", "/mcp")

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")

#: ``authenticated(authorization, cookie)`` → whether they name a live token (runs in a worker thread).
Authenticator = Callable[[str | None, str | None], bool]


def body_limit(method: str, path: str) -> int:
    """The most bytes a request body to ``method path`` may carry."""
    if path == "/api/config":
        return CONFIG_BODY_BYTES
    if path.startswith("/mcp"):
        return MCP_BODY_BYTES
    if path in ("/login", "/logout"):
        return FORM_BODY_BYTES
    return DEFAULT_BODY_BYTES


def json_depth(raw: bytes) -> int:
    """The nesting depth of JSON-like ``raw`` (brackets outside strings), counted without recursion."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return raw.count(b"[") + raw.count(b"{")
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for b in brackets:
        depth = depth + 1 if b in (0x5B, 0x7B) else max(depth - 1, 0)
        deepest = max(deepest, depth)
    return deepest


def has_nul(raw: bytes) -> bool:
    """A raw NUL byte, or a JSON ``\\u0000`` escape that decodes to one (not an escaped backslash).
    Call it on a body whose :func:`json_depth` is bounded."""
    if b"\x00" in raw:
        return True
    if b"\\u0000" not in raw:
        return False
    try:
        return any("\x00" in s for s in strings(json.loads(raw)))
    except ValueError:
        return False  # not JSON: the route's own validation answers


def _has_body(scope: Scope) -> bool:
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            return value.strip() not in (b"", b"0")
        if name == b"transfer-encoding":
            return True
    return False


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers") or ():
        if name == wanted:
            return value.decode("latin-1")
    return None


def _cookie(scope: Scope, name: str) -> str | None:
    raw = _header(scope, b"cookie")
    if not raw:
        return None
    for part in raw.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value.strip().strip('"') or None
    return None


class _TooLarge(Exception):
    pass


class RequestGuard:
    """ASGI middleware applying the module doc's checks to every HTTP request.

    Args:
        app: the wrapped app.
        authenticated: :data:`Authenticator` (bearer header value, session cookie value) → live or not.
        cookie_name: the page's session cookie.
    """

    def __init__(self, app: ASGIApp, authenticated: Authenticator, cookie_name: str):
        self.app = app
        self.authenticated = authenticated
        self.cookie_name = cookie_name

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if b"\x00" in unquote_to_bytes(scope.get("raw_path") or b"") or "\x00" in path \
                or b"\x00" in unquote_to_bytes(scope.get("query_string") or b""):
            await _answer(send, 422, "invalid_request", "the request contains a NUL character (U+0000), which no "
                                                        "text field can hold")
            return
        limit = body_limit(scope.get("method", "GET"), path)
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await _answer(send, 413, "too_large", f"the request body is {declared} bytes; {path} accepts at most "
                                                  f"{limit}")
            return
        if not _has_body(scope):
            await self.app(scope, receive, send)
            return
        if path.startswith(AUTHENTICATED_PREFIXES):
            authorization, cookie = _header(scope, b"authorization"), _cookie(scope, self.cookie_name)
            if not await anyio.to_thread.run_sync(lambda: self.authenticated(authorization, cookie)):
                await _answer(send, 401, "unauthenticated", "this request needs a live token: send "
                              "'Authorization: Bearer <token>' (make one with `ki token create`)",
                              headers=[(b"www-authenticate", b'Bearer realm="ki"')])
                return
        try:
            body = await _read(receive, limit)
        except _TooLarge:
            await _answer(send, 413, "too_large", f"the request body is over the {limit} bytes {path} accepts")
            return
        refusal = _refusal(body, mcp=path.startswith("/mcp"))
        if refusal is not None:
            await refusal(send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _read(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _refusal(body: bytes, *, mcp: bool) -> Callable[[Send], object] | None:
    """How to refuse ``body`` (a coroutine function of ``send``), or None when it passes."""
    if json_depth(body) > MAX_DEPTH:
        message = f"the JSON body is nested deeper than {MAX_DEPTH} levels"
        if mcp:
            return lambda send: _rpc_error(send, 400, None, -32600, message)
        return lambda send: _answer(send, 400, "too_deep", message)
    if has_nul(body):
        message = "the request contains a NUL character (U+0000), which no text field can hold"
        if mcp:
            return lambda send: _rpc_error(send, 200, _rpc_id(body), -32602, message)
        return lambda send: _answer(send, 422, "invalid_request", message)
    return None


def _rpc_id(body: bytes) -> object:
    try:
        message = json.loads(body.replace(b"\x00", b""))
    except ValueError:
        return None
    value = message.get("id") if isinstance(message, dict) else None
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


async def _answer(send: Send, status: int, code: str, message: str,
                  headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await _send_json(send, status, {"error": code, "message": message}, headers or [])


async def _rpc_error(send: Send, status: int, request_id: object, code: int, message: str) -> None:
    await _send_json(send, status, {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}},
                     [])


async def _send_json(send: Send, status: int, payload: dict, headers: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *headers]})
    await send({"type": "http.response.body", "body": body})
