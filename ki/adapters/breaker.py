"""Circuit breakers per dependency: an outage pauses the stages that need the dependency.

Spec: insertion-pipeline.md "Retry policy and quarantine" (infrastructure faults are retried, never
quarantined) and DESIGN.md "Outages are not the file's fault". Without a breaker every document
retries an outage on its own; with it, after ``KI_BREAKER_FAILURES`` (3) consecutive infrastructure
faults of one dependency the stages that need it stop claiming, one probe at a time is let through
with a doubling backoff (``KI_BREAKER_PROBE_SECONDS`` 1 s, capped at ``KI_BREAKER_PROBE_MAX_SECONDS``
10 s), and the first success closes the breaker (automatic resume).

A probe starts with a plain TCP connect to the dependency's host and port (its configured URL,
:func:`dependency_endpoints`; nothing is sent, like a TCP health check of Envoy or HAProxy, whose
default check interval is 2 s). While the port refuses (connection refused or reset, connect
timeout, DNS failure: a gateway process that is down) only these connects go, every
``KI_BREAKER_CONNECT_PROBE_SECONDS`` (2 s), and no HTTP request at all; once the port accepts, the
probe's real request follows at once, so a recovered dependency resumes within about one connect
interval. When the port accepts but the request still fails (HTTP 502/503/504/429, a proxy in front
of a dead backend, a reset after the accept), the HTTP probes keep the doubling backoff. The
outcome of the connect, not the class of the fault that opened the breaker, picks the schedule:
it is the same rule for every dependency, for pauses adopted from other processes, and for an
outage that turns from one kind into the other.

While a breaker is open, in a process whose claims take its probes (a run, a Hatchet worker:
:meth:`Breakers.attach`), a call to the dependency that is not the probe fails fast without touching
the network (:meth:`Breakers.allows`; the gateway client asks before every request), so the requests
that meet an outage are the ones in flight when it began (at most one per worker: no client retries
on its own) and the probes. Each outage is summed up when it ends (:class:`Episode`: requests that
met it, calls failed fast, TCP connects, failed HTTP probes) in the log line that says the
dependency answers again, and kept in :attr:`Breakers.episodes`.

The dependencies and which stages need them are data (:func:`stage_dependencies`):

============  ====================================================  ===================================
dependency    stages                                                when
============  ====================================================  ===================================
gateway       classify_matter, relate, extract_metadata,            ``KI_LLM_BASE_URL`` is set
              extract_decisions; index when ``embedding_model``
              is ``gateway:<model>``
docling       convert                                               ``components.docling_url`` is set
opensearch    index                                                 ``components.opensearch_url`` is set
============  ====================================================  ===================================

A source root is not behind a breaker: one ki run reads many roots, and a breaker for "the source"
paused the fetch of every root for one root's outage, and on a flapping share held the run for minutes
after the share came back (measured: a 2 s outage made a 30-document run take 248 s instead of 5 s).
A fetch that meets a missing or unreadable root is an outage retried per row with the infrastructure
backoff, never quarantined.

Which dependency a fault belongs to is the exception's class (:data:`FAULT_DEPENDENCIES`, anywhere in
the exception chain). A success is reported by the code that reached the dependency: the gateway and
Docling clients on every answer (:func:`succeeded`), the executor for fetch (source) and index
(opensearch), whose completion means the dependency answered.

:data:`BREAKERS` is the process's registry (the workers of a process share it; ``ki.app.wiring.reset``
clears it). A process that runs stages mirrors its transitions into PostgreSQL through a
:class:`BreakerSink` (``ki.store.pauses``), so ``ki status``, the console's ``/api/status`` and the
other processes see an open breaker. Pausing never touches a row: rows of a paused stage stay
pending (no attempt is spent), and the faults that opened the breaker were recorded as
infrastructure failures (never quarantined). Times are monotonic seconds inside (``time.monotonic`` unless a
test gives :class:`Breakers` another clock), UTC datetimes at the edges.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from ki.config.process import LlmSettings, ProcessSettings, current
from ki.core.dependencies import (
    CONFIRMED_BY_COMPLETION,
    DEPENDENCIES,
    DOCLING,
    FAULT_DEPENDENCIES,
    GATEWAY,
    MODEL_STAGES,
    OPENSEARCH,
    SOURCE,
    Address,
    dependency_of,
    endpoint_of,
    port_accepts,
    retry_after_of,
)
from ki.core.dependencies import dependency_endpoints as _endpoints
from ki.core.dependencies import stage_dependencies as _stage_dependencies
from ki.core.served import SERVED
from ki.store.pauses import Pause

log = logging.getLogger(__name__)

#: The names of :mod:`ki.core.dependencies` stay importable from here (the breaker's callers use both).
__all__ = [
    "GATEWAY", "DOCLING", "OPENSEARCH", "SOURCE", "DEPENDENCIES", "FAULT_DEPENDENCIES", "MODEL_STAGES",
    "CONFIRMED_BY_COMPLETION", "Address", "dependency_endpoints", "dependency_of", "endpoint_of",
    "port_accepts", "retry_after_of", "stage_dependencies", "BREAKERS", "BreakerPolicy", "Breakers",
    "BreakerSink", "Episode", "Pause", "describe_pauses", "succeeded",
]


def stage_dependencies(config: Any, *, gateway_configured: bool | None = None) -> dict[str, frozenset[str]]:
    """stage → the dependencies it needs under ``config`` (:func:`ki.core.dependencies.stage_dependencies`);
    ``gateway_configured`` defaults to ``KI_LLM_BASE_URL`` being set."""
    if gateway_configured is None:
        gateway_configured = current(LlmSettings).configured
    return _stage_dependencies(config, gateway_configured=gateway_configured)


def dependency_endpoints(config: Any, *, gateway_url: str | None = None) -> dict[str, Address]:
    """dependency → the ``(host, port)`` its probes connect to (:func:`ki.core.dependencies.dependency_endpoints`);
    ``gateway_url`` defaults to ``KI_LLM_BASE_URL``."""
    if gateway_url is None:
        gateway_url = current(LlmSettings).base_url
    return _endpoints(config, gateway_url=gateway_url)


@dataclass(frozen=True)
class BreakerPolicy:
    """``failures`` consecutive faults open a breaker; HTTP probes wait ``probe_seconds`` × 2^n, ≤
    ``probe_max_seconds``; while the dependency's port refuses, a TCP connect every ``connect_probe_seconds``."""

    failures: int = 3
    probe_seconds: float = 1.0
    probe_max_seconds: float = 10.0
    connect_probe_seconds: float = 2.0

    @classmethod
    def from_settings(cls) -> BreakerPolicy:
        """The policy ``KI_BREAKER_FAILURES`` / ``KI_BREAKER_PROBE_SECONDS`` / ``KI_BREAKER_PROBE_MAX_SECONDS``
        / ``KI_BREAKER_CONNECT_PROBE_SECONDS`` set now. Raises: ConfigurationError for an invalid value."""
        s = current(ProcessSettings)
        return cls(s.breaker_failures, s.breaker_probe_seconds, s.breaker_probe_max_seconds,
                   s.breaker_connect_probe_seconds)

    @property
    def connect_timeout(self) -> float:
        """Seconds a TCP connect check may take (≤ 2 s, ≤ the connect interval)."""
        return min(2.0, self.connect_probe_seconds)

    def delay(self, probes: int) -> float:
        """Seconds before the probe after ``probes`` failed ones."""
        return min(self.probe_max_seconds, self.probe_seconds * (2 ** min(probes, 30)))


