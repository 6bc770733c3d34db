"""Circuit breakers per dependency: an outage pauses the stages that need the dependency (issue 14 item 9).

Spec: insertion-pipeline.md "Retry policy and quarantine" (infrastructure faults are retried, never
quarantined) and DESIGN.md "Outages are not the file's fault". Without a breaker every document
retries an outage on its own; with it, after ``KI_BREAKER_FAILURES`` (3) consecutive infrastructure
faults of one dependency the stages that need it stop claiming, one probe at a time is let through
with a doubling backoff (``KI_BREAKER_PROBE_SECONDS`` 1 s, capped at ``KI_BREAKER_PROBE_MAX_SECONDS``
10 s), and the first success closes the breaker (automatic resume).

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
backoff (issue 14 item 4), never quarantined.

Which dependency a fault belongs to is the exception's class (:data:`FAULT_DEPENDENCIES`, anywhere in
the exception chain). A success is reported by the code that reached the dependency: the gateway and
Docling clients on every answer (:func:`succeeded`), the executor for fetch (source) and index
(opensearch), whose completion means the dependency answered.

:data:`BREAKERS` is the process's registry (the workers of a process share it; ``ki.services.reset``
clears it). A process that runs stages mirrors its transitions into PostgreSQL through a
:class:`BreakerSink` (``ki.store.pauses``), so ``ki status``, the console's ``/api/status`` and the
other processes see an open breaker. Pausing never touches a row: rows of a paused stage stay
pending (no attempt is spent), and the faults that opened the breaker were recorded as
infrastructure failures (never quarantined). Times are ``time.monotonic()`` seconds inside, UTC
datetimes at the edges.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from ki import errors
from ki.config.process import ProcessSettings, current

log = logging.getLogger(__name__)

GATEWAY, DOCLING, OPENSEARCH, SOURCE = "gateway", "docling", "opensearch", "source"
DEPENDENCIES: tuple[str, ...] = (GATEWAY, DOCLING, OPENSEARCH, SOURCE)

#: The exception classes that are a dependency's fault (checked along the exception chain).
FAULT_DEPENDENCIES: tuple[tuple[type[BaseException], str], ...] = (
    (errors.GatewayUnavailable, GATEWAY),
    (errors.DoclingUnavailable, DOCLING),
    (errors.OpenSearchUnavailable, OPENSEARCH),
)

#: The model stages (the gateway when one is configured, else their rules policies).
MODEL_STAGES: tuple[str, ...] = ("classify_matter", "relate", "extract_metadata", "extract_decisions")

#: Dependencies whose success the executor reports when a stage needing them completes (the gateway
#: and Docling clients report their own, since a model stage may finish without a model call).
CONFIRMED_BY_COMPLETION: frozenset[str] = frozenset({SOURCE, OPENSEARCH})


def stage_dependencies(config: Any, *, gateway_configured: bool | None = None) -> dict[str, frozenset[str]]:
    """stage → the dependencies it needs under ``config`` (a :class:`ki.config.settings.KiConfig`).

    ``gateway_configured`` defaults to ``KI_LLM_BASE_URL`` being set. Stages needing nothing map to
    an empty set; every stage of ``PIPELINE_STAGE_ORDER`` is present.
    """
    from ki.config.process import LlmSettings
    from ki.taxonomies import PIPELINE_STAGE_ORDER

    if gateway_configured is None:
        gateway_configured = current(LlmSettings).configured
    needs: dict[str, set[str]] = {s: set() for s in PIPELINE_STAGE_ORDER}
    if gateway_configured:
        for s in MODEL_STAGES:
            needs[s].add(GATEWAY)
        # ``gateway:<model>`` (ki.index.embeddings.parse_embedding_model, which validated it on load)
        if (config.retrieval.embedding_model or "").strip().lower().startswith("gateway:"):
            needs["index"].add(GATEWAY)
    if config.components.docling_url:
        needs["convert"].add(DOCLING)
    if config.components.opensearch_url:
        needs["index"].add(OPENSEARCH)
    return {s: frozenset(d) for s, d in needs.items()}


def dependency_of(exc: BaseException) -> str | None:
    """The dependency whose outage ``exc`` (or an exception it was raised from) is, else None."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen and len(seen) < 8:
        seen.add(id(cur))
        for cls, dependency in FAULT_DEPENDENCIES:
            if isinstance(cur, cls):
                return dependency
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
    return None


@dataclass(frozen=True)
class BreakerPolicy:
    """``failures`` consecutive faults open a breaker; probes wait ``probe_seconds`` × 2^n, ≤ ``probe_max_seconds``."""

    failures: int = 3
    probe_seconds: float = 1.0
    probe_max_seconds: float = 10.0

    @classmethod
    def from_settings(cls) -> BreakerPolicy:
        """The policy ``KI_BREAKER_FAILURES`` / ``KI_BREAKER_PROBE_SECONDS`` / ``KI_BREAKER_PROBE_MAX_SECONDS``
        set now. Raises: ConfigurationError for an invalid value."""
        s = current(ProcessSettings)
        return cls(s.breaker_failures, s.breaker_probe_seconds, s.breaker_probe_max_seconds)

    def delay(self, probes: int) -> float:
        """Seconds before the probe after ``probes`` failed ones."""
        return min(self.probe_max_seconds, self.probe_seconds * (2 ** min(probes, 30)))


