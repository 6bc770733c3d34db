"""The API's error responses: one shape (:class:`ki.api.schemas.ErrorBody`) for every refusal.

Routes raise :class:`ApiError`; :func:`install_error_handlers` turns it, :class:`ki.api.auth.AuthError`,
request-validation errors and ki's own configuration errors into ``{"error", "message", ...}`` with
the right status, and any unexpected exception into a 500 that names no path or traceback.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ki.api.auth import AuthError
from ki.core.errors import ConfigValidationError, EnvPinnedError, OrchestratorUnavailable, StaleConfigVersion

log = logging.getLogger(__name__)


class ApiError(Exception):
    """A refusal with ``status``, a stable ``code``, a ``message`` and extra JSON fields."""

    def __init__(self, status: int, code: str, message: str, **extra: Any):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


def _body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": code, "message": message, **extra}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` entries for these statuses, all with :class:`ErrorBody`."""
    from ki.api.schemas import ErrorBody

    return {s: {"model": ErrorBody} for s in statuses}


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers described in the module doc on ``app``."""

    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(_body(exc.code, exc.message, **exc.extra), status_code=exc.status)

    @app.exception_handler(AuthError)
    async def auth_error(_: Request, exc: AuthError) -> JSONResponse:
        headers = {"WWW-Authenticate": 'Bearer realm="ki"'} if exc.status == 401 else None
        return JSONResponse(_body(exc.code, exc.message), status_code=exc.status, headers=headers)

    @app.exception_handler(EnvPinnedError)
    async def env_pinned(_: Request, exc: EnvPinnedError) -> JSONResponse:
        return JSONResponse(_body("env_pinned", str(exc), field=exc.field, env_var=exc.env_var), status_code=409)

    @app.exception_handler(StaleConfigVersion)
    async def stale(_: Request, exc: StaleConfigVersion) -> JSONResponse:
        return JSONResponse(_body("stale_version", str(exc), current_version=exc.current), status_code=409)

    @app.exception_handler(ConfigValidationError)
    async def invalid_config(_: Request, exc: ConfigValidationError) -> JSONResponse:
        return JSONResponse(_body("invalid_config", str(exc), fields=exc.errors), status_code=422)

    @app.exception_handler(OrchestratorUnavailable)
    async def no_orchestrator(_: Request, exc: OrchestratorUnavailable) -> JSONResponse:
        return JSONResponse(_body("orchestrator_unavailable", str(exc)), status_code=503)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        fields: dict[str, list[str]] = {}
        for err in exc.errors():
            loc = ".".join(str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path", "header"))
            fields.setdefault(loc or "request", []).append(str(err.get("msg", "invalid")))
        return JSONResponse(_body("invalid_request", "the request is not valid: " + "; ".join(
            f"{k}: {' / '.join(v)}" for k, v in fields.items()), fields=fields), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(_body(code, str(exc.detail)), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error in an API request")
        return JSONResponse(_body("internal_error", f"the server failed ({type(exc).__name__}); see its log"),
                            status_code=500)
