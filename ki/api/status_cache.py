"""The bucket counts behind ``GET /api/status``, counted once for every open page.

Spec: insertion-pipeline.md "The console page" (GET /api/status is polled every 5 s while a run is
active) (p95 <= 50 ms with 50,000 documents' rows); prior-art.md §8 (a dashboard must not
overload the database: count-by-state queries at millions of rows are what users of other consoles
complain about). The one bucket query scans every ``processing_state`` row (an index-only scan: 350,000
rows at 50,000 documents, tens of milliseconds on a quiet machine, several times that under load). So
the server does not run it per request: while anybody reads the status, a background thread re-counts
every :data:`MIN_INTERVAL_SECONDS` (or 5× the last count's duration, if longer), and requests answer
from the newest count — never older than that interval plus one count; ``generated_at`` in the answer
says when it was taken. N open pages cost one count per interval, not N. The first read after
:data:`IDLE_SECONDS` without readers, and the first after this server changed something (a save, a
retry, a launch: :meth:`BucketCache.invalidate`), counts synchronously, so what a person just did is
on the screen at once.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.engine import Engine

from ki.store.blocked import blocked_counts
from ki.store.status import bucket_counts

log = logging.getLogger(__name__)

MIN_INTERVAL_SECONDS = 1.0
IDLE_SECONDS = 30.0


@dataclass(frozen=True)
class Snapshot:
    """One count: ``{stage: {bucket: n}}``, when it was taken (UTC), how long it took (s), and
    ``blocked`` ``{stage: n}``: of each stage's waiting rows, those a quarantined earlier stage blocks."""

    counts: dict[str, dict[str, int]]
    at: datetime
    monotonic: float
    seconds: float
    blocked: dict[str, int] | None = None


class BucketCache:
    """See the module doc. Thread-safe; one per app."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._last_read = 0.0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def _count(self) -> Snapshot:
        started = time.monotonic()
        with self.engine.connect() as conn:
            counts = bucket_counts(conn)
            blocked = blocked_counts(conn)
        done = time.monotonic()
        return Snapshot(counts, datetime.now(UTC), done, done - started, blocked)

    def _interval(self, snap: Snapshot) -> float:
        return max(MIN_INTERVAL_SECONDS, 5 * snap.seconds)

    def get(self) -> Snapshot:
        """The newest count (counting now when there is none, or it is older than the refresh allows)."""
        now = time.monotonic()
        with self._lock:
            self._last_read = now
            snap = self._snapshot
            running = self._thread is not None and self._thread.is_alive()
        if snap is not None and running and now - snap.monotonic <= 2 * self._interval(snap) + snap.seconds:
            return snap
        snap = self._count()
        with self._lock:
            if self._snapshot is None or self._snapshot.monotonic < snap.monotonic:
                self._snapshot = snap
            if self._thread is None or not self._thread.is_alive():
                self._stop.clear()
                self._thread = threading.Thread(target=self._refresh, name="ki-api-status", daemon=True)
                self._thread.start()
        return snap

    def invalidate(self) -> None:
        """Forget the count: the next read counts synchronously (after a change this server made)."""
        with self._lock:
            self._snapshot = None

    def _refresh(self) -> None:
        while True:
            with self._lock:
                snap = self._snapshot
                idle = time.monotonic() - self._last_read > IDLE_SECONDS
            if idle:
                return
            wait = self._interval(snap) if snap is not None else MIN_INTERVAL_SECONDS
            if self._stop.wait(wait):
                return
            try:
                fresh = self._count()
            except Exception as exc:  # noqa: BLE001 - keep serving the last count; readers recount when it ages
                log.warning("status count failed: %s", exc)
                return
            with self._lock:
                if self._snapshot is None or self._snapshot.monotonic < fresh.monotonic:
                    self._snapshot = fresh

    def stop(self) -> None:
        """Stop the refresher (app shutdown)."""
        self._stop.set()
