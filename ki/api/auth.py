"""Who is calling, and may they: bearer tokens, the page's session cookie, scopes, same origin.

DESIGN.md "The operator surface is one app": every ``/api``
request needs ``Authorization: Bearer <token>`` (none or an unknown/revoked token → 401, a token
without the scope → 403). The page logs in with a token and then carries a server-side session id
(:func:`ki.app.tokens.open_session`: bound to the token, expiring, ended at sign-out and with the
token) in an HttpOnly, SameSite=Strict cookie (:data:`COOKIE_NAME`); a state-changing request
authenticated by that cookie must also come from the same origin (``Origin``, else ``Referer``, must
match ``Host``) — a bearer header cannot be sent by another site's form, a cookie can.

Reusable outside the console routers: :func:`require_scope` is a FastAPI dependency for any router
mounted on the app (``/v1/``, ``/metrics``); :func:`authorize` takes plain header values, so code
without FastAPI's dependency injection (an MCP tool holding the Starlette request) checks a scope
the same way and gets an :class:`AuthError` with the HTTP status to report.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from fastapi import Request
from sqlalchemy.engine import Engine
from starlette.concurrency import run_in_threadpool

from ki.app.scopes import effective_scopes
from ki.app.token_cache import TokenCache
from ki.app.tokens import authenticate, session_token
from ki.store.tokens import TokenRow

#: The page's session cookie (a server-side session id bound to the token; HttpOnly, SameSite=Strict).
COOKIE_NAME = "ki_session"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class AuthError(Exception):
    """Authentication (401) or authorization (403) refused; ``code`` is the API error code."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Identity:
    """The token behind a request: its id and name (the audit actor), effective scopes, principal,
    and how it came (``bearer`` header or the page's ``cookie``)."""

    token_id: int
    name: str
    scopes: frozenset[str]
    principal: str | None
    via: Literal["bearer", "cookie"]

    def allows(self, scope: str) -> bool:
        """Whether this identity holds ``scope`` (implications included, see :mod:`ki.app.scopes`)."""
        return scope in self.scopes


def _bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    kind, _, value = authorization.strip().partition(" ")
    return value.strip() or None if kind.lower() == "bearer" else None


def same_origin(origin: str | None, referer: str | None, host: str | None) -> bool:
    """Whether ``Origin`` (else ``Referer``) names the ``Host`` the request was sent to."""
    if not host:
        return False
    candidate = origin if origin and origin != "null" else referer
    if not candidate:
        return False
    return urlsplit(candidate).netloc.lower() == host.lower()


def authorize(engine: Engine, *, authorization: str | None, cookie: str | None, needed: str | None,
              method: str = "GET", origin: str | None = None, referer: str | None = None,
              host: str | None = None, tokens: TokenCache | None = None) -> Identity:
    """Authenticate a request from its header values and check it may do what needs ``needed``.

    Args:
        engine: ki's database (the token table).
        authorization: the ``Authorization`` header (``Bearer <token>``) — preferred when both are given.
        cookie: the :data:`COOKIE_NAME` cookie value (the page's session).
        needed: the scope required (None: any live token).
        method / origin / referer / host: for the same-origin check of cookie-authenticated writes.
        tokens: the server's :class:`~ki.app.token_cache.TokenCache` (bearer tokens answered from memory while it
            follows token changes); None: the token table is read.
    Returns: the :class:`Identity`.
    Raises:
        AuthError: 401 ``unauthenticated`` (no token, unknown or revoked), 403 ``forbidden`` (scope
            missing) or 403 ``cross_origin`` (a cookie write from another origin).
    """
    token, via = _credentials(authorization, cookie)
    return _identity(_live(engine, token, via, tokens), via, needed, method, origin, referer, host)


def _credentials(authorization: str | None, cookie: str | None) -> tuple[str, Literal["bearer", "cookie"]]:
    """(the bearer token, else the cookie's session id; which it is). Raises: AuthError 401 when neither."""
    bearer = _bearer(authorization)
    if bearer:
        return bearer, "bearer"
    if not cookie:
        raise AuthError(401, "unauthenticated", "this request needs a token: send 'Authorization: Bearer <token>' "
                                                "(make one with `ki token create`)")
    return cookie, "cookie"


