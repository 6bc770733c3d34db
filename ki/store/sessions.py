"""Every statement on ``console_session``: the page's sign-ins (migration ``0026_console_sessions``).

README "Console": the cookie carries a random session id; only its SHA-256 is stored, bound to the token
that signed in. A session is live while it is not revoked (sign-out), not expired, and its token is live.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.store.tokens import _COLUMNS, TOUCH_HIT, TokenRow

_TOKEN_COLUMNS = ", ".join(f"t.{c.strip()}" for c in _COLUMNS.split(","))


def insert_session(conn: Connection, *, session_hash: str, token_id: int, lifetime_seconds: int) -> None:
    """A new session for ``token_id`` that expires ``lifetime_seconds`` from now."""
    conn.execute(text("INSERT INTO console_session (session_hash, token_id, expires_at) "
                      "VALUES (:h, :t, now() + make_interval(secs => :s))"),
                 {"h": session_hash, "t": token_id, "s": lifetime_seconds})


# -- name: live_session_token --
# The token of a live session (not revoked, not expired, its token not revoked), noting the token's use
# at most once a minute like a bearer request.
LIVE_SQL = text(f"""
WITH hit AS (SELECT {_TOKEN_COLUMNS} FROM console_session s JOIN api_token t ON t.id = s.token_id
             WHERE s.session_hash = :h AND s.revoked_at IS NULL AND s.expires_at > now() AND t.revoked_at IS NULL),
{TOUCH_HIT}
SELECT * FROM hit
""")


def live_session_token(conn: Connection, session_hash: str) -> TokenRow | None:
    """The live token behind the live session ``session_hash``, or None."""
    row = conn.execute(LIVE_SQL, {"h": session_hash}).first()
    return TokenRow.from_row(row) if row is not None else None


def revoke_session(conn: Connection, session_hash: str) -> bool:
    """End a session (sign-out); False when it was not live."""
    return conn.execute(text("UPDATE console_session SET revoked_at = now() WHERE session_hash = :h "
                             "AND revoked_at IS NULL RETURNING id"), {"h": session_hash}).first() is not None


def purge_sessions(conn: Connection) -> int:
    """Delete sessions that ended more than a day ago (expired or revoked); returns how many."""
    return conn.execute(text("DELETE FROM console_session WHERE coalesce(revoked_at, expires_at) "
                             "< now() - interval '1 day'")).rowcount
