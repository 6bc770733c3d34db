"""Scripted outages of the loopback gateway and Docling stubs (issue 14 item 9, ``ki.adapters.breaker``).

* :func:`stage_answer`: a valid minimal answer for each model stage (by the ``X-Ki-Stage`` header), so
  a whole ``ki insert`` runs its model stages on :class:`~tests.helpers.gateway_stub.GatewayStub`;
* :class:`Outage`: down from :meth:`Outage.start` for ``seconds`` (or until :meth:`Outage.stop`); counts
  the requests that reached the dependency while it was down and notes when the first one succeeded
  after it came back;
* :func:`gateway_default`: the stub's ``default`` answering 503 during the outage, else :func:`stage_answer`;
* :class:`DoclingOutage`: the same for :class:`~tests.helpers.docling_stub.DoclingStub` (every request is
  answered 503 while down);
* :class:`SocketOutage`: a loopback server down for real: its listening socket closed (connections are
  refused, as when a gateway process dies), then listening again on the same port; what the server
  saw around it is read from its own timestamps;
* :func:`note_estate` and :func:`wait_until`: a small estate of one-line notes, and a bounded poll.

Used by ``tests/integration/test_breaker.py`` and ``bench/chaos.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.gateway_stub import RecordedRequest, Reply, submit, unavailable


def note_estate(root: Path, n: int, *, folders: int, folder: str, name: str, text: str) -> Path:
    """``n`` one-line text files under ``folders`` sub-folders of ``root``; ``folder``, ``name`` and ``text`` are
    format strings of ``i`` (the file's number, from 0) and ``f`` (its folder's). Returns ``root``."""
    for i in range(n):
        sub = root / folder.format(i=i, f=i % folders)
        sub.mkdir(parents=True, exist_ok=True)
        (sub / name.format(i=i, f=i % folders)).write_text(text.format(i=i, f=i % folders) + "\n", encoding="utf-8")
    return root


def wait_until(condition: Callable[[], object], seconds: float, step: float = 0.05) -> bool:
    """Poll ``condition`` every ``step`` s for up to ``seconds`` s; whether it held (checked once more at the end)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return bool(condition())


#: A minimal valid answer per model stage (the rules of each stage's validators hold for it).
STAGE_ANSWERS: dict[str, dict] = {
    "classify_matter": {"matter_id": None, "confidence": 0.1, "evidence": "stub"},
    "relate": {"identity": "new", "relations": [], "reasoning": "stub"},
    "extract_metadata": {"doc_type": None, "reasoning": "stub"},
    "extract_decisions": {"entries": [], "summary": ""},
}


def gateway_refusing(ctx, shown: list, dependency: str = "gateway") -> Callable[[], bool]:
    """A :func:`wait_until` condition: the recorded pause of ``dependency`` (the gateway unless told) says its
    port refuses TCP connections (``ki.adapters.breaker``'s connect probe); ``shown`` receives its pauses at each
    check."""
    from ki.store.pauses import read_pauses

    def refusing() -> bool:
        with ctx.db.engine.connect() as conn:
            shown[:] = [p for p in read_pauses(conn) if p.dependency == dependency]
        return bool(shown) and "refuses TCP connections" in shown[0].reason

    return refusing


def stage_answer(req: RecordedRequest) -> Reply:
    """The submission for the stage the request names (``X-Ki-Stage``); embeddings get their vectors."""
    if req.path.endswith("/embeddings"):
        return Reply("auto")
    return submit(STAGE_ANSWERS.get(req.trace[1] or "", STAGE_ANSWERS["classify_matter"]))


@dataclass
class Outage:
    """A dependency down from :meth:`start` for ``seconds``, or until :meth:`stop` when ``seconds`` is
    None (monotonic times; thread-safe).

    Attributes:
        dead_requests: requests that arrived while it was down.
        ok_requests: requests answered while it was up.
        ended_at / first_ok_after: when it came back, and when the first request succeeded after that.
    """

    seconds: float | None = None
    started_at: float | None = None
    stopped_at: float | None = None
    dead_requests: int = 0
    ok_requests: int = 0
    first_ok_after: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def start(self) -> None:
        """Take the dependency down now."""
        with self._lock:
            self.started_at = time.monotonic()

    def stop(self) -> None:
        """Bring it back now."""
        with self._lock:
            self.stopped_at = time.monotonic()

    @property
    def ended_at(self) -> float | None:
        if self.stopped_at is not None:
            return self.stopped_at
        if self.started_at is None or self.seconds is None:
            return None
        return self.started_at + self.seconds

    def down(self) -> bool:
        """Whether a request arriving now meets the outage (and count it)."""
        now = time.monotonic()
        with self._lock:
            end = self.ended_at
            if self.started_at is not None and self.started_at <= now and (end is None or now < end):
                self.dead_requests += 1
                return True
            self.ok_requests += 1
            if end is not None and self.first_ok_after is None:
                self.first_ok_after = now
            return False

    def resume_delay(self) -> float | None:
        """Seconds from the end of the outage to the first request that succeeded after it."""
        if self.first_ok_after is None or self.ended_at is None:
            return None
        return self.first_ok_after - self.ended_at


