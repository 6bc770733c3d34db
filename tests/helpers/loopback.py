"""Loopback HTTP servers that stand in for outside services (gateway, Docling Serve, a fault proxy, JSON).

DESIGN.md "Real components": the clients are tested against real HTTP servers on 127.0.0.1.
:class:`LoopbackServer` is the shared plumbing: a ``ThreadingHTTPServer`` on a free port, served from
a daemon thread, quiet about clients that hang up (timeout tests), stoppable while a handler is
waiting (:meth:`LoopbackServer.pause` returns early once :meth:`LoopbackServer.stop` is called).
A subclass says how requests are answered by returning a handler class from :meth:`handler_class`.
A stopped server can be started again on the same port (``start(port)``: a dependency whose socket
closed and came back); :attr:`LoopbackServer.accepted` records when each TCP connection was accepted.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    accepted: list[float]  # the LoopbackServer's list: monotonic times of accepted connections

    def get_request(self) -> Any:
        request = super().get_request()
        self.accepted.append(time.monotonic())
        return request

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (timeout tests) closes its socket: not worth a traceback."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, OSError)):
            super().handle_error(request, client_address)


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and can answer with bytes in one call."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
        return

    def read_body(self) -> bytes:
        """The request body (``Content-Length`` bytes; empty without one)."""
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send_bytes(self, code: int, payload: bytes, content_type: str = "application/json",
                   headers: dict[str, str] | None = None) -> None:
        """Status, ``Content-Type``, ``Content-Length`` (and ``headers``), then ``payload`` (not for HEAD).
        A client that already hung up is ignored."""
        try:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass


class LoopbackServer:
    """A threaded HTTP server on ``127.0.0.1``; use as a context manager or :meth:`start` / :meth:`stop`.

    Subclasses implement :meth:`handler_class` (called once per start; the handler usually reaches
    the server object through a closure or a class attribute) and may set :attr:`thread_name`.
    """

    thread_name = "loopback-server"

    def __init__(self) -> None:
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        #: monotonic times of every TCP connection accepted (across restarts), whether or not a request followed
        self.accepted: list[float] = []

    def handler_class(self) -> type[BaseHTTPRequestHandler]:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (the server must be started)."""
        assert self._server is not None, f"{type(self).__name__} not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def port(self) -> int:
        """The port it listens (or last listened) on."""
        assert self._server is not None, f"{type(self).__name__} not started"
        return int(self._server.server_address[1])

    def start(self, port: int = 0) -> LoopbackServer:
        """Listen on ``port`` (0: a free one; a stopped server's port to bring it back) and serve."""
        self._stopping.clear()
        self._server = _QuietServer(("127.0.0.1", port), self.handler_class())
        self._server.accepted = self.accepted
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def pause(self, seconds: float) -> bool:
        """Wait up to ``seconds`` inside a handler; True when the server is stopping meanwhile."""
        if seconds <= 0:
            return self._stopping.is_set()
        return self._stopping.wait(min(seconds, 3600.0))

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class JsonServer(LoopbackServer):
    """Fixed JSON per path (GET), e.g. gateway listings in console tests.

    ``with JsonServer({"/v1/models": {...}}) as s: s.url``; unknown paths answer 404; ``s.hits`` lists
    the paths asked for.
    """

    thread_name = "json-server"

    def __init__(self, routes: dict[str, Any]):
        super().__init__()
        self.routes = routes
        self.hits: list[str] = []

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server API
                outer.hits.append(self.path)
                body = outer.routes.get(self.path.split("?", 1)[0])
                data = json.dumps(body if body is not None else {"error": "not found"}).encode()
                self.send_bytes(200 if body is not None else 404, data)

        return Handler