def _identity(row: TokenRow | None, via: Literal["bearer", "cookie"], needed: str | None, method: str,
              origin: str | None, referer: str | None, host: str | None) -> Identity:
    """The :class:`Identity` of a looked-up token, checked as :func:`authorize` says."""
    if row is None:
        raise AuthError(401, "unauthenticated", "the token is unknown or has been revoked")
    identity = Identity(row.id, row.name, effective_scopes(row.scopes), row.principal, via)
    if needed is not None and not identity.allows(needed):
        raise AuthError(403, "forbidden", f"the token {row.name!r} lacks the scope {needed!r} "
                                          f"(it has {', '.join(row.scopes) or 'none'})")
    if via == "cookie" and method.upper() not in SAFE_METHODS and not same_origin(origin, referer, host):
        raise AuthError(403, "cross_origin", "a change from the page must come from the page's own origin")
    return identity


def _live(engine: Engine, token: str, via: str, tokens: TokenCache | None) -> TokenRow | None:
    """The live token of a bearer value (through ``tokens`` when given), or of a console session id (the cookie:
    always read from the database)."""
    if via == "cookie":
        return session_token(engine, token)
    return tokens.authenticate(token) if tokens is not None else authenticate(engine, token)


def authenticated(engine: Engine, authorization: str | None, cookie: str | None,
                  tokens: TokenCache | None = None) -> bool:
    """Whether a bearer header or a session cookie names a live token (no scope check): the request
    guard's test before it reads a body. ``tokens``: as for :func:`authorize`."""
    bearer = _bearer(authorization)
    token, via = (bearer, "bearer") if bearer else (cookie, "cookie")
    return bool(token) and _live(engine, token, via, tokens) is not None


def authorize_request(request: Request, needed: str | None, engine: Engine | None = None) -> Identity:
    """:func:`authorize` for a Starlette/FastAPI request (``engine`` defaults to the app's database).

    Raises: :class:`AuthError` (see :func:`authorize`).
    """
    state = request.app.state.ki
    if engine is None:
        engine = state.ctx.db.engine
    h = request.headers
    return authorize(engine, authorization=h.get("authorization"), cookie=request.cookies.get(COOKIE_NAME),
                     needed=needed, method=request.method, origin=h.get("origin"), referer=h.get("referer"),
                     host=h.get("host"), tokens=state.tokens)


def authorize_cached(request: Request, needed: str | None) -> Identity | None:
    """:func:`authorize_request` answered from the server's token cache without a database read or a wait (on the
    event loop), or None when the cache cannot answer (a cookie, a token not cached, the cache not listening).

    Raises: :class:`AuthError` as :func:`authorize` (a cached token without ``needed``: 403)."""
    h = request.headers
    try:
        token, via = _credentials(h.get("authorization"), request.cookies.get(COOKIE_NAME))
    except AuthError:
        return None  # the thread path says why, exactly as before
    row = request.app.state.ki.tokens.cached(token) if via == "bearer" else None
    if row is None:
        return None
    return _identity(row, via, needed, request.method, h.get("origin"), h.get("referer"), h.get("host"))


def require_scope(scope: str | None) -> Callable[[Request], Awaitable[Identity]]:
    """A FastAPI dependency: the request's :class:`Identity`, refused (401/403) unless it holds ``scope``.

    Use ``identity: Identity = Depends(require_scope(READ_PIPELINE))`` in any router on the app. A token the
    server's cache holds is checked on the event loop; any other in a worker thread (a database read).
    """

    async def dependency(request: Request) -> Identity:
        identity = authorize_cached(request, scope)
        if identity is not None:
            return identity
        return await run_in_threadpool(authorize_request, request, scope)

    dependency.__name__ = f"require_{(scope or 'token').replace(':', '_')}"
    return dependency
