"""Making, finding and revoking API tokens (``ki token``, ``/api/tokens``).

A token is ``ki_`` followed by 43 URL-safe characters (32 random bytes); only its SHA-256 is
stored (a token has 256 bits of entropy, so a fast hash is as strong as a slow one) together
with its first :data:`PREFIX_CHARS` characters for listings. Creation and revocation are
written to the audit log with the acting name (``cli`` for the command line).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import weakref
from typing import Any, Protocol

from sqlalchemy.engine import Engine

from ki.app.scopes import check_scope_names
from ki.store import audit, sessions, tokens
from ki.store.tokens import TokenRow

TOKEN_PREFIX = "ki_"
PREFIX_CHARS = 10
#: A console session id (the page's cookie) and how long it lives (seconds).
SESSION_PREFIX = "kis_"
SESSION_SECONDS = 8 * 3600
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._@:+-]{0,99}$")


class _Forgets(Protocol):
    def forget(self) -> None: ...


_FOLLOWERS: weakref.WeakSet[Any] = weakref.WeakSet()


def follow_local_changes(cache: _Forgets) -> None:
    """Have :func:`revoke` call ``cache.forget()`` after every revocation this process commits (held weakly:
    :class:`ki.app.token_cache.TokenCache` registers itself)."""
    _FOLLOWERS.add(cache)


def hash_token(token: str) -> str:
    """SHA-256 hex of a token string."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(engine: Engine, *, name: str, scopes: list[str], principal: str | None = None,
                 created_by: str = "cli") -> tuple[TokenRow, str]:
    """Make a token; returns (its row, the token itself — shown once, never stored).

    Raises:
        ValueError: an empty or unusable name, a name a live token already has, or an unknown scope.
    """
    name = name.strip()
    if not _NAME.match(name):
        raise ValueError("a token name is 1-100 letters, digits, spaces or ._@:+- and starts with a letter "
                         f"or digit, not {name!r}")
    scopes = check_scope_names(scopes)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with engine.begin() as conn:
        if tokens.live_name_taken(conn, name):
            raise ValueError(f"a live token is already named {name!r}: revoke it first or pick another name")
        row = tokens.insert_token(conn, name=name, token_hash=hash_token(token), prefix=token[:PREFIX_CHARS],
                                  scopes=scopes, principal=principal or None, created_by=created_by)
        audit.record_audit(conn, actor=created_by, action="token_create",
                           details={"token_id": row.id, "name": name, "scopes": scopes, "principal": principal})
    return row, token


def revoke(engine: Engine, token_id: int, *, actor: str = "cli") -> TokenRow:
    """Revoke a live token (it fails authentication from the next request on: the token caches of this process
    drop it at once, a ``ki serve`` elsewhere at the change's notice, :mod:`ki.app.token_cache`).

    Raises:
        LookupError: no live token has ``token_id``.
    """
    with engine.begin() as conn:
        row = tokens.revoke_token(conn, token_id)
        if row is None:
            known = tokens.get_token(conn, token_id)
            raise LookupError(f"token {token_id} is already revoked" if known else f"no token has id {token_id}")
        audit.record_audit(conn, actor=actor, action="token_revoke", details={"token_id": row.id, "name": row.name})
    for cache in list(_FOLLOWERS):  # a server in this process drops it now, not at the change's notice
        cache.forget()
    return row


def authenticate(engine: Engine, token: str) -> TokenRow | None:
    """The live token ``token`` is, or None (unknown, malformed or revoked)."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    with engine.begin() as conn:
        return tokens.find_live_token(conn, hash_token(token))


def token_json(row: TokenRow) -> dict[str, Any]:
    """A token row as JSON (``ki token list --json``, ``GET /api/tokens``): never the hash."""
    return {"id": row.id, "name": row.name, "prefix": row.prefix, "scopes": list(row.scopes),
            "principal": row.principal, "created_by": row.created_by, "created_at": row.created_at.isoformat(),
            "last_used_at": row.last_used_at.isoformat() if row.last_used_at else None,
            "revoked_at": row.revoked_at.isoformat() if row.revoked_at else None}


def open_session(engine: Engine, row: TokenRow) -> str:
    """A new console session bound to the live token ``row``; returns the session id for the cookie (only
    its hash is stored). Ended sessions older than a day are purged on the way."""
    session = SESSION_PREFIX + secrets.token_urlsafe(32)
    with engine.begin() as conn:
        sessions.purge_sessions(conn)
        sessions.insert_session(conn, session_hash=hash_token(session), token_id=row.id,
                                lifetime_seconds=SESSION_SECONDS)
    return session


def session_token(engine: Engine, session: str) -> TokenRow | None:
    """The live token behind a live console session id, or None (unknown, expired, signed out, revoked)."""
    if not session.startswith(SESSION_PREFIX) or len(session) > 200:
        return None
    with engine.begin() as conn:
        return sessions.live_session_token(conn, hash_token(session))


def close_session(engine: Engine, session: str) -> bool:
    """Sign a console session out (its id stops working at once); False when it was not live."""
    if not session.startswith(SESSION_PREFIX) or len(session) > 200:
        return False
    with engine.begin() as conn:
        return sessions.revoke_session(conn, hash_token(session))
