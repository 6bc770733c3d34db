"""A clock a test moves by hand, for code that takes an injectable monotonic clock (``ki.adapters.breaker.Breakers``,
``ki.adapters.cooldown.Cooldowns``): a delay "passes" when the test says so, never by sleeping."""

from __future__ import annotations

import threading


class ManualClock:
    """Monotonic seconds that only :meth:`advance` moves (thread-safe). Call it to read the time."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` (≥ 0) forward."""
        if seconds < 0:
            raise ValueError("a monotonic clock never goes back")
        with self._lock:
            self._now += seconds
