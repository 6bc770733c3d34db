"""The headers every response of ``ki serve`` carries, added by a plain ASGI middleware.

DESIGN.md "The operator surface is one app": a strict Content-Security-Policy (nothing but the app's own origin:
the page loads no CDN asset), ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin``,
``X-Frame-Options: DENY``; every ``/api/`` answer is ``Cache-Control: no-store``. A header the route set itself is
kept. Plain ASGI (it only rewrites the start message): Starlette's ``BaseHTTPMiddleware`` runs each request in a task
group with memory streams, which was a large share of the server's CPU per request under 32 concurrent clients
(``bench/api_concurrent.py``, profiled).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
                               "base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}
_ENCODED = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in SECURITY_HEADERS.items()]
_NO_STORE = (b"cache-control", b"no-store")


class SecurityHeaders:
    """ASGI middleware adding :data:`SECURITY_HEADERS` (and ``Cache-Control: no-store`` under ``/api/``) to every
    HTTP response start that does not already name them."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = [*_ENCODED, _NO_STORE] if scope.get("path", "").startswith("/api/") else _ENCODED

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                present = {name.lower() for name, _ in headers}
                headers.extend(h for h in extra if h[0] not in present)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