def describe_pauses(pauses: Iterable[Pause], config: Any, *, gateway_configured: bool | None = None
                    ) -> list[dict[str, Any]]:
    """The open breakers as ``ki status --json`` and ``/api/status`` show them: dependency, since,
    reason, next_probe_at, probes, the ``stages`` they pause under ``config`` (see
    :func:`stage_dependencies`) and the ``message`` (``paused: gateway unavailable since …``)."""
    needs = stage_dependencies(config, gateway_configured=gateway_configured)
    return [{"dependency": p.dependency, "since": p.since, "reason": p.reason, "next_probe_at": p.next_probe_at,
             "probes": p.probes, "stages": [s for s, d in needs.items() if p.dependency in d],
             "message": p.describe()} for p in pauses]


class BreakerSink(Protocol):
    """Where transitions are mirrored (``ki.store.pauses.PauseSink``); its errors are logged, never raised."""

    def opened(self, pause: Pause) -> None: ...
    def closed(self, dependency: str) -> None: ...


@dataclass
class Episode:
    """One outage of a dependency as this process saw it, summed up when it ends.

    Attributes:
        dependency / since / ended: which, when it began (the fault that opened the breaker; UTC) and
            when the dependency answered again (None while open).
        faults: infrastructure faults reported while open, and the ``failures`` that opened it.
        failed_fast: calls refused while open without a request (:meth:`Breakers.allows`).
        connects / connects_refused: TCP connect checks of the probes, and those the port refused.
        probes: HTTP probes that failed.
    """

    dependency: str
    since: datetime
    ended: datetime | None = None
    faults: int = 0
    failed_fast: int = 0
    connects: int = 0
    connects_refused: int = 0
    probes: int = 0

    @property
    def requests(self) -> int:
        """Requests that met the outage: the faults less the calls that failed fast."""
        return max(0, self.faults - self.failed_fast)

    def describe(self) -> str:
        """``3 requests met the outage, 4 calls failed fast, 150 TCP connects (149 refused), 0 failed HTTP probes``."""
        return (f"{self.requests} requests met the outage, {self.failed_fast} calls failed fast, "
                f"{self.connects} TCP connects ({self.connects_refused} refused), {self.probes} failed HTTP probes")


