"""Docling and OpenSearch clients fail fast while their dependency is paused (``ki.adapters.breaker``), as the
gateway client does (tests/unit/test_breaker_probe.py): the real clients against loopback servers
(``DoclingStub``; a JSON server answering as an OpenSearch node), every request counted by the server.
~3 s."""

from __future__ import annotations

import threading
import time

import pytest

from ki.adapters import breaker
from ki.adapters.convert.docling import DoclingClient, canary_docx, reset_cooldown
from ki.adapters.search.opensearch_index import client_for
from ki.core.errors import DoclingUnavailable, OpenSearchUnavailable
from ki.core.retry import Treatment, classify_error
from tests.helpers.clock import ManualClock
from tests.helpers.docling_stub import DoclingStub, Scenario
from tests.helpers.loopback import JsonServer
from tests.helpers.outage import wait_until

NODE_INFO = {"name": "stub", "cluster_name": "ki", "version": {"number": "2.19.1", "distribution": "opensearch"},
             "tagline": "The OpenSearch Project: https://opensearch.org/"}


class Sink:
    def opened(self, pause) -> None:
        pass

    def closed(self, dependency: str) -> None:
        pass


@pytest.fixture
def breakers():
    breaker.BREAKERS.reset()
    reset_cooldown()
    try:
        yield breaker.BREAKERS
    finally:
        breaker.BREAKERS.attach(None)
        breaker.BREAKERS.reset()


def _open(b, dependency: str) -> None:
    b.attach(Sink(), probed={dependency})  # as a run's ClaimGate does
    for _ in range(b.policy.failures):
        b.failed(dependency, f"{dependency} transport error: ConnectError")
    assert dependency in b.open_dependencies()


def _as_prober(b, dependency: str, call):
    """Wait for the probe to fall due, take it on a thread of its own and make ``call`` there."""
    out: list = []

    def probe() -> None:
        assert wait_until(lambda: b.try_probe(dependency), 15, step=0.02), "the probe never fell due"
        try:
            out.append(call())
        except Exception as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)
        finally:
            b.end_probe(dependency)

    t = threading.Thread(target=probe)
    t.start()
    t.join(30)
    return out[0]


def test_the_docling_client_sends_nothing_while_paused(breakers):
    docx = canary_docx()
    with DoclingStub() as stub, DoclingClient(stub.url, client_timeout_seconds=10, poll_wait_seconds=0.1) as client:
        stub.scenario = Scenario(fixture="word_tables")
        assert client.convert(docx, "memo.docx").text
        before = len(stub.paths())
        assert before >= 3  # submit, poll/ result (and the version check)
        _open(breakers, breaker.DOCLING)
        with pytest.raises(DoclingUnavailable, match="paused") as err:
            client.convert(docx, "memo.docx")
        assert err.value.infrastructure.startswith("docling paused")
        assert classify_error(err.value).treatment is Treatment.infrastructure  # retried, never quarantined
        assert breaker.dependency_of(err.value) == breaker.DOCLING
        assert len(stub.paths()) == before  # nothing reached Docling Serve
        # the probing thread's conversion goes, and Docling's answer closes the breaker
        doc = _as_prober(breakers, breaker.DOCLING, lambda: client.convert(docx, "memo.docx"))
        assert not isinstance(doc, Exception), doc
        assert len(stub.paths()) > before
        assert breaker.DOCLING not in breakers.open_dependencies()
        assert breakers.episodes[-1].failed_fast == 1
        assert client.convert(docx, "memo.docx").text  # closed: calls go again


def test_the_opensearch_client_sends_nothing_while_paused(breakers):
    with JsonServer({"/": NODE_INFO}) as node:
        client = client_for(node.url)
        assert client.info()["version"]["number"] == "2.19.1"
        assert node.hits == ["/"]
        _open(breakers, breaker.OPENSEARCH)
        with pytest.raises(OpenSearchUnavailable, match="paused") as err:
            client.info()
        assert err.value.infrastructure.startswith("OpenSearch paused")
        assert classify_error(err.value).treatment is Treatment.infrastructure
        assert breaker.dependency_of(err.value) == breaker.OPENSEARCH
        assert node.hits == ["/"]  # no request and none of the transport's retries
        answer = _as_prober(breakers, breaker.OPENSEARCH, client.info)
        assert not isinstance(answer, Exception), answer
        assert node.hits == ["/", "/"]
        # an index row's completion confirms OpenSearch (ki.adapters.breaker.CONFIRMED_BY_COMPLETION): here by hand
        breakers.succeeded(breaker.OPENSEARCH)
        breakers.attach(None)
        assert client.info() and node.hits == ["/", "/", "/"]
        assert breakers.episodes[-1].failed_fast == 1


def test_a_paused_dependency_refuses_only_where_claims_probe_it(breakers):
    with JsonServer({"/": NODE_INFO}) as node:
        client = client_for(node.url)
        _open(breakers, breaker.OPENSEARCH)
        breakers.attach(Sink(), probed={breaker.GATEWAY})  # this process's stages do not need OpenSearch
        assert client.info()["name"] == "stub"
        assert node.hits == ["/"]