def gateway_default(outage: Outage, *, start_after: int | None = None,
                    retry_after: int | None = None) -> Callable[[RecordedRequest], Reply]:
    """A :class:`GatewayStub` ``default``: 503 while ``outage`` is down, else :func:`stage_answer`.
    ``start_after``: start the outage when that many requests have been answered; ``retry_after``: the
    503s carry ``Retry-After: <seconds>``."""
    down = unavailable()
    if retry_after is not None:
        down = Reply(down.kind, status=down.status, body=down.body, headers={"Retry-After": str(retry_after)})
    answered = [0]
    lock = threading.Lock()

    def reply(req: RecordedRequest) -> Reply:
        with lock:
            answered[0] += 1
            if start_after is not None and answered[0] > start_after and outage.started_at is None:
                outage.start()
        return down if outage.down() else stage_answer(req)

    return reply


class DoclingOutage:
    """Wraps a started :class:`DoclingStub`: while ``outage`` is down every request is answered 503
    (the stub's scenario ``http`` on ``any``), otherwise the ``normal`` scenario is served."""

    def __init__(self, stub, outage: Outage, normal) -> None:
        from tests.helpers.docling_stub import Scenario

        self.stub, self.outage = stub, outage
        self._normal, self._down = normal, Scenario(outcome="http", http_status=503, on="any")
        original = stub._record

        def record(request) -> None:  # every request passes here first (DoclingStub._record)
            stub.scenario = self._down if outage.down() else self._normal
            original(request)

        stub._record = record
        stub.scenario = normal


class SocketOutage:
    """Takes a started :class:`~tests.helpers.loopback.LoopbackServer` down by closing its listening
    socket (:meth:`down`: new connections are refused) and brings it back on the same port
    (:meth:`up`). Times are monotonic seconds, comparable with ``RecordedRequest.at`` and
    ``server.accepted``."""

    def __init__(self, server) -> None:
        self.server = server
        self.port = server.port
        self.down_at: float | None = None
        self.up_at: float | None = None

    def down(self) -> None:
        """Close the listening socket now (requests already being answered finish). ``down_at`` is when the
        socket is closed: until ``stop()`` returns the server may still accept (it finishes its serve loop
        first, which takes longer on a loaded machine), and such a request is no request "while down"."""
        self.server.stop()
        self.down_at = time.monotonic()

    def up(self, *, bind_seconds: float = 10.0) -> None:
        """Listen on the same port again (retrying the bind for up to ``bind_seconds``)."""
        deadline = time.monotonic() + bind_seconds
        while True:
            try:
                self.server.start(self.port)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.up_at = time.monotonic()

    def accepted_while_down(self) -> int:
        """How many TCP connections the server accepted between :meth:`down` and :meth:`up`: 0 when the socket
        was really closed. (A request's own arrival time can fall after ``down_at`` on a loaded machine when its
        connection was accepted before: the handler thread reads it late. Such a request was already under way,
        so accepts, not arrivals, say whether the socket was closed.)"""
        assert self.down_at is not None
        end = self.up_at if self.up_at is not None else float("inf")
        return sum(1 for t in self.server.accepted if self.down_at <= t < end)

    def first_after_up(self, times: Sequence[float]) -> float | None:
        """Seconds from :meth:`up` to the first of ``times`` after it (None: none yet)."""
        after = [t for t in times if self.up_at is not None and t >= self.up_at]
        return min(after) - self.up_at if after else None

    def connects_until_first_request(self, times: Sequence[float]) -> int:
        """TCP connections the server accepted from :meth:`up` to the first request of ``times``, that
        request's own connection included (so 1 + the probes' bare connects)."""
        first = self.first_after_up(times)
        if first is None or self.up_at is None:
            return 0
        return sum(1 for t in self.server.accepted if self.up_at <= t <= self.up_at + first)
