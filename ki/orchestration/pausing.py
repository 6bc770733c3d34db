"""Which stages an executor may claim while circuit breakers are open (:mod:`ki.adapters.breaker`).

The local runner's workers claim any eligible row except those of paused stages, and one of them
takes a dependency's probe when it is due (:meth:`ClaimGate.probe`); a Hatchet task, which drives
one row, asks :meth:`ClaimGate.admit` before it claims and waits while its stage is paused. Both read
the stage → dependencies table once (:func:`ki.adapters.breaker.stage_dependencies`) and follow the pauses
other processes recorded (:meth:`ClaimGate.refresh`, about once a second). The gate records the
breakers this process opens in PostgreSQL (``ki.store.pauses.PauseSink``) while it is in use, and
tells the breakers the host and port of each configured dependency, which a probe connects to before
it sends a request (:func:`ki.adapters.breaker.dependency_endpoints`).
"""

from __future__ import annotations

import logging
import threading
import time

from ki.adapters.breaker import BREAKERS, dependency_endpoints, stage_dependencies
from ki.domain.context import PipelineContext
from ki.store import pauses

log = logging.getLogger(__name__)

#: How often the pauses recorded by other processes are read (s, once per process).
REFRESH_SECONDS = 1.0

_read_lock = threading.Lock()
_last_read = 0.0


class ClaimGate:
    """The pause rules for the executors of one process on ``ctx`` (thread-safe; cheap to make: the
    breakers and the refresh clock are the process's)."""

    def __init__(self, ctx: PipelineContext) -> None:
        self.ctx = ctx
        self.needs = stage_dependencies(ctx.config)
        BREAKERS.locate(dependency_endpoints(ctx.config))  # probes begin with a TCP connect (ki.adapters.breaker)

    def attach(self) -> None:
        """Record the breakers this process opens in ``ctx``'s database from now on; calls to a paused
        dependency that some stage needs fail fast until this process's probe finds it answering, and when it
        does, the rows of the stages needing it that the outage failed are due at once."""
        stages_of: dict[str, set[str]] = {}
        for stage, needs in self.needs.items():
            for dependency in needs:
                stages_of.setdefault(dependency, set()).add(stage)
        sink = pauses.PauseSink(self.ctx.db.engine, self.ctx.worker_id,
                                stages={d: frozenset(s) for d, s in stages_of.items()})
        BREAKERS.attach(sink, probed=set().union(*self.needs.values()))

    def refresh(self) -> None:
        """At most every :data:`REFRESH_SECONDS`: adopt the pauses other processes recorded (and their end)."""
        global _last_read
        now = time.monotonic()
        with _read_lock:
            if now - _last_read < REFRESH_SECONDS:
                return
            _last_read = now
        try:
            with self.ctx.db.engine.connect() as conn:
                BREAKERS.adopt(pauses.read_pauses(conn), read_at=now)
        except Exception:  # noqa: BLE001 - a database outage is the executors' to report
            log.debug("reading the recorded pauses failed", exc_info=True)

    def paused(self) -> list[str]:
        """The stages not to claim now: those needing a dependency whose breaker is open."""
        down = BREAKERS.open_dependencies()
        return sorted(s for s, needs in self.needs.items() if needs & down) if down else []

    def probe(self) -> tuple[str, list[str]] | None:
        """Take a due probe: ``(dependency, stages not to claim)`` — the probing claim may only take a row
        of a stage needing that dependency and no other one that is down. None when no probe is due.
        The caller ends it with ``BREAKERS.end_probe(dependency)`` after the probing claim."""
        down = BREAKERS.open_dependencies()
        for dependency in sorted(down):
            if BREAKERS.try_probe(dependency):
                probing = {s for s, needs in self.needs.items()
                           if dependency in needs and not (needs - {dependency}) & down}
                return dependency, sorted(set(self.needs) - probing)
        return None

    def admit(self, stage: str) -> tuple[bool, str | None]:
        """May a row of ``stage`` be claimed now? ``(True, None)`` when none of its dependencies is down;
        ``(True, dependency)`` when it runs as that dependency's probe (end it with ``BREAKERS.end_probe``);
        ``(False, None)`` while paused."""
        self.refresh()
        down = self.needs.get(stage, frozenset()) & BREAKERS.open_dependencies()
        if not down:
            return True, None
        if len(down) == 1:
            (dependency,) = down
            if BREAKERS.try_probe(dependency):
                return True, dependency
        return False, None
