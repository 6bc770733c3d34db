"""One background thread per process that renews every claim this process holds, until its deadline.

DESIGN.md "Leases with fencing": long stages renew their claim, so ``claim_timeout_seconds``
measures silence, not duration. One thread and one UPDATE per interval serve all of a process's
claims. Work-queue spec "Lifecycle deadline": a claim is renewed only until its stage's deadline
(``pipeline.stages.<stage>.timeout_seconds``); past it the keeper stops renewing it and calls the
claim's ``on_expired`` (the executor records ``StageTimeout`` under the fencing token and abandons
the handler: see ``ki.orchestration.execute``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ki.store.claims import Claim, renew_claims
from ki.store.db import Database

log = logging.getLogger(__name__)


@dataclass
class _Held:
    claim: Claim
    deadline: float | None  # on the keeper's clock; None: renewed for as long as it is held
    on_expired: Callable[[], None] | None


class ClaimKeeper:
    """Renews registered claims every ``interval_seconds`` until stopped, each until its deadline.

    Args:
        db: the database the claims live in.
        interval_seconds: renewal period (s, at least 0.2).
        clock: monotonic seconds (tests inject one); deadlines are measured on it.
    """

    def __init__(self, db: Database, interval_seconds: float, *, clock: Callable[[], float] = time.monotonic):
        self.db = db
        self.interval_seconds = max(0.2, interval_seconds)
        self.clock = clock
        self._claims: dict[int, _Held] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ClaimKeeper:
        """Start the renewal thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="ki-claim-keeper", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the renewal thread."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def add(self, claim: Claim, *, timeout_seconds: float | None = None,
            on_expired: Callable[[], None] | None = None) -> None:
        """Hold ``claim``: renew it until ``timeout_seconds`` (s from now; None: no deadline) pass, then
        drop it and call ``on_expired()`` from the keeper's thread (its errors are logged)."""
        deadline = None if timeout_seconds is None else self.clock() + timeout_seconds
        with self._lock:
            self._claims[claim.row_id] = _Held(claim, deadline, on_expired)
        if deadline is not None:
            self._wake.set()  # the loop may have to wake sooner than its interval

    def discard(self, claim: Claim) -> None:
        """Stop holding ``claim`` (its handler returned)."""
        with self._lock:
            held = self._claims.get(claim.row_id)
            if held is not None and held.claim.token == claim.token:
                del self._claims[claim.row_id]

    def expire_due(self) -> int:
        """Drop every claim past its deadline and call its ``on_expired``; returns how many expired."""
        now = self.clock()
        with self._lock:
            due = [h for h in self._claims.values() if h.deadline is not None and h.deadline <= now]
            for held in due:
                del self._claims[held.claim.row_id]
        for held in due:
            if held.on_expired is None:
                continue
            try:
                held.on_expired()
            except Exception:  # noqa: BLE001 - the row stays running; stale-claim recovery takes it
                log.warning("recording the deadline of %s/%s failed", held.claim.stage,
                            held.claim.source_object_id, exc_info=True)
        return len(due)

    def renew_all(self) -> int:
        """Renew every held claim within its deadline now; returns how many rows were refreshed."""
        self.expire_due()
        with self._lock:
            claims = [h.claim for h in self._claims.values()]
        if not claims:
            return 0
        with self.db.engine.begin() as conn:
            return renew_claims(conn, claims)

    def _next_wait(self, next_renewal: float) -> float:
        with self._lock:
            deadlines = [h.deadline for h in self._claims.values() if h.deadline is not None]
        until = min([next_renewal, *deadlines])
        return max(0.0, until - self.clock())

    def _loop(self) -> None:
        next_renewal = self.clock() + self.interval_seconds
        while not self._stop.is_set():
            self._wake.wait(self._next_wait(next_renewal))
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.expire_due()
                if self.clock() >= next_renewal:
                    next_renewal = self.clock() + self.interval_seconds
                    self.renew_all()
            except Exception:  # noqa: BLE001 - a failed renewal is retried next tick; the claim may go stale
                log.warning("claim renewal failed; retrying in %.1f s", self.interval_seconds, exc_info=True)
