"""Pooled connections are pinged before use only when idle (ki.store.pool_ping), on the real PostgreSQL.

A connection checked in a moment ago is handed out without a round trip; one idle past the window is pinged,
and one whose server process was terminated meanwhile is replaced before the caller sees it. A connection
terminated inside the window fails its statement once (the trade the module documents) and the pool recovers.
"""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import QueuePool

from ki.store.pool_ping import ping_when_idle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def pinged(db_url):
    clock = Clock()
    engine = create_engine(db_url, poolclass=QueuePool, pool_size=1, max_overflow=0)
    ping_when_idle(engine, bypass_seconds=0.5, clock=clock)
    pings: list[int] = []
    real_ping = engine.dialect.do_ping

    def counting_ping(dbapi_connection):
        pings.append(1)
        return real_ping(dbapi_connection)

    engine.dialect.do_ping = counting_ping  # count the policy's pings (the dialect's own, on the real server)
    yield engine, clock, pings
    engine.dispose()


def _backend_pid(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(text("SELECT pg_backend_pid()")).scalar_one()


def _terminate(db_url: str, pid: int) -> None:
    other = create_engine(db_url, poolclass=QueuePool, isolation_level="AUTOCOMMIT")  # a fresh catalog view
    try:
        with other.connect() as conn:
            assert conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar_one() is True
            # wait until the server has really ended it (no fixed sleep: the catalog says so)
            for _ in range(500):
                if not conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = :p"),
                                    {"p": pid}).scalar_one():
                    return
                conn.execute(text("SELECT pg_sleep(0.01)"))
            raise AssertionError(f"backend {pid} did not end")
    finally:
        other.dispose()


def test_a_just_returned_connection_is_not_pinged_an_idle_one_is(pinged):
    engine, clock, pings = pinged
    first = _backend_pid(engine)
    after_connect = len(pings)  # a new connection is pinged once (it was never checked in)
    clock.now += 0.1
    assert _backend_pid(engine) == first
    assert len(pings) == after_connect  # inside the window: no round trip
    clock.now += 5
    assert _backend_pid(engine) == first
    assert len(pings) == after_connect + 1  # idle past the window: pinged, alive, kept


def test_an_idle_connection_whose_server_process_ended_is_replaced_unseen(pinged, db_url):
    engine, clock, pings = pinged
    first = _backend_pid(engine)
    _terminate(db_url, first)
    clock.now += 5
    second = _backend_pid(engine)  # no error reaches the caller
    assert second != first
    assert len(pings) >= 2


def test_inside_the_window_a_dead_connection_fails_once_and_the_pool_recovers(pinged, db_url):
    engine, clock, _pings = pinged
    first = _backend_pid(engine)
    _terminate(db_url, first)
    clock.now += 0.1
    with pytest.raises(OperationalError) as caught, engine.connect() as conn:
        conn.execute(text("SELECT 1"))
    assert caught.value.connection_invalidated
    assert _backend_pid(engine) != first