@dataclass(frozen=True)
class Pause:
    """An open breaker as shown to users: the dependency, since when (UTC), the fault that opened it,
    the next probe (UTC), how many probes failed."""

    dependency: str
    since: datetime
    reason: str
    next_probe_at: datetime
    probes: int = 0

    def describe(self) -> str:
        """``paused: gateway unavailable since 2026-12-01 20:31:02 UTC``."""
        return f"paused: {self.dependency} unavailable since {self.since:%Y-%m-%d %H:%M:%S} UTC"


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
class _State:
    since: datetime
    reason: str
    next_probe: float  # monotonic
    probes: int = 0
    probing: bool = False
    persisted: bool = False


class Breakers:
    """The breakers of a process, one per dependency (thread-safe). Closed unless listed in ``_open``."""

    def __init__(self, policy: BreakerPolicy | None = None) -> None:
        self._lock = threading.Lock()
        self._policy = policy
        self._faults: dict[str, int] = {}
        self._open: dict[str, _State] = {}
        self._sink: BreakerSink | None = None

    @property
    def policy(self) -> BreakerPolicy:
        """The policy given, else the one the settings give now."""
        return self._policy or BreakerPolicy.from_settings()

    def attach(self, sink: BreakerSink | None) -> None:
        """Mirror transitions to ``sink`` from now on (None: stop)."""
        with self._lock:
            self._sink = sink

    # -- outcomes ------------------------------------------------------------------------------------

    def failed(self, dependency: str, message: str) -> None:
        """Count an infrastructure fault of ``dependency``: the ``failures``-th in a row opens its breaker;
        a failed probe reschedules the next one with a doubled delay."""
        policy = self.policy
        with self._lock:
            state = self._open.get(dependency)
            if state is None:
                n = self._faults.get(dependency, 0) + 1
                self._faults[dependency] = n
                if n < policy.failures:
                    return
                state = _State(datetime.now(UTC), message[:500], time.monotonic() + policy.delay(0))
                self._open[dependency] = state
                log.warning("%s unavailable after %d faults in a row: pausing its stages (%s)",
                            dependency, n, message[:200])
            elif state.probing:
                state.probing = False
                state.probes += 1
                state.next_probe = time.monotonic() + policy.delay(state.probes)
            else:
                return  # a request in flight when the breaker opened: no news
            pause, sink = self._pause(dependency, state), self._sink
        self._mirror(sink, "opened", pause)

    def succeeded(self, dependency: str) -> None:
        """``dependency`` answered: reset its fault count and close its breaker (automatic resume)."""
        with self._lock:
            self._faults.pop(dependency, None)
            state = self._open.pop(dependency, None)
            sink = self._sink
        if state is not None:
            log.warning("%s answers again: resuming its stages (paused since %s)", dependency,
                        f"{state.since:%H:%M:%S}")
            self._mirror(sink, "closed", dependency)

    # -- what workers may claim ----------------------------------------------------------------------

    def open_dependencies(self) -> frozenset[str]:
        """The dependencies whose breaker is open."""
        with self._lock:
            return frozenset(self._open)

    def try_probe(self, dependency: str) -> bool:
        """Take the probe of an open ``dependency`` if it is due and nobody probes (then call
        :meth:`end_probe` after the probing claim). False when closed, not due or taken."""
        with self._lock:
            state = self._open.get(dependency)
            if state is None or state.probing or time.monotonic() < state.next_probe:
                return False
            state.probing = True
            return True

    def end_probe(self, dependency: str) -> None:
        """The probing claim ended without a verdict (it never reached the dependency, or nothing was
        claimable): the next probe may start at once. A verdict already ended it."""
        with self._lock:
            state = self._open.get(dependency)
            if state is not None:
                state.probing = False

    def pauses(self) -> list[Pause]:
        """The open breakers, by dependency."""
        with self._lock:
            return [self._pause(d, s) for d, s in sorted(self._open.items())]

    # -- several processes ---------------------------------------------------------------------------

    def adopt(self, shared: Iterable[Pause]) -> None:
        """Align with the pauses PostgreSQL records (other processes' breakers): open the ones recorded,
        close the ones this process persisted that another process has since closed."""
        shared = {p.dependency: p for p in shared}
        now_wall, now = datetime.now(UTC), time.monotonic()
        with self._lock:
            for dependency, pause in shared.items():
                if dependency not in self._open:
                    wait = max(0.0, (pause.next_probe_at - now_wall).total_seconds())
                    self._open[dependency] = _State(pause.since, pause.reason, now + wait, pause.probes,
                                                    persisted=True)
                else:
                    self._open[dependency].persisted = True
            for dependency in [d for d, s in self._open.items() if s.persisted and d not in shared]:
                del self._open[dependency]
                self._faults.pop(dependency, None)

    def reset(self) -> None:
        """Forget every breaker and count (tests; ``ki.services.reset``)."""
        with self._lock:
            self._faults.clear()
            self._open.clear()

    # -- internals -----------------------------------------------------------------------------------

    @staticmethod
    def _pause(dependency: str, state: _State) -> Pause:
        wait = max(0.0, state.next_probe - time.monotonic())
        return Pause(dependency, state.since, state.reason, datetime.now(UTC) + timedelta(seconds=wait), state.probes)

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
    """Report that ``dependency`` answered (the gateway and Docling clients call this on every answer)."""
    BREAKERS.succeeded(dependency)
