"""The breaker's probe begins with a TCP connect, and calls fail fast while paused (``ki.adapters.breaker``).

Real sockets on 127.0.0.1: a port bound but not listening refuses connections (a gateway process that
is down), the same socket listening accepts them. While the port refuses, a due probe is a bare TCP
connect only, repeated every ``connect_probe_seconds``, and nothing is claimed; once it accepts, the
probe's request goes at once; a failing request then puts the HTTP probes on their doubling backoff.
The gateway client sends nothing while the gateway's breaker is open, except from the thread holding
the probe (checked on the loopback gateway's own request log). Cost: about 2 s.
"""

from __future__ import annotations

import socket
import threading

import pytest

from ki.adapters import breaker
from ki.adapters.agents.gateway import GatewayClient
from ki.adapters.breaker import BreakerPolicy, Breakers, Pause, dependency_endpoints, endpoint_of, port_accepts
from ki.config.settings import KiConfig
from ki.core.errors import GatewayUnavailable
from tests.helpers.clock import ManualClock
from tests.helpers.gateway_stub import GatewayStub, text

POLICY = BreakerPolicy(failures=3, probe_seconds=0.05, probe_max_seconds=0.4, connect_probe_seconds=0.1)


@pytest.fixture
def port():
    """A socket bound to a free port of 127.0.0.1, not listening yet (connections are refused)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock
    finally:
        sock.close()


class Sink:
    def __init__(self) -> None:
        self.pauses: list[Pause] = []

    def opened(self, pause: Pause) -> None:
        self.pauses.append(pause)

    def closed(self, dependency: str) -> None:
        self.pauses.append(None)


def _open(b: Breakers, dependency: str = "gateway") -> None:
    for _ in range(3):
        b.failed(dependency, "gateway transport error: ConnectError")


def _in_thread(fn):
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(10)
    return out[0]


@pytest.mark.parametrize(("url", "address"), [
    ("http://127.0.0.1:4000", ("127.0.0.1", 4000)),
    ("http://litellm:4000/v1/", ("litellm", 4000)),
    ("https://gw.example.com/v1", ("gw.example.com", 443)),
    ("http://gw.example.com", ("gw.example.com", 80)),
    ("", None), (None, None), ("not a url", None), ("http://gw:port/", None),
])
def test_the_address_a_probe_connects_to(url, address):
    assert endpoint_of(url) == address


def test_dependency_endpoints_follow_the_configuration():
    config = KiConfig.model_validate({"components": {"docling_url": "http://127.0.0.1:5001",
                                                     "opensearch_url": "https://search:9200"}})
    assert dependency_endpoints(config, gateway_url="http://gw:4000/v1") == {
        "gateway": ("gw", 4000), "docling": ("127.0.0.1", 5001), "opensearch": ("search", 9200)}
    assert dependency_endpoints(KiConfig(), gateway_url="") == {}


def test_port_accepts_a_listening_socket_only(port):
    address = port.getsockname()
    assert not port_accepts(address, 1.0)  # bound, not listening: refused
    port.listen()
    assert port_accepts(address, 1.0)
    assert not port_accepts(("no-such-host.invalid", 80), 1.0)  # DNS failure: False, never raises


def test_while_the_port_refuses_probes_are_tcp_connects_then_the_request_goes_at_once(port):
    clock = ManualClock()
    b, sink = Breakers(POLICY, clock=clock), Sink()
    b.attach(sink)
    address = port.getsockname()
    b.locate({"gateway": address})
    _open(b)
    assert not b.try_probe("gateway")  # not due (0.05 s)
    clock.advance(0.06)
    assert not b.try_probe("gateway")  # due: the connect is refused, no probe is handed out
    (pause,) = b.pauses()
    assert pause.probes == 0 and pause.reason.endswith(f"{address[0]}:{address[1]} refuses TCP connections")
    recorded = sink.pauses[-1].next_probe_at  # the next connect's time, recorded for ki status
    assert abs((recorded - pause.next_probe_at).total_seconds()) < 0.05
    clock.advance(0.05)
    assert not b.try_probe("gateway")  # the next connect waits connect_probe_seconds (0.1 s)
    clock.advance(0.06)
    assert not b.try_probe("gateway")  # refused again
    port.listen()
    clock.advance(0.11)
    assert b.try_probe("gateway")  # the port accepts: the probe (a request) goes at once
    assert not _in_thread(lambda: b.try_probe("gateway"))  # one probe at a time
    b.failed("gateway", "gateway answered HTTP 503")  # the request failed: HTTP backoff from here
    (pause,) = b.pauses()
    assert pause.probes == 1 and "refuses" not in pause.reason
    clock.advance(0.06)
    assert not b.try_probe("gateway")  # delay(1) = 0.1 s
    clock.advance(0.06)
    assert b.try_probe("gateway")  # the connect succeeds again, the probe goes
    b.end_probe("gateway")  # nothing to claim: the port was seen open just now, no new connect needed
    assert b.try_probe("gateway")
    b.succeeded("gateway")
    assert b.open_dependencies() == frozenset()
    (episode,) = b.episodes
    assert (episode.connects, episode.connects_refused, episode.probes) == (4, 2, 1)
    assert episode.faults == 4 and episode.requests == 4 and episode.ended is not None
    assert "4 requests met the outage, 0 calls failed fast, 4 TCP connects (2 refused)" in episode.describe()


def test_without_an_address_the_probe_is_the_request():
    clock = ManualClock()
    b = Breakers(POLICY, clock=clock)
    _open(b, "docling")
    clock.advance(0.06)
    assert b.try_probe("docling")
    assert list(b.episodes) == [] and b.pauses()[0].probes == 0


def test_a_paused_call_fails_fast_except_from_the_probing_thread():
    clock = ManualClock()
    b = Breakers(POLICY, clock=clock)
    b.attach(Sink(), probed={"gateway"})
    assert b.allows("gateway")
    _open(b)
    assert not b.allows("gateway")
    b.failed("gateway", "gateway paused")  # the fast-failed call's row is reported: no news
    assert not _in_thread(lambda: b.allows("gateway"))
    b.failed("gateway", "gateway paused")
    clock.advance(0.06)
    assert b.try_probe("gateway")  # no address: the probe is the request itself
    assert b.allows("gateway")  # the probing thread may call
    assert not _in_thread(lambda: b.allows("gateway"))  # another worker may not
    _in_thread(lambda: b.failed("gateway", "gateway paused"))  # not the prober: no news
    assert b.pauses()[0].probes == 0
    b.failed("gateway", "gateway answered HTTP 503")  # the probe's request failed
    assert b.pauses()[0].probes == 1
    b.succeeded("gateway")
    assert b.allows("gateway")
    (episode,) = b.episodes
    # 3 requests opened it, 3 calls failed fast (their rows reported too), 1 probe request
    assert (episode.failed_fast, episode.faults, episode.requests, episode.probes) == (3, 7, 4, 1)


def test_without_claims_that_probe_a_paused_call_still_goes():
    b = Breakers(POLICY)
    _open(b)
    assert b.allows("gateway")  # nothing attached: no probe would ever close it
    b.attach(Sink(), probed={"docling"})
    assert b.allows("gateway")  # this process's stages do not need the gateway
    b.attach(Sink(), probed={"gateway"})
    assert not b.allows("gateway")
    b.attach(None)  # the run ended
    assert b.allows("gateway") and b.open_dependencies() == {"gateway"}


def test_the_gateway_client_sends_nothing_while_paused():
    with GatewayStub(default=text("hello")) as stub:
        client = GatewayClient(stub.url, "sk-test", timeout_seconds=10)
        try:
            breaker.BREAKERS.attach(Sink(), probed={breaker.GATEWAY})  # as a run's ClaimGate does
            assert client.chat(model="m", messages=[{"role": "user", "content": "hi"}]).content == "hello"
            for _ in range(3):
                breaker.BREAKERS.failed(breaker.GATEWAY, "gateway transport error: ConnectError")
            with pytest.raises(GatewayUnavailable, match="paused") as err:
                client.chat(model="m", messages=[{"role": "user", "content": "hi"}])
            assert err.value.infrastructure.startswith("gateway paused")
            with pytest.raises(GatewayUnavailable):
                client.embed(model="e", inputs=["a", "b"])
            assert stub.count == 1  # neither call reached the gateway
            breaker.BREAKERS.succeeded(breaker.GATEWAY)  # a probe elsewhere found it answering
            assert client.chat(model="m", messages=[{"role": "user", "content": "hi"}]).content == "hello"
            assert stub.count == 2
            assert breaker.BREAKERS.episodes[-1].failed_fast == 2
        finally:
            client.close()
            breaker.BREAKERS.reset()
