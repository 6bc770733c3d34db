"""Which files a dependency served, and which met its faults, as this process saw them.

Spec work-queue.md "Poison messages": a fault of a dependency (Docling Serve, the gateway,
OpenSearch) on a file is the file's own when the dependency served *other* files since that file's
faults began and fails for nobody else; ``ki.orchestration.blame`` reads :data:`SERVED` to decide.
The clients already report every answer to :func:`ki.adapters.breaker.succeeded`, which notes it here with the
object the calling thread works on (:func:`working_on`, set by the executor around a handler); the
executor notes every outage-presumed fault. Kept in memory per process (the breakers are per process
too), at most :data:`KEPT` events per dependency; an event costs one ``deque.append`` under a lock.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

#: Events kept per dependency (the oldest are dropped: the evidence is "at least" that many).
KEPT = 4096

_current = threading.local()


@contextmanager
def working_on(source_object_id: int) -> Iterator[None]:
    """Attribute the dependency answers of this thread to ``source_object_id`` while inside (nestable:
    an inline conversion of another object runs inside a handler)."""
    previous = getattr(_current, "oid", None)
    _current.oid = source_object_id
    try:
        yield
    finally:
        _current.oid = previous


def current_object() -> int | None:
    """The object this thread works on (:func:`working_on`), or None."""
    return getattr(_current, "oid", None)


@dataclass(frozen=True)
class Served:
    """What other files met at a dependency since a time (see :meth:`ServedLog.since`).

    Attributes:
        succeeded: answers the dependency gave for other objects (at most :data:`KEPT`).
        last_success: the latest of them (UTC), or None.
        others_failing: another object met an outage-presumed fault of it after ``last_success``.
    """

    succeeded: int
    last_success: datetime | None
    others_failing: bool

    @property
    def file_at_fault(self) -> bool:
        """The dependency served other files and fails for nobody else: the fault is the file's."""
        return self.succeeded > 0 and not self.others_failing


class ServedLog:
    """Per dependency, the recent answers and outage-presumed faults with their object (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ok: dict[str, deque[tuple[datetime, int | None]]] = {}
        self._faults: dict[str, deque[tuple[datetime, int | None]]] = {}

    def success(self, dependency: str, source_object_id: int | None = None) -> None:
        """``dependency`` answered for ``source_object_id`` (default: :func:`current_object`)."""
        oid = current_object() if source_object_id is None else source_object_id
        with self._lock:
            self._ok.setdefault(dependency, deque(maxlen=KEPT)).append((datetime.now(UTC), oid))

    def fault(self, dependency: str, source_object_id: int | None) -> None:
        """An outage-presumed fault of ``dependency`` met by ``source_object_id``."""
        with self._lock:
            self._faults.setdefault(dependency, deque(maxlen=KEPT)).append((datetime.now(UTC), source_object_id))

    def since(self, dependency: str, when: datetime, source_object_id: int) -> Served:
        """What objects other than ``source_object_id`` met at ``dependency`` after ``when`` (UTC)."""
        with self._lock:
            ok = [t for t, oid in self._ok.get(dependency, ()) if t > when and oid != source_object_id]
            last = max(ok) if ok else None
            failing = last is not None and any(
                t > last and oid != source_object_id for t, oid in self._faults.get(dependency, ()))
        return Served(len(ok), last, failing)

    def reset(self) -> None:
        """Forget everything (tests; ``ki.app.wiring.reset``)."""
        with self._lock:
            self._ok.clear()
            self._faults.clear()


#: The process's log (every client and executor of the process shares it).
SERVED = ServedLog()
