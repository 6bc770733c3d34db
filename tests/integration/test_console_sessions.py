"""The console's cookie is a server-side session, and ki's data files are private — real server, real ``ki``.

The reproductions: the cookie was the raw long-lived API token (logout could not end it; every service on
the host received it), ``POST /login`` without an Origin header was accepted, and the search index files
were world-readable (0644) while blobs are 0600. Real PostgreSQL, real uvicorn on a loopback port, the
real ``ki insert``. Cost: ~30-60 s.
"""

from __future__ import annotations

import os
import stat

import httpx
import pytest
from sqlalchemy import text

from ki.api.app import create_app
from ki.app.tokens import SESSION_SECONDS, create_token, revoke
from tests.helpers.ki_command import KiUser, private_folder
from tests.helpers.served import serve_app

pytestmark = pytest.mark.timeout(600)


def _login(base: str, token: str, origin: str | None) -> httpx.Response:
    headers = {"Origin": origin} if origin else {}
    return httpx.post(f"{base}/login", data={"token": token}, headers=headers, follow_redirects=False)


def test_the_cookie_is_a_session_bound_to_the_token(make_ctx):
    ctx = make_ctx(workers=2)
    row, token = create_token(ctx.db.engine, name="ops", scopes=["read:pipeline"])
    app = create_app(ctx)
    with serve_app(app) as base:
        assert _login(base, token, None).status_code == 403  # no Origin: refused like a foreign one
        assert _login(base, token, "https://evil.example").status_code == 403
        ok = _login(base, token, base)
        assert ok.status_code == 303
        session = ok.cookies["ki_session"]
        assert session.startswith("kis_") and token not in ok.headers["set-cookie"]
        assert f"Max-Age={SESSION_SECONDS}" in ok.headers["set-cookie"]
        jar = {"ki_session": session}
        me = httpx.get(f"{base}/api/session", cookies=jar)
        assert me.status_code == 200 and me.json()["via"] == "cookie" and me.json()["name"] == "ops"
        with ctx.db.engine.connect() as conn:  # only the session id's hash is stored, never the id or the token
            stored = conn.execute(text("SELECT session_hash FROM console_session")).scalars().all()
        assert len(stored) == 1 and session not in stored[0] and token not in stored[0]
        # sign-out ends the session at once, even for a copy of the cookie
        httpx.post(f"{base}/logout", cookies=jar)
        assert httpx.get(f"{base}/api/session", cookies=jar).status_code == 401
        assert httpx.get(f"{base}/api/session", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        # a session expires
        jar = {"ki_session": _login(base, token, base).cookies["ki_session"]}
        assert httpx.get(f"{base}/api/session", cookies=jar).status_code == 200
        with ctx.db.engine.begin() as conn:
            conn.execute(text("UPDATE console_session SET expires_at = now() - interval '1 second' "
                              "WHERE revoked_at IS NULL"))
        assert httpx.get(f"{base}/api/session", cookies=jar).status_code == 401
        # and dies with its token
        jar = {"ki_session": _login(base, token, base).cookies["ki_session"]}
        assert httpx.get(f"{base}/api/session", cookies=jar).status_code == 200
        revoke(ctx.db.engine, row.id)
        assert httpx.get(f"{base}/api/session", cookies=jar).status_code == 401
        page = httpx.get(f"{base}/", cookies=jar, follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"] == "/login?ended=1"
        # the raw token in the cookie is no session
        assert httpx.get(f"{base}/api/session", cookies={"ki_session": token}).status_code == 401


def test_data_directory_files_are_private(tmp_path):
    with private_folder("ki-private-") as base:
        ki = KiUser(base)
        estate = tmp_path / "estate"
        estate.mkdir()
        (estate / "Brief.txt").write_text("Sehr geehrte Frau Halvorsen, anbei der Vergleich.\n", encoding="utf-8")
        ki("insert", str(estate))
        assert "Halvorsen" in ki("search", "Halvorsen").stdout
        search = ki.data_dir / "search"
        found = 0
        for folder, _dirs, files in os.walk(search):
            assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700, folder
            for name in files:
                mode = stat.S_IMODE(os.stat(os.path.join(folder, name)).st_mode)
                assert mode & 0o077 == 0, (name, oct(mode))
                found += 1
        assert found >= 3
        for folder, _dirs, files in os.walk(ki.data_dir / "blobs"):
            for name in files:
                assert stat.S_IMODE(os.stat(os.path.join(folder, name)).st_mode) & 0o077 == 0
