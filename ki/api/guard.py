"""Input no part of ki can store: NUL characters, refused at the edge with a 422.

PostgreSQL text and jsonb cannot hold U+0000, so a query parameter, path segment or JSON string
carrying one would reach the database and fail there (found by the schemathesis fuzzer: a 500 for
``?error_class=%00``). :class:`RejectNul` answers such a request with the API's error shape before
any route runs — every route, present and future, without a check of its own.
"""

from __future__ import annotations

import json
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: The API's answer (``ki.api.schemas.ErrorBody``).
BODY = json.dumps({"error": "invalid_request", "message": "the request contains a NUL character (U+0000), "
                   "which no text field can hold"}).encode()


def _has_nul(raw: bytes) -> bool:
    """A raw NUL byte, or a JSON ``\\u0000`` escape that decodes to one (not an escaped backslash)."""
    if b"\x00" in raw:
        return True
    if b"\\u0000" not in raw:
        return False
    try:
        value = json.loads(raw)
    except ValueError:
        return False  # not JSON: the route's own validation answers
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


class RejectNul:
    """ASGI middleware: 422 for a NUL in the path, the query string or the body (raw or ``\\u0000``)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if b"\x00" in unquote_to_bytes(scope.get("raw_path") or b"") or "\x00" in scope.get("path", "") \
                or b"\x00" in unquote_to_bytes(scope.get("query_string") or b""):
            await self._refuse(send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        if _has_nul(body):
            await self._refuse(send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _refuse(send: Send) -> None:
        await send({"type": "http.response.start", "status": 422,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]})
        await send({"type": "http.response.body", "body": BODY})
