"""The "Insertion pipeline" page: ``/`` (the console), ``/login`` and ``/logout``.

Spec: insertion-pipeline.md "The console page" (everything on it is driven by the API endpoints).
The page is one server-rendered template with the first answers of ``/api/status``, ``/api/config``,
``/api/runs`` and ``/api/quarantine`` embedded, so it renders without a round trip; ``console.js``
(plain JavaScript, in the repository: no CDN, no build step) then drives it from the API. Login
takes a token and sets an HttpOnly, SameSite=Strict cookie (:data:`ki.api.auth.COOKIE_NAME`) holding a
server-side session id bound to the token (expiring after ``SESSION_SECONDS``, ended at sign-out and with
the token); a login from another origin, or without an Origin header, is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from ki.api.auth import COOKIE_NAME, AuthError, authorize_request, same_origin
from ki.app.scopes import READ_PIPELINE, SEARCH, WRITE_PIPELINE
from ki.app.tokens import SESSION_SECONDS, authenticate, close_session, open_session

router = APIRouter(include_in_schema=False)

#: "Recent runs" on the page: insertion, access-refresh and sync runs (spec: GET /api/runs; the page filters
#: by kind on request; docs/design-decisions.md "Sync runs on the console").
PAGE_RUN_KINDS = ("insertion", "access_refresh", "sync")
templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))


def _login_page(request: Request, *, error: str | None = None, status: int = 200) -> HTMLResponse:
    return templates.TemplateResponse(request, "login.html", {"error": error}, status_code=status)


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, ended: int = 0) -> HTMLResponse:
    """The sign-in form (``?ended=1``: the session ended — token revoked or signed out elsewhere)."""
    return _login_page(request, error="Your session has ended. Sign in again with a valid token." if ended else None)


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    """Check the posted token and set the session cookie; refused from another origin."""
    h = request.headers
    if not same_origin(h.get("origin"), None, h.get("host")):  # no Origin at all is refused like a foreign one
        return _login_page(request, error="Sign-in must come from this page.", status=403)
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    token = (form.get("token") or [""])[0].strip()
    engine = request.app.state.ki.ctx.db.engine
    row = await anyio.to_thread.run_sync(lambda: authenticate(engine, token)) if token else None
    if row is None:
        return _login_page(request, error="That token is not valid (unknown or revoked). Create one with "
                                          "`ki token create --name NAME --scope read:pipeline`.", status=401)
    session = await anyio.to_thread.run_sync(lambda: open_session(engine, row))
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(COOKIE_NAME, session, httponly=True, samesite="strict", secure=request.url.scheme == "https",
                        path="/", max_age=SESSION_SECONDS)
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """End the session: its id stops working at once (the token itself stays valid until revoked)."""
    session = request.cookies.get(COOKIE_NAME)
    if session:
        engine = request.app.state.ki.ctx.db.engine
        await anyio.to_thread.run_sync(lambda: close_session(engine, session))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="strict")
    return response


@router.get("/", response_class=HTMLResponse)
def console_page(request: Request) -> Response:
    """The console; without a valid session it sends the browser to ``/login``."""
    from ki.api.routes_config import get_config
    from ki.api.routes_pipeline import shared_runs, shared_status
    from ki.api.routes_quarantine import list_quarantine

    try:
        identity = authorize_request(request, READ_PIPELINE)
    except AuthError as exc:
        if exc.status == 401:
            return RedirectResponse("/login" + ("?ended=1" if request.cookies.get(COOKIE_NAME) else ""),
                                    status_code=303)
        return _login_page(request, error=f"{exc.message}. Sign in with a token that has read:pipeline.",
                           status=exc.status)
    state = request.app.state.ki
    initial = {
        "status": json.loads(shared_status(state, identity.principal)),
        "config": get_config(state=state, _=identity).model_dump(mode="json"),
        "runs": json.loads(shared_runs(state, PAGE_RUN_KINDS, None, 10, 0)),
        "quarantine": list_quarantine(state=state, identity=identity, stage=None, reason=None, error_class=None,
                                      limit=25, offset=0).model_dump(mode="json"),
        "identity": {"name": identity.name, "can_write": identity.allows(WRITE_PIPELINE),
                     "can_search": identity.allows(SEARCH), "principal": identity.principal},
    }
    return templates.TemplateResponse(request, "console.html", {"initial": initial, "identity": identity})
