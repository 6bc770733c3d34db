"""Which pooled connections are pinged before use: only those idle for a while.

SQLAlchemy's ``pool_pre_ping`` sends a round trip before every checkout. A search checks out seven connections,
a stage execution more, and on a busy 2-core machine each round trip is a context switch to a PostgreSQL
backend competing for the same CPU: under 32 concurrent API readers the pings were ~15 % of a search's wall time.
A connection returned to the pool a moment ago is alive with near certainty, so, as HikariCP does
(``aliveBypassWindowMs``, 500 ms), a connection checked in less than :data:`PING_BYPASS_SECONDS` ago is handed
out without a ping; an older one, or one never checked in, is pinged, and a failed ping discards it and the pool
tries another (SQLAlchemy's ``DisconnectionError`` protocol, as ``pool_pre_ping`` does).

The trade: a server that died within that half second is noticed by the statement instead of the ping — it
fails with the driver's disconnect error (an infrastructure fault everywhere in ki: a stage retries it, the API
answers 503), and SQLAlchemy invalidates the pool, so the next checkout reconnects.

Spec: insertion-pipeline.md "Durability" (an outage quarantines nothing).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError

#: A connection checked in less than this many seconds ago is not pinged at checkout.
PING_BYPASS_SECONDS = 0.5

_KEY = "ki_checked_in_at"


def ping_when_idle(engine: Engine, *, bypass_seconds: float = PING_BYPASS_SECONDS,
                   clock: Callable[[], float] = time.monotonic) -> None:
    """Install the policy on ``engine`` (created with ``pool_pre_ping=False``): a checkout pings the connection
    unless it was checked in less than ``bypass_seconds`` ago (``clock``: monotonic seconds; injectable for
    tests). A failed ping raises ``DisconnectionError`` inside the pool, which discards the connection and checks
    out another (up to SQLAlchemy's three attempts; then the error reaches the caller)."""
    dialect = engine.dialect

    @event.listens_for(engine, "checkin")
    def _checked_in(_dbapi_connection: Any, record: Any) -> None:
        if record is not None:
            record.info[_KEY] = clock()

    @event.listens_for(engine, "checkout")
    def _checking_out(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        last = record.info.get(_KEY)
        if last is not None and clock() - last < bypass_seconds:
            return
        try:
            alive = dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as exc:
            raise DisconnectionError(f"the pooled connection is gone: {exc}") from exc
        if alive is False:
            raise DisconnectionError("the pooled connection did not answer a ping")
