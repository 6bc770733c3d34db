"""A loopback OpenAI-compatible model gateway for tests (stdlib ``ThreadingHTTPServer``).

DESIGN.md "Real components": the gateway client is tested against a real HTTP server
on 127.0.0.1 that plays scripted conversations and every fault a real gateway gives.

Usage::

    with GatewayStub([tool_call("lookup", {"q": "x"}), submit({"answer": "id-7"})]) as stub:
        client = GatewayClient(stub.url, "sk-test")
        ...
        stub.requests        # every request: path, headers (lower-case keys), body (parsed JSON)

Replies (one per request, in arrival order, shared by every endpoint):

* :func:`tool_call` / :func:`tool_calls` / :func:`submit` / :func:`text`: chat answers;
* :func:`status` (any HTTP error with an OpenAI error body), :func:`unauthorized` (401),
  :func:`forbidden` (403), :func:`model_not_found` (404), :func:`rate_limited` (429),
  :func:`insufficient_quota` (429 with ``insufficient_quota``), :func:`unavailable` (503),
  :func:`server_error` (500);
* :func:`malformed` (200 with a body that is not JSON), :func:`sleep` (answer late: a timeout);
* :func:`auto`: the natural answer (embeddings: deterministic vectors; chat: plain text).

When the script is empty, ``default`` answers (a Reply, or ``callable(request) -> Reply``);
``fail_first(n, reply)`` makes the first ``n`` requests answer ``reply`` whatever the script says.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.helpers.loopback import LoopbackServer, QuietHandler

SUBMIT = "submit_result"
EMBED_DIM = 8


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    kind: ``message`` (chat choice with ``content``/``calls``), ``status`` (HTTP error with ``body``),
    ``raw`` (status + raw bytes), ``auto`` (natural answer). ``delay`` seconds pass before answering.
    """

    kind: str
    status: int = 200
    content: str | None = None
    calls: tuple[tuple[str, str], ...] = ()
    body: Any = None
    raw: bytes | None = None
    delay: float = 0.0
    headers: dict[str, str] | None = None  # extra response headers (e.g. ``Retry-After``)


