"""Following changes of API tokens: ``LISTEN ki_api_token`` on a connection of its own.

Migration ``0032_token_change_notices`` makes every statement that changes a column authentication reads
(``revoked_at``, the hash, scopes, principal, name …; not ``last_used_at``), deletes or truncates ``api_token``
send ``NOTIFY ki_api_token`` — delivered when its transaction commits, to every session listening then.
:func:`follow_token_changes` is that listening session; :mod:`ki.app.token_cache` trusts what it cached only
while it runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from sqlalchemy.engine import Engine

#: The channel migration ``0032_token_change_notices``'s trigger notifies.
CHANNEL = "ki_api_token"
#: Seconds the listener waits for a notice at a time before it looks at its ``stop`` event.
STOP_POLL_SECONDS = 0.25


def follow_token_changes(engine: Engine, *, listening: Callable[[int], None], changed: Callable[[], None],
                         stop: threading.Event, heartbeat: float = 0.5) -> None:
    """Listen for token changes until ``stop`` is set, on a connection taken out of ``engine``'s pool for good.

    Calls ``listening(backend_pid)`` (the listening session's server process) once ``LISTEN`` is in effect
    (committed), then again after every heartbeat round trip (``SELECT 1`` every ``heartbeat`` seconds): each call
    says "the session is alive, and the notices of the changes committed before its round trip began have been
    passed to ``changed()``" (PostgreSQL sends a listening session's pending notices before it reports a query
    done). Calls ``changed()`` for every notice (payload: the changing statement's kind).

    Raises: the driver's errors when the connection fails (the caller treats that as "no longer listening" and
    calls again to reconnect). The connection is closed on return or error.
    """
    raw = engine.raw_connection()
    conn = raw.driver_connection
    raw.detach()  # its own session for as long as it listens; never handed back to the pool
    try:
        conn.autocommit = True
        conn.execute(f"LISTEN {CHANNEL}")
        pid = conn.info.backend_pid
        listening(pid)
        beat = time.monotonic()
        while not stop.is_set():
            for _notice in conn.notifies(timeout=min(heartbeat, STOP_POLL_SECONDS)):
                changed()
            if time.monotonic() - beat < heartbeat:
                continue
            beat = time.monotonic()
            conn.execute("SELECT 1")
            for _notice in conn.notifies(timeout=0):  # any that arrived with the round trip's answer
                changed()
            listening(pid)
    finally:
        conn.close()
