"""The circuit breaker's rules as a table (``ki.adapters.breaker``): pure, no database, a clock moved by hand.

N consecutive faults open a breaker, a success in between resets the count; while open, one probe at a
time is let through once due, a failed probe doubles the delay up to the cap, any success closes it;
other processes' recorded pauses are adopted and their closing is followed; which stages need which
dependency follows the configuration; a fault's dependency is found along the exception chain.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ki.adapters.breaker import BreakerPolicy, Breakers, Pause, dependency_of, describe_pauses, stage_dependencies
from ki.config.settings import KiConfig
from ki.core import errors
from tests.helpers.clock import ManualClock

POLICY = BreakerPolicy(failures=3, probe_seconds=0.05, probe_max_seconds=0.2)


class Sink:
    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def opened(self, pause: Pause) -> None:
        self.events.append(("opened", pause.probes))

    def closed(self, dependency: str) -> None:
        self.events.append(("closed", dependency))


def test_consecutive_faults_open_and_a_success_resets_the_count():
    b = Breakers(POLICY)
    b.failed("gateway", "503")
    b.failed("gateway", "503")
    b.succeeded("gateway")
    b.failed("gateway", "503")
    b.failed("gateway", "503")
    assert b.open_dependencies() == frozenset()
    b.failed("gateway", "gateway answered HTTP 503")
    assert b.open_dependencies() == {"gateway"}
    (pause,) = b.pauses()
    assert pause.reason == "gateway answered HTTP 503" and pause.probes == 0
    assert pause.describe().startswith("paused: gateway unavailable since ")
    assert b.open_dependencies() == {"gateway"} and "docling" not in b.open_dependencies()


def test_faults_of_one_document_alone_never_open_the_breaker():
    """One file failing again and again while no other file calls the dependency is a poison file, not an outage:
    its own budget decides. A second document's fault in the same run of faults opens the breaker."""
    b = Breakers(POLICY)
    for _ in range(7):
        b.failed("docling", "HTTP 500", subject=41)
    assert b.open_dependencies() == frozenset()
    b.failed("docling", "HTTP 500", subject=42)
    assert b.open_dependencies() == {"docling"}
    b.succeeded("docling")  # closes and forgets the documents of the run
    b.failed("docling", "HTTP 500", subject=41)
    b.failed("docling", "HTTP 500", subject=42)
    assert b.open_dependencies() == frozenset()  # two faults in a row: under the threshold of three
    b.failed("docling", "HTTP 500", subject=42)
    assert b.open_dependencies() == {"docling"}


def test_a_threshold_of_one_fault_needs_one_document():
    b = Breakers(BreakerPolicy(failures=1, probe_seconds=0.05, probe_max_seconds=0.2))
    b.failed("gateway", "503", subject=7)
    assert b.open_dependencies() == {"gateway"}


def test_one_probe_at_a_time_with_doubling_backoff_and_automatic_resume():
    clock = ManualClock()
    b, sink = Breakers(POLICY, clock=clock), Sink()
    b.attach(sink)
    for _ in range(3):
        b.failed("docling", "down")
    assert not b.try_probe("docling")  # not due yet (0.05 s)
    clock.advance(0.06)
    assert b.try_probe("docling")
    assert not b.try_probe("docling")  # one at a time
    b.failed("docling", "down")  # the probe failed: next one after 0.1 s
    assert b.pauses()[0].probes == 1
    clock.advance(0.06)
    assert not b.try_probe("docling")
    clock.advance(0.06)
    assert b.try_probe("docling")
    b.failed("docling", "down")
    b.failed("docling", "down")  # a request in flight, not the probe: no news
    assert b.pauses()[0].probes == 2
    assert POLICY.delay(2) == pytest.approx(0.2) and POLICY.delay(10) == pytest.approx(0.2)  # capped
    clock.advance(0.21)
    assert b.try_probe("docling")
    b.end_probe("docling")  # it never reached Docling: the next probe may go at once
    assert b.try_probe("docling")
    b.succeeded("docling")
    assert b.open_dependencies() == frozenset() and not b.try_probe("docling")
    assert sink.events == [("opened", 0), ("opened", 1), ("opened", 2), ("closed", "docling")]


def test_a_failing_sink_leaves_the_breaker_working():
    class Broken:
        def opened(self, pause):
            raise RuntimeError("database down")

        def closed(self, dependency):
            raise RuntimeError("database down")

    b = Breakers(POLICY)
    b.attach(Broken())
    for _ in range(3):
        b.failed("opensearch", "down")
    assert b.open_dependencies() == {"opensearch"}
    b.adopt([])  # not persisted: an empty table does not close it
    assert b.open_dependencies() == {"opensearch"}
    b.succeeded("opensearch")
    assert b.open_dependencies() == frozenset()


def test_pauses_of_other_processes_are_adopted_and_their_end_followed():
    b = Breakers(POLICY)
    since = datetime.now(UTC) - timedelta(minutes=2)
    b.adopt([Pause("gateway", since, "HTTP 503", datetime.now(UTC) + timedelta(seconds=30), probes=4)])
    (pause,) = b.pauses()
    assert pause.since == since and pause.probes == 4
    assert not b.try_probe("gateway")  # its next probe is 30 s away
    b.adopt([])  # the other process saw it answer
    assert b.open_dependencies() == frozenset()


def test_stage_dependencies_follow_the_configuration():
    plain = stage_dependencies(KiConfig(), gateway_configured=False)
    assert all(not plain[s] for s in plain)  # a source root is retried per row, not paused (ki.adapters.breaker)
    full = KiConfig.model_validate({"components": {"docling_url": "http://127.0.0.1:5001",
                                                   "opensearch_url": "http://127.0.0.1:9200"},
                                    "retrieval": {"embedding_model": "gateway:text-embed"}})
    needs = stage_dependencies(full, gateway_configured=True)
    assert needs["convert"] == {"docling"}
    assert needs["index"] == {"opensearch", "gateway"}
    assert all(needs[s] == {"gateway"} for s in ("classify_matter", "relate", "extract_metadata",
                                                  "extract_decisions"))
    pause = Pause("gateway", datetime.now(UTC), "HTTP 503", datetime.now(UTC))
    (shown,) = describe_pauses([pause], full, gateway_configured=True)
    assert shown["stages"] == ["classify_matter", "relate", "extract_metadata", "extract_decisions", "index"]


def test_the_dependency_of_a_fault_is_found_along_the_chain():
    gateway = errors.GatewayUnavailable("down", infrastructure="gateway answered HTTP 503")
    try:
        try:
            raise gateway
        except errors.GatewayUnavailable as exc:
            raise RuntimeError("the stage failed") from exc
    except RuntimeError as wrapped:
        assert dependency_of(wrapped) == "gateway"
    assert dependency_of(errors.DoclingUnavailable("x", infrastructure="docling answered HTTP 503")) == "docling"
    assert dependency_of(errors.OpenSearchUnavailable("x")) == "opensearch"
    assert dependency_of(errors.SourceUnavailable("root missing")) is None  # retried per row
    assert dependency_of(errors.SourceReadDenied("one file")) is None  # a file's permissions, not the root
    assert dependency_of(errors.InfrastructureError("database fault")) is None
    assert dependency_of(ValueError("bad file")) is None
