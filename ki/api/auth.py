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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from fastapi import Request
from sqlalchemy.engine import Engine

from ki.app.scopes import effective_scopes
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
              host: str | None = None) -> Identity:
    """Authenticate a request from its header values and check it may do what needs ``needed``.

    Args:
        engine: ki's database (the token table).
        authorization: the ``Authorization`` header (``Bearer <token>``) — preferred when both are given.
        cookie: the :data:`COOKIE_NAME` cookie value (the page's session).
        needed: the scope required (None: any live token).
        method / origin / referer / host: for the same-origin check of cookie-authenticated writes.
    Returns: the :class:`Identity`.
    Raises:
        AuthError: 401 ``unauthenticated`` (no token, unknown or revoked), 403 ``forbidden`` (scope
            missing) or 403 ``cross_origin`` (a cookie write from another origin).
    """
    bearer = _bearer(authorization)
    token, via = (bearer, "bearer") if bearer else (cookie, "cookie")
    if not token:
        raise AuthError(401, "unauthenticated", "this request needs a token: send 'Authorization: Bearer <token>' "
                                                "(make one with `ki token create`)")
    row = _live(engine, token, via)
    if row is None:
        raise AuthError(401, "unauthenticated", "the token is unknown or has been revoked")
    identity = Identity(row.id, row.name, effective_scopes(row.scopes), row.principal, via)  # type: ignore[arg-type]
    if needed is not None and not identity.allows(needed):
        raise AuthError(403, "forbidden", f"the token {row.name!r} lacks the scope {needed!r} "
                                          f"(it has {', '.join(row.scopes) or 'none'})")
    if via == "cookie" and method.upper() not in SAFE_METHODS and not same_origin(origin, referer, host):
        raise AuthError(403, "cross_origin", "a change from the page must come from the page's own origin")
    return identity


def _live(engine: Engine, token: str, via: str) -> TokenRow | None:
    """The live token of a bearer value, or of a console session id (the cookie)."""
    return session_token(engine, token) if via == "cookie" else authenticate(engine, token)


def authenticated(engine: Engine, authorization: str | None, cookie: str | None) -> bool:
    """Whether a bearer header or a session cookie names a live token (no scope check): the request
    guard's test before it reads a body."""
    bearer = _bearer(authorization)
    token, via = (bearer, "bearer") if bearer else (cookie, "cookie")
    return bool(token) and _live(engine, token, via) is not None


def authorize_request(request: Request, needed: str | None, engine: Engine | None = None) -> Identity:
    """:func:`authorize` for a Starlette/FastAPI request (``engine`` defaults to the app's database).

    Raises: :class:`AuthError` (see :func:`authorize`).
    """
    if engine is None:
        engine = request.app.state.ki.ctx.db.engine
    h = request.headers
    return authorize(engine, authorization=h.get("authorization"), cookie=request.cookies.get(COOKIE_NAME),
                     needed=needed, method=request.method, origin=h.get("origin"), referer=h.get("referer"),
                     host=h.get("host"))


def require_scope(scope: str | None) -> Callable[[Request], Identity]:
    """A FastAPI dependency: the request's :class:`Identity`, refused (401/403) unless it holds ``scope``.

    Use ``identity: Identity = Depends(require_scope(READ_PIPELINE))`` in any router on the app.
    """

    def dependency(request: Request) -> Identity:
        return authorize_request(request, scope)

    dependency.__name__ = f"require_{(scope or 'token').replace(':', '_')}"
    return dependency
