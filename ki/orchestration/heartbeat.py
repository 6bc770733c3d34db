"""One background thread per process that renews every claim this process holds.

DESIGN.md "Leases with fencing": long stages renew their claim, so
``claim_timeout_seconds`` measures silence, not duration. One thread and one
UPDATE per interval serve all of a process's claims.
"""

from __future__ import annotations

import logging
import threading

from ki.store.claims import Claim, renew_claims
from ki.store.db import Database

log = logging.getLogger(__name__)

class ClaimKeeper:
    """Renews registered claims every ``interval_seconds`` until stopped.

    Use ``with keeper.holding(claim): ...`` around a handler call.
    """

    def __init__(self, db: Database, interval_seconds: float):
        self.db = db
        self.interval_seconds = max(0.2, interval_seconds)
        self._claims: dict[int, Claim] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
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
        if self._thread is not None:
            self._thread.join(timeout=5)

    def add(self, claim: Claim) -> None:
        with self._lock:
            self._claims[claim.row_id] = claim

    def discard(self, claim: Claim) -> None:
        with self._lock:
            self._claims.pop(claim.row_id, None)

    def renew_all(self) -> int:
        """Renew every held claim now; returns how many rows were refreshed."""
        with self._lock:
            claims = list(self._claims.values())
        if not claims:
            return 0
        with self.db.engine.begin() as conn:
            return renew_claims(conn, claims)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_seconds):
            try:
                self.renew_all()
            except Exception:  # noqa: BLE001 - a failed renewal is retried next tick; the claim may go stale
                log.warning("claim renewal failed; retrying in %.1f s", self.interval_seconds, exc_info=True)