@dataclass
class _State:
    since: datetime
    reason: str
    next_probe: float  # monotonic
    probes: int = 0
    probing: bool = False
    persisted: bool = False
    prober: int | None = None  # the thread holding the probe
    port_open_at: float | None = None  # monotonic: the last TCP check that connected
    refusing: Address | None = None  # the address whose port refused the last check
    episode: Episode = field(kw_only=True, repr=False)

    def shown_reason(self) -> str:
        reason = _REFUSING.sub("", self.reason)  # an adopted pause's reason may carry it already
        if self.refusing is None:
            return reason
        host, port = self.refusing
        return f"{reason[:400]}; {host}:{port} refuses TCP connections"


_REFUSING = re.compile(r"; \S+ refuses TCP connections$")


class Breakers:
    """The breakers of a process, one per dependency (thread-safe). Closed unless listed in ``_open``.

    Args:
        policy: the thresholds and delays (None: :meth:`BreakerPolicy.from_settings` at each use).
        clock: monotonic seconds the probe schedule is kept in (default ``time.monotonic``; tests pass a
            clock they advance, so no test waits for a delay to pass).
    """

    def __init__(self, policy: BreakerPolicy | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._policy = policy
        self._faults: dict[str, int] = {}
        self._fault_subjects: dict[str, set[object]] = {}  # the documents of the faults in a row, per dependency
        self._open: dict[str, _State] = {}
        self._sink: BreakerSink | None = None
        self._endpoints: dict[str, Address] = {}
        self._probed: frozenset[str] = frozenset()  # dependencies whose probes this process's claims take
        self._closed_at: dict[str, float] = {}  # monotonic: when this process last closed each breaker
        #: the outages that ended in this process, the latest last (at most 32)
        self.episodes: deque[Episode] = deque(maxlen=32)

    @property
    def policy(self) -> BreakerPolicy:
        """The policy given, else the one the settings give now."""
        return self._policy or BreakerPolicy.from_settings()

    def attach(self, sink: BreakerSink | None, *, probed: Iterable[str] = ()) -> None:
        """Mirror transitions to ``sink`` from now on, and let calls to the ``probed`` dependencies fail
        fast while paused (:meth:`allows`): the caller's claims pause the stages needing them and take
        their probes. ``attach(None)`` stops both (a run ended: nobody would probe any more, so a call
        must not be refused by a breaker only a probe could close)."""
        with self._lock:
            self._sink = sink
            self._probed = frozenset(probed) if sink is not None else frozenset()

    def locate(self, endpoints: dict[str, Address]) -> None:
        """From now on probe these dependencies with a TCP connect to their ``(host, port)`` first (see
        the module doc; :func:`dependency_endpoints`); one left out is probed by its requests only."""
        with self._lock:
            self._endpoints = dict(endpoints)

    # -- outcomes ------------------------------------------------------------------------------------

    def failed(self, dependency: str, message: str, *, retry_after: float | None = None,
               subject: Hashable | None = None) -> None:
        """Count an infrastructure fault of ``dependency``: the ``failures``-th in a row opens its breaker, when
        the faults in a row were met by at least two documents; a failed probe (reported by the thread holding
        it) reschedules the next one with a doubled delay; any other fault while open is a request that was
        already in flight (no news).

        Args:
            retry_after: seconds, the dependency's ``Retry-After`` (:func:`retry_after_of`): the next probe waits
                at least that long, even beyond ``probe_max_seconds`` (an overloaded gateway says when to come
                back).
            subject: the document whose call met the fault (its source object id). Faults of one document alone
                never open the breaker however many there are: one file failing again and again while no other
                file calls the dependency is the poison-file case (that file's own budget decides, DESIGN.md
                "Outages are not the file's fault"), not an outage, and opening would pause every file and
                report an outage that is not there. None: a fault of its own (counted as a further document).
        """
        policy = self.policy
        wait = retry_after or 0.0
        with self._lock:
            state = self._open.get(dependency)
            if state is None:
                n = self._faults.get(dependency, 0) + 1
                self._faults[dependency] = n
                subjects = self._fault_subjects.setdefault(dependency, set())
                subjects.add(object() if subject is None else subject)
                if n < policy.failures or len(subjects) < min(2, policy.failures):
                    return
                since = datetime.now(UTC)
                state = _State(since, message[:500], self._clock() + max(policy.delay(0), wait),
                               episode=Episode(dependency, since, faults=n))
                self._open[dependency] = state
                log.warning("%s unavailable after %d faults in a row: pausing its stages (%s)",
                            dependency, n, message[:200])
            elif state.probing and state.prober == threading.get_ident():
                state.probing, state.prober, state.port_open_at = False, None, None
                state.probes += 1
                state.next_probe = self._clock() + max(policy.delay(state.probes), wait)
                state.episode.faults += 1
                state.episode.probes += 1
            else:
                state.episode.faults += 1
                return  # a request in flight when the breaker opened: no news
            pause, sink = self._pause(dependency, state), self._sink
        self._mirror(sink, "opened", pause)

    def succeeded(self, dependency: str) -> None:
        """``dependency`` answered: reset its fault count and close its breaker (automatic resume)."""
        with self._lock:
            self._faults.pop(dependency, None)
            self._fault_subjects.pop(dependency, None)
            state = self._open.pop(dependency, None)
            sink = self._sink
            if state is not None:
                self._closed_at[dependency] = self._clock()
                state.episode.ended = datetime.now(UTC)
                self.episodes.append(state.episode)
        if state is not None:
            episode = state.episode
            log.warning("%s answers again: resuming its stages (paused since %s, %.0f s; %s)", dependency,
                        f"{state.since:%H:%M:%S}", (episode.ended - state.since).total_seconds(), episode.describe())
            self._mirror(sink, "closed", dependency)

    def allows(self, dependency: str) -> bool:
        """May a call to ``dependency`` be sent now? True when its breaker is closed, when this thread holds
        its probe, and when no claims of this process probe it (see :meth:`attach`); False while it is
        paused (the call must fail fast without a request; counted)."""
        with self._lock:
            state = self._open.get(dependency)
            if (state is None or dependency not in self._probed
                    or (state.probing and state.prober == threading.get_ident())):
                return True
            state.episode.failed_fast += 1
            return False

    # -- what workers may claim ----------------------------------------------------------------------

    def open_dependencies(self) -> frozenset[str]:
        """The dependencies whose breaker is open."""
        with self._lock:
            return frozenset(self._open)

    def try_probe(self, dependency: str) -> bool:
        """Take the probe of an open ``dependency`` if it is due and nobody probes (then call
        :meth:`end_probe` after the probing claim). False when closed, not due or taken, and when
        its port refused the TCP connect that precedes the probe (the next connect then follows after
        ``connect_probe_seconds``; the connect is skipped while one succeeded within that interval)."""
        policy = self.policy
        with self._lock:
            state = self._open.get(dependency)
            now = self._clock()
            if state is None or state.probing or now < state.next_probe:
                return False
            state.probing, state.prober = True, threading.get_ident()
            address = self._endpoints.get(dependency)
            check = address is not None and (state.port_open_at is None
                                             or now - state.port_open_at >= policy.connect_probe_seconds)
        if not check:
            return True
        accepts = port_accepts(address, policy.connect_timeout)
        with self._lock:
            if self._open.get(dependency) is not state:  # closed (or reset) meanwhile
                return False
            state.episode.connects += 1
            if accepts:
                if state.refusing is not None:
                    log.info("%s: %s:%d accepts TCP connections again: probing with a request",
                             dependency, *address)
                state.port_open_at, state.refusing = self._clock(), None
                return True
            state.episode.connects_refused += 1
            state.probing, state.prober, state.port_open_at = False, None, None
            state.next_probe = self._clock() + policy.connect_probe_seconds
            first = state.refusing is None
            state.refusing = address
            pause, sink = self._pause(dependency, state), self._sink
        if first:
            log.info("%s: %s:%d refuses TCP connections: checking the port every %g s, no requests",
                     dependency, *address, policy.connect_probe_seconds)
        self._mirror(sink, "opened", pause)  # the next probe's time, for ki status and other processes
        return False

    def hand_over_probes(self, holder: int) -> None:
        """Make the calling thread the prober of every probe thread ``holder`` (a ``threading.get_ident()``)
        holds: a claim admitted as a probe on one thread whose handler runs on another
        (:func:`ki.orchestration.execute.run_stage_watched`) sends its request as the probe, instead of
        failing fast and spending an attempt on every probe of the outage."""
        me = threading.get_ident()
        with self._lock:
            for state in self._open.values():
                if state.probing and state.prober == holder:
                    state.prober = me

    def end_probe(self, dependency: str) -> None:
        """The probing claim ended without a verdict (it never reached the dependency, or nothing was
        claimable): the next probe may start at once. A verdict already ended it."""
        with self._lock:
            state = self._open.get(dependency)
            if state is not None:
                state.probing, state.prober = False, None

    def pauses(self) -> list[Pause]:
        """The open breakers, by dependency."""
        with self._lock:
            return [self._pause(d, s) for d, s in sorted(self._open.items())]

    # -- several processes ---------------------------------------------------------------------------

    def adopt(self, shared: Iterable[Pause], *, read_at: float | None = None) -> None:
        """Align with the pauses PostgreSQL records (other processes' breakers): open the ones recorded,
        close the ones this process persisted that another process has since closed. ``read_at``
        (monotonic): when ``shared`` was read; a breaker this process closed since then is not reopened
        from that stale read (seen: a second "answers again" line, 0 requests, after every outage)."""
        shared = {p.dependency: p for p in shared}
        now_wall, now = datetime.now(UTC), self._clock()
        with self._lock:
            for dependency, pause in shared.items():
                if read_at is not None and self._closed_at.get(dependency, float("-inf")) >= read_at:
                    continue  # closed here after the read: the row is being deleted
                if dependency not in self._open:
                    wait = max(0.0, (pause.next_probe_at - now_wall).total_seconds())
                    self._open[dependency] = _State(pause.since, pause.reason, now + wait, pause.probes,
                                                    persisted=True, episode=Episode(dependency, pause.since))
                else:
                    self._open[dependency].persisted = True
            for dependency in [d for d, s in self._open.items() if s.persisted and d not in shared]:
                del self._open[dependency]
                self._faults.pop(dependency, None)
                self._fault_subjects.pop(dependency, None)

    def reset(self) -> None:
        """Forget every breaker, count and ended outage (tests; ``ki.app.wiring.reset``)."""
        with self._lock:
            self._faults.clear()
            self._fault_subjects.clear()
            self._open.clear()
            self._endpoints.clear()
            self._probed = frozenset()
            self._closed_at.clear()
            self.episodes.clear()

    # -- internals -----------------------------------------------------------------------------------

    def _pause(self, dependency: str, state: _State) -> Pause:
        wait = max(0.0, state.next_probe - self._clock())
        return Pause(dependency, state.since, state.shown_reason(), datetime.now(UTC) + timedelta(seconds=wait),
                     state.probes)

    def _mirror(self, sink: BreakerSink | None, event: str, arg: Any) -> None:
        if sink is None:
            return
        try:
            getattr(sink, event)(arg)
        except Exception:  # noqa: BLE001 - the breaker works in-process even when the database does not
            log.warning("recording the %s breaker failed", event, exc_info=True)
            return
        if event == "opened":
            with self._lock:
                state = self._open.get(arg.dependency)
                if state is not None:
                    state.persisted = True


#: The process's breakers (every worker, client and executor of the process shares them).
BREAKERS = Breakers()


def succeeded(dependency: str) -> None:
    """Report that ``dependency`` answered (the gateway and Docling clients call this on every answer):
    closes its breaker, and notes the answer for the object this thread works on (``ki.core.served``: the
    evidence that a fault only one file meets is that file's)."""
    BREAKERS.succeeded(dependency)
    SERVED.success(dependency)
