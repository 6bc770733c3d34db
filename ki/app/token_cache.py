"""The tokens ``ki serve`` authenticated, kept in memory while PostgreSQL tells it of every token change.

DESIGN.md "The operator surface is one app" (every request authenticates with its token). Every request read the
token table: a pooled connection, a transaction and a statement that also refreshes ``last_used_at`` — under 32
concurrent readers during an insert (``bench/api_concurrent.py``) a quarter of the server's request time. A token
changes almost never; what must hold is that a revoked token is refused from the next request on, whoever revoked
it (this server's ``DELETE /api/tokens/{id}``, ``ki token revoke`` in another process, an operator's SQL).

:class:`TokenCache` keeps the live token of a bearer value (by its SHA-256) after one successful database lookup
and answers from memory — only while its listener (:func:`ki.store.token_notices.follow_token_changes`, a thread
with a connection of its own listening on the channel every token change notifies in its committing
transaction) is confirmed:

* **Every change drops everything.** A notice bumps the cache's generation; an entry is served only under the
  generation it was stored in, and a lookup whose generation changed while it read the database stores nothing
  (it may have read the token before the change committed).
* **No listener, no cache.** Until ``LISTEN`` is in effect, after the listener's connection fails (it reconnects
  with a back-off), and when its heartbeat (a round trip every :data:`HEARTBEAT_SECONDS`) is older than
  :data:`CONFIRMED_SECONDS` (a connection that died without saying so), every request reads the database as
  before, and nothing is stored. Losing the listener bumps the generation too.
* **A change made in this process is forgotten here at once**: :func:`ki.app.tokens.revoke` calls every
  cache's :meth:`TokenCache.forget` after its transaction committed (this server's ``DELETE /api/tokens/{id}``), without
  waiting for the notice.
* **Bounded.** An entry lives :data:`MAX_AGE_SECONDS` (then the lookup runs again, refreshing ``last_used_at``:
  it stays within two minutes of the truth instead of one); at most :data:`MAX_ENTRIES` entries. Unknown and
  revoked values are never stored, so a new token works at once and a guess always costs a lookup. Console
  sessions (the cookie) are not cached: they expire by time and are read per request as before.

What remains is the notice's flight: PostgreSQL signals the listening session when the revoking transaction
commits, before that transaction's client hears "committed"; the listening session then sends the notice and this
process's listener thread reads it. A request that reaches the server in those microseconds after ``ki token
revoke`` returned could still pass; any request after that is refused.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.engine import Engine

from ki.app.tokens import TOKEN_PREFIX, follow_local_changes, hash_token
from ki.store import tokens
from ki.store.token_notices import follow_token_changes
from ki.store.tokens import TokenRow

log = logging.getLogger(__name__)

#: Seconds between the listener's heartbeats; an entry is served only within :data:`CONFIRMED_SECONDS` of one.
HEARTBEAT_SECONDS = 0.5
CONFIRMED_SECONDS = 2.0
#: Seconds an entry is served before the database is read again (and ``last_used_at`` refreshed).
MAX_AGE_SECONDS = 60.0
MAX_ENTRIES = 1024
#: Seconds the listener waits before reconnecting after its connection failed.
RECONNECT_SECONDS = 1.0


@dataclass(frozen=True)
class _Entry:
    row: TokenRow
    generation: int
    stored: float


class TokenCache:
    """See the module doc. Thread-safe; :meth:`start` the listener, :meth:`stop` it at shutdown.

    Args:
        engine: ki's database (lookups use its pool; the listener takes one connection out of it).
        heartbeat / confirmed / max_age: seconds (see the module constants).
        clock: the monotonic clock.
    """

    def __init__(self, engine: Engine, *, heartbeat: float = HEARTBEAT_SECONDS, confirmed: float = CONFIRMED_SECONDS,
                 max_age: float = MAX_AGE_SECONDS, max_entries: int = MAX_ENTRIES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.engine = engine
        self.heartbeat, self.confirmed, self.max_age, self.max_entries = heartbeat, confirmed, max_age, max_entries
        self.clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._generation = 0
        self._confirmed_at: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.listener_pid: int | None = None  # the listening session's PostgreSQL process (diagnostics, tests)
        self.hits = 0  # requests answered from memory
        self.lookups = 0  # requests that read the database
        follow_local_changes(self)

    # -- the listener ----------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the listener thread (idempotent); the cache serves once it has confirmed ``LISTEN``."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._listen, name="ki-token-notices", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the listener and drop every entry (the cache serves nothing afterwards)."""
        self._stop.set()
        self._lost()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                follow_token_changes(self.engine, listening=self._listening, changed=self.forget, stop=self._stop,
                                     heartbeat=self.heartbeat)
            except Exception as exc:  # the connection failed: no cache until it is back
                self._lost()
                log.warning("token change listener lost (%s): every request reads the token table until it is back",
                            exc)
                self._stop.wait(RECONNECT_SECONDS)
            else:
                self._lost()

    def _listening(self, backend_pid: int) -> None:
        with self._lock:
            self._confirmed_at = self.clock()
            self.listener_pid = backend_pid

    def _lost(self) -> None:
        with self._lock:
            self._confirmed_at = None
            self._generation += 1
            self._entries.clear()

    def forget(self) -> None:
        """Drop every entry: a token changed (called by the listener for a notice, and by this server after it
        revoked a token)."""
        with self._lock:
            self._generation += 1
            self._entries.clear()

    def listening(self) -> bool:
        """Whether the cache serves now (``LISTEN`` in effect and the last heartbeat recent)."""
        with self._lock:
            return self._serving(self.clock())

    def wait_listening(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for :meth:`listening` (tests and benches); returns it."""
        deadline = self.clock() + timeout
        while not self.listening():
            if self.clock() > deadline or self._thread is None:
                return False
            self._stop.wait(0.02)
        return True

    def _serving(self, now: float) -> bool:
        return self._confirmed_at is not None and now - self._confirmed_at <= self.confirmed

    # -- lookups ---------------------------------------------------------------------------------------------
    def cached(self, token: str) -> TokenRow | None:
        """The live token ``token`` is when memory can answer now (the module doc's conditions), else None (a
        lookup is needed: :meth:`authenticate`). Never reads the database, never waits: an async route's fast
        path."""
        key = _key(token)
        if key is None:
            return None
        with self._lock:
            return self._hit(key, self.clock())

    def _hit(self, key: str, now: float) -> TokenRow | None:
        if not self._serving(now):
            return None
        entry = self._entries.get(key)
        if entry is None or entry.generation != self._generation or now - entry.stored > self.max_age:
            return None
        self.hits += 1
        return entry.row

    def authenticate(self, token: str) -> TokenRow | None:
        """The live token ``token`` is, or None (unknown, malformed or revoked): :func:`ki.app.tokens.authenticate`,
        answered from memory when the module doc's conditions hold."""
        key = _key(token)
        if key is None:
            return None
        with self._lock:
            now = self.clock()
            row = self._hit(key, now)
            if row is not None:
                return row
            serving, generation = self._serving(now), self._generation
            self.lookups += 1
        with self.engine.begin() as conn:
            row = tokens.find_live_token(conn, key)
        if row is not None and serving:
            with self._lock:
                if self._generation == generation and self._serving(self.clock()):
                    self._entries[key] = _Entry(row, generation, now)
                    self._entries.move_to_end(key)
                    while len(self._entries) > self.max_entries:
                        self._entries.popitem(last=False)
        return row


def _key(token: str) -> str | None:
    """The cache key of a bearer value (its SHA-256 hex), or None for a value no token can be (the guard of
    :func:`ki.app.tokens.authenticate`)."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    return hash_token(token)
