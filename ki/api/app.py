"""The ``ki serve`` app factory: one FastAPI app for the console page, ``/api``, ``/healthz`` and more.

DESIGN.md "The operator surface is one app": the console page at ``/``, the JSON API under
``/api/`` (OpenAPI at ``/api/openapi.json``), ``/healthz``, ``/v1/work-items``
(:mod:`ki.api.routes_work_items`), ``/v1/search`` (:mod:`ki.api.routes_search`) and MCP at ``/mcp/full``
(:mod:`ki.api.mcp_server`, its session manager entered in this app's lifespan) and ``/metrics``
(:mod:`ki.api.routes_metrics`). :func:`create_app` is open for more:

* ``extra_routers``: FastAPI routers included as they are (use :func:`ki.api.auth.require_scope`
  in their dependencies for the same tokens and scopes);
* ``mounts``: ``(path, ASGI app)`` pairs mounted under a prefix (an MCP streamable-HTTP app);
* ``lifespans``: async context managers entered at start-up, in order, and left at shutdown (an MCP
  session manager must run inside the host app's lifespan).

Every response carries a strict Content-Security-Policy and more (:mod:`ki.api.security_headers`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from fastapi import APIRouter, Depends, FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp

from ki.api.auth import COOKIE_NAME, authenticated
from ki.api.errors import install_error_handlers
from ki.api.guard import RequestGuard
from ki.api.security_headers import SecurityHeaders
from ki.api.state import ServerState
from ki.api.status_cache import BucketCache
from ki.api.strict import refuse_unknown_query
from ki.app.launcher import RunLauncher
from ki.app.token_cache import TokenCache
from ki.domain.context import PipelineContext

STATIC_DIR = Path(__file__).parent / "static"

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def _document_errors(app: FastAPI) -> None:
    """Make the OpenAPI say what the API answers: every 422 is an :class:`~ki.api.schemas.ErrorBody`
    (with ``fields``), not FastAPI's default validation body."""
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            ref = {"$ref": "#/components/schemas/ErrorBody"}
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    unprocessable = operation.get("responses", {}).get("422")
                    if unprocessable is not None:
                        unprocessable["content"] = {"application/json": {"schema": ref}}
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for name in ("HTTPValidationError", "ValidationError"):
                components.pop(name, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def create_app(ctx: PipelineContext | None = None, *, extra_routers: Sequence[APIRouter] = (),
               mounts: Sequence[tuple[str, ASGIApp]] = (), lifespans: Sequence[Lifespan] = ()) -> FastAPI:
    """Build the app on ``ctx`` (default: :meth:`PipelineContext.open`, the data directory and database
    every other ``ki`` command uses). See the module doc for the extension points."""
    from ki.api import (
        health,
        page,
        routes_admin,
        routes_config,
        routes_costs,
        routes_metrics,
        routes_pipeline,
        routes_quarantine,
        routes_search,
        routes_work_items,
    )
    from ki.api.mcp_server import MOUNT_PATH, build_mcp

    ctx = ctx or PipelineContext.open()
    state = ServerState(ctx=ctx, launcher=RunLauncher(ctx), buckets=BucketCache(ctx.db.engine),
                        tokens=TokenCache(ctx.db.engine))
    state.launcher.on_change = state.changed  # a run this server started or finished is on the next read
    server = ctx.settings.server
    mcp_app, mcp_lifespan = build_mcp(state, served_host=server.host, served_port=server.port)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            stack.callback(state.buckets.stop)
            state.tokens.start()
            stack.callback(state.tokens.stop)
            for enter in (mcp_lifespan, *lifespans):
                await stack.enter_async_context(enter(app))
            yield

    app = FastAPI(title="ki console API", version="1", lifespan=lifespan, openapi_url="/api/openapi.json",
                  docs_url=None, redoc_url=None, dependencies=[Depends(refuse_unknown_query)],
                  description="The console API of ki serve. Every /api request needs 'Authorization: Bearer "
                              "<token>' (ki token create).")
    app.state.ki = state
    install_error_handlers(app)
    app.add_middleware(RequestGuard, cookie_name=COOKIE_NAME,
                       authenticated=lambda header, cookie: authenticated(ctx.db.engine, header, cookie,
                                                                          state.tokens))

    app.add_middleware(SecurityHeaders)  # outermost: the guard's own refusals carry the headers too

    for router in (routes_pipeline.router, routes_config.router, routes_quarantine.router, routes_costs.router,
                   routes_admin.router, routes_work_items.router, routes_search.router, routes_metrics.router,
                   health.router, page.router, *extra_routers):
        app.include_router(router)
    for path, sub in ((MOUNT_PATH, mcp_app), *mounts):
        app.mount(path, sub)
    _document_errors(app)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