@dataclass
class RecordedRequest:
    """What the stub received, and when (``at``: monotonic seconds)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    at: float = field(default_factory=time.monotonic)

    @property
    def trace(self) -> tuple[str | None, str | None, str | None]:
        """(X-Ki-Doc, X-Ki-Stage, X-Ki-Trace)."""
        return self.headers.get("x-ki-doc"), self.headers.get("x-ki-stage"), self.headers.get("x-ki-trace")


def _args(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def tool_calls(*calls: tuple[str, Any]) -> Reply:
    """An assistant turn calling several tools; each ``(name, args)`` with args a dict or raw JSON text."""
    return Reply("message", calls=tuple((name, _args(args)) for name, args in calls))


def tool_call(name: str, args: Any) -> Reply:
    """An assistant turn calling one tool."""
    return tool_calls((name, args))


def submit(args: Any) -> Reply:
    """An assistant turn calling ``submit_result`` with ``args`` (dict or raw JSON text)."""
    return tool_call(SUBMIT, args)


def text(content: str) -> Reply:
    """A plain-text assistant answer (no tool call)."""
    return Reply("message", content=content)


def auto() -> Reply:
    """The natural answer for the endpoint."""
    return Reply("auto")


def status(code: int, message: str = "error", *, err_type: str | None = None, err_code: str | None = None) -> Reply:
    """HTTP ``code`` with an OpenAI-style error body."""
    return Reply("status", status=code, body={"error": {"message": message, "type": err_type, "code": err_code}})


def unauthorized() -> Reply:
    return status(401, "Incorrect API key provided.", err_type="invalid_request_error", err_code="invalid_api_key")


def forbidden() -> Reply:
    return status(403, "This key is not allowed to access this model.", err_type="permission_error")


def model_not_found(model: str = "the model") -> Reply:
    return status(404, f"The model `{model}` does not exist or you do not have access to it.",
                  err_type="invalid_request_error", err_code="model_not_found")


def rate_limited() -> Reply:
    return status(429, "Rate limit reached, retry after 1s.", err_type="requests", err_code="rate_limit_exceeded")


def insufficient_quota() -> Reply:
    return status(429, "You exceeded your current quota, please check your plan and billing details.",
                  err_type="insufficient_quota", err_code="insufficient_quota")


def unavailable() -> Reply:
    return status(503, "upstream overloaded")


def server_error() -> Reply:
    return status(500, "internal error")


def malformed() -> Reply:
    """200 with a truncated, non-JSON body."""
    return Reply("raw", status=200, raw=b'{"id": "chatcmpl-x", "choices": [{"message": {"role": "assis')


def sleep(seconds: float, then: Reply | None = None) -> Reply:
    """Answer ``then`` (default: plain text) only after ``seconds``: past the client timeout, a timeout."""
    base = then or text("late")
    return Reply(base.kind, status=base.status, content=base.content, calls=base.calls, body=base.body,
                 raw=base.raw, delay=seconds)


def vector_for(text_: str) -> list[float]:
    """The deterministic embedding the stub returns for ``text_``."""
    digest = hashlib.sha256(text_.encode("utf-8")).digest()
    return [round(b / 255.0, 6) for b in digest[:EMBED_DIM]]


@dataclass(eq=False)
class GatewayStub(LoopbackServer):
    """The loopback gateway. ``url`` is its root (``http://127.0.0.1:<port>``)."""

    thread_name = "gateway-stub"

    script: Iterable[Reply] = ()
    default: Reply | Callable[[RecordedRequest], Reply] | None = None
    prompt_tokens: int = 11
    completion_tokens: int = 7
    requests: list[RecordedRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        LoopbackServer.__init__(self)
        self._queue: deque[Reply] = deque(self.script)
        self._lock = threading.Lock()
        self._fail_left = 0
        self._fail_reply: Reply | None = None

    # -- control -----------------------------------------------------------------------------

    def push(self, *replies: Reply) -> None:
        """Append replies to the script."""
        with self._lock:
            self._queue.extend(replies)

    def fail_first(self, n: int, reply: Reply | None = None) -> None:
        """The next ``n`` requests answer ``reply`` (default 503) before the script is consulted."""
        with self._lock:
            self._fail_left = n
            self._fail_reply = reply or unavailable()

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.0"

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                raw = self.read_body()
                try:
                    body = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = None
                req = RecordedRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body, raw)
                reply = stub._next(req)
                if reply.delay and stub.pause(reply.delay):
                    return
                self.send_bytes(*stub._render(reply, req), headers=reply.headers)

        return Handler

    def __enter__(self) -> GatewayStub:
        return self.start()

    # -- answering -----------------------------------------------------------------------------

    def _next(self, req: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(req)
            if self._fail_left > 0:
                self._fail_left -= 1
                assert self._fail_reply is not None
                return self._fail_reply
            if self._queue:
                return self._queue.popleft()
            default = self.default
        if default is None:
            return auto()
        return default(req) if callable(default) else default

    def _usage(self, completion: bool = True) -> dict[str, int]:
        ct = self.completion_tokens if completion else 0
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": ct,
                "total_tokens": self.prompt_tokens + ct}

    def _render(self, reply: Reply, req: RecordedRequest) -> tuple[int, bytes]:
        if reply.kind == "raw":
            return reply.status, reply.raw or b""
        if reply.kind == "status":
            return reply.status, json.dumps(reply.body).encode()
        model = (req.body or {}).get("model", "stub-model") if isinstance(req.body, dict) else "stub-model"
        if req.path.endswith("/embeddings"):
            inputs = (req.body or {}).get("input") or []
            inputs = [inputs] if isinstance(inputs, str) else inputs
            data = [{"object": "embedding", "index": i, "embedding": vector_for(t)} for i, t in enumerate(inputs)]
            data.reverse()  # the client must order by index, not by position
            return 200, json.dumps({"object": "list", "data": data, "model": model,
                                    "usage": {"prompt_tokens": self.prompt_tokens,
                                              "total_tokens": self.prompt_tokens}}).encode()
        if reply.kind == "auto":
            reply = text("(the stub has no scripted answer)")
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.calls:
            message["tool_calls"] = [
                {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                 "function": {"name": name, "arguments": args}}
                for name, args in reply.calls
            ]
        body = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if reply.calls else "stop"}],
            "usage": self._usage(),
        }
        return reply.status, json.dumps(body).encode()


def tool_messages(request: RecordedRequest) -> list[str]:
    """The ``tool`` messages of a recorded chat request (what the loop fed back: results, errors, rejections)."""
    return [m["content"] for m in request.body["messages"] if m.get("role") == "tool"]


def model_gateway(monkeypatch: Any) -> Any:
    """A generator for a pytest fixture: a :class:`GatewayStub` that ki's model stages use (``KI_LLM_BASE_URL``
    on it, ``KI_LLM_MODEL`` = ``stub-model``) — ``yield from model_gateway(monkeypatch)``."""
    with GatewayStub() as stub:
        monkeypatch.setenv("KI_LLM_BASE_URL", stub.url)
        monkeypatch.setenv("KI_LLM_MODEL", "stub-model")
        yield stub