def test_a_probe_taken_on_one_thread_is_sent_by_the_handler_thread_it_is_handed_to(breakers):
    """A Hatchet task is admitted as the probe on its own thread and runs the handler on another
    (run_stage_watched): without the hand-over every probe failed fast and spent an attempt."""
    _open(breakers, breaker.GATEWAY)
    state = breakers._open[breaker.GATEWAY]
    state.next_probe = 0.0  # due now; no endpoint located, so no TCP connect precedes it
    assert breakers.try_probe(breaker.GATEWAY)
    holder, seen = threading.get_ident(), {}

    def handler(hand_over: bool) -> None:
        if hand_over:
            breakers.hand_over_probes(holder)
        seen[hand_over] = breakers.allows(breaker.GATEWAY)
        if hand_over:
            breakers.failed(breaker.GATEWAY, "still down")  # the probe's verdict, from the handler thread

    for hand_over in (False, True):
        worker = threading.Thread(target=handler, args=(hand_over,))
        worker.start()
        worker.join()
    assert seen == {False: False, True: True}
    assert (state.probing, state.probes) == (False, 1)  # a failed probe: the next one is rescheduled


# --- Retry-After: an overloaded gateway says when to come back ------------------------------------------


@pytest.mark.parametrize(("value", "seconds"), [
    ("30", 30.0), (" 5 ", 5.0), ("0", 0.0), ("100000", 120.0),  # capped at RETRY_AFTER_MAX_SECONDS
    ("Wed, 02 Dec 2026 04:00:45 GMT", 45.0), ("Wed, 02 Dec 2026 03:59:00 GMT", 0.0),  # a date in the past
    ("", None), (None, None), ("soon", None), ("-3", None), ("1.5", None),
])
def test_retry_after_header_values(value, seconds):
    from datetime import UTC, datetime

    from ki.core.retry import retry_after_seconds

    now = datetime(2026, 12, 2, 4, 0, 0, tzinfo=UTC).timestamp()
    assert retry_after_seconds(value, now=now) == seconds


def test_a_503_with_retry_after_defers_the_next_probe(breakers):
    from ki.adapters.agents.gateway import GatewayClient
    from ki.core.errors import GatewayUnavailable
    from tests.helpers.gateway_stub import GatewayStub, Reply, unavailable

    down = unavailable()
    with GatewayStub(default=Reply(down.kind, status=503, body=down.body, headers={"Retry-After": "7"})) as stub:
        client = GatewayClient(stub.url, "sk-test", timeout_seconds=10)
        try:
            with pytest.raises(GatewayUnavailable) as err:
                client.chat(model="m", messages=[{"role": "user", "content": "hi"}])
        finally:
            client.close()
    assert err.value.status == 503 and err.value.retry_after_seconds == 7.0
    wrapped = RuntimeError("stage failed")
    wrapped.__cause__ = err.value
    assert breaker.retry_after_of(wrapped) == 7.0
    clock = ManualClock()
    b = breaker.Breakers(breaker.BreakerPolicy(failures=1, probe_seconds=0.05, probe_max_seconds=0.1), clock=clock)
    b.failed(breaker.GATEWAY, "gateway answered HTTP 503", retry_after=breaker.retry_after_of(wrapped))
    (pause,) = b.pauses()
    assert 6.5 <= (pause.next_probe_at - pause.since).total_seconds() <= 7.5  # not the 0.05 s backoff
    b.reset()
    b.failed(breaker.GATEWAY, "gateway answered HTTP 503", retry_after=0.6)
    clock.advance(0.3)
    assert not b.try_probe(breaker.GATEWAY)  # the backoff (0.05 s) has passed, the Retry-After has not
    clock.advance(0.29)
    assert not b.try_probe(breaker.GATEWAY)  # 0.59 s: still not
    clock.advance(0.02)
    assert b.try_probe(breaker.GATEWAY)  # 0.61 s: the probe goes
    b.failed(breaker.GATEWAY, "gateway answered HTTP 503", retry_after=0.6)  # the probe failed: ≥ 0.6 s again
    clock.advance(0.59)
    assert not b.try_probe(breaker.GATEWAY)  # not before the Retry-After (the backoff is 0.1 s)
    clock.advance(0.02)
    assert b.try_probe(breaker.GATEWAY)
    b.reset()


def test_a_stale_read_of_the_recorded_pauses_does_not_reopen_a_breaker_closed_since():
    b = breaker.Breakers(breaker.BreakerPolicy(failures=1))
    b.failed(breaker.GATEWAY, "gateway answered HTTP 503")
    read_at = time.monotonic()
    recorded = b.pauses()  # what a refresh read from PostgreSQL, just before ...
    b.succeeded(breaker.GATEWAY)  # ... the probe's answer closed the breaker (its row is being deleted)
    b.adopt(recorded, read_at=read_at)
    assert b.open_dependencies() == frozenset()
    assert len(b.episodes) == 1  # one outage, one "answers again" line
    b.adopt(recorded, read_at=time.monotonic())  # a later read that still shows it: another process's pause
    assert b.open_dependencies() == {breaker.GATEWAY}
