"""``ki serve`` answers a bearer token from memory, and still refuses a revoked token on the next request.

Real PostgreSQL, a real uvicorn server on a loopback port (:func:`tests.helpers.served.serve_app`), the real
``ki token revoke`` in its own process. Each test first shows the token is answered from memory (the cache's hit
count grows while the database lookups do not), so a refusal afterwards is the cache letting go of it, not a cache
that was never used. Cost: ~10-20 s.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from sqlalchemy import text

from ki.api.app import create_app
from ki.app.tokens import create_token
from tests.helpers.ki_command import KI
from tests.helpers.served import serve_app

pytestmark = pytest.mark.timeout(300)


def _get(base: str, token: str, path: str = "/api/status") -> int:
    return httpx.get(base + path, headers={"Authorization": f"Bearer {token}"}, timeout=30).status_code


def _warm(base: str, cache, token: str) -> None:
    """The token is answered from memory: two requests, no database lookup for the second."""
    assert cache.wait_listening(30), "the token change listener did not start"
    assert _get(base, token) == 200
    hits, lookups = cache.hits, cache.lookups
    assert _get(base, token) == 200
    assert cache.hits > hits and cache.lookups == lookups


@contextmanager
def _served_two_tokens(make_ctx) -> Iterator[tuple]:
    """A served app and two ``read:pipeline`` tokens, both answered from memory: (ctx, base URL, the cache, the
    first token's row, the first token, the second token)."""
    ctx = make_ctx(workers=2)
    row, token = create_token(ctx.db.engine, name="reader", scopes=["read:pipeline"])
    _, other = create_token(ctx.db.engine, name="other", scopes=["read:pipeline"])
    app = create_app(ctx)
    cache = app.state.ki.tokens
    with serve_app(app) as base:
        _warm(base, cache, token)
        _warm(base, cache, other)
        yield ctx, base, cache, row, token, other


def test_a_revocation_by_another_process_is_refused_on_the_next_request(make_ctx):
    import subprocess

    with _served_two_tokens(make_ctx) as (ctx, base, cache, row, token, other):
        subprocess.run([*KI, "token", "revoke", str(row.id)], check=True, capture_output=True, timeout=120)
        assert _get(base, token) == 401
        assert _get(base, other) == 200  # the others are read again, and still live
        # an operator's SQL is a change too (no ki code ran)
        _warm(base, cache, other)
        with ctx.db.engine.begin() as conn:
            conn.execute(text("UPDATE api_token SET scopes = '{}' WHERE name = 'other'"))
        deadline = time.monotonic() + 5
        while _get(base, other) == 200:  # the notice's flight (milliseconds), bounded; then refused for good
            assert time.monotonic() < deadline, "a changed token was served from memory for 5 s"
        assert _get(base, other) == 403


def test_a_revocation_through_this_server_is_refused_on_the_next_request(make_ctx):
    ctx = make_ctx(workers=2)
    row, token = create_token(ctx.db.engine, name="reader", scopes=["read:pipeline", "search"])
    _, admin = create_token(ctx.db.engine, name="admin", scopes=["admin"])
    app = create_app(ctx)
    cache = app.state.ki.tokens
    with serve_app(app) as base:
        _warm(base, cache, token)
        answer = httpx.delete(f"{base}/api/tokens/{row.id}", headers={"Authorization": f"Bearer {admin}"})
        assert answer.status_code == 200 and answer.json()["revoked_at"]
        assert _get(base, token) == 401
        assert _get(base, token, "/v1/search?q=Vertrag") == 401


def test_without_its_listener_the_cache_serves_nothing(make_ctx):
    """The listening session ends (terminated by an operator, a server restart): every entry is dropped and the
    token table is read until the listener is back; then the cache serves, and follows changes, again."""
    with _served_two_tokens(make_ctx) as (ctx, base, cache, row, token, other):
        pid = cache.listener_pid
        with ctx.db.engine.begin() as conn:
            assert conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar()
        deadline = time.monotonic() + 10
        while cache.listening() and cache.listener_pid == pid:
            assert time.monotonic() < deadline, "the lost listener was not noticed"
            time.sleep(0.01)
        # the lost listener dropped every entry: both tokens are read again
        lookups = cache.lookups
        assert _get(base, other) == 200 and cache.lookups == lookups + 1
        assert cache.wait_listening(30), "the listener did not come back"
        assert cache.listener_pid != pid
        _warm(base, cache, token)
        _warm(base, cache, other)
        # and it follows changes again
        with ctx.db.engine.begin() as conn:
            conn.execute(text("UPDATE api_token SET revoked_at = now() WHERE id = :i"), {"i": row.id})
        deadline = time.monotonic() + 5
        while _get(base, token) == 200:
            assert time.monotonic() < deadline, "a revoked token was served from memory for 5 s"
        assert _get(base, token) == 401 and _get(base, other) == 200


def test_stopped_server_releases_its_listening_session(make_ctx):
    ctx = make_ctx(workers=2)
    _, token = create_token(ctx.db.engine, name="reader", scopes=["read:pipeline"])
    app = create_app(ctx)
    cache = app.state.ki.tokens
    with serve_app(app) as base:
        _warm(base, cache, token)
        pid = cache.listener_pid
    assert not cache.listening()
    with ctx.db.engine.connect() as conn:
        alive = conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = :p"), {"p": pid}).scalar()
    assert alive == 0
