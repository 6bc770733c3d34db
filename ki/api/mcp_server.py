"""MCP at ``/mcp/full``: the work-items tools, pipeline status and permission-filtered search.

spec/work-queue.md "Inspect and retry failed work" (``list_work_items``,
``retry_work_item`` with ``{"id": "work_item:<uuid>"}``); DESIGN.md "The operator surface is one app";
prior-art.md §8 (MCP lessons). The official ``mcp`` SDK (FastMCP), streamable HTTP, stateless with JSON
responses, mounted in the ``ki serve`` app: its session manager runs inside the host app's lifespan
(:func:`build_mcp` returns both), and allowed hosts are the loopback names plus the served host.

Authentication: every request needs ``Authorization: Bearer <token>`` (``ki token create``); none, an
unknown or a revoked token → HTTP 401 before the SDK sees the request. The SDK has no per-tool scopes, so
each tool checks its own (``read:work_item`` to list and read, ``write:work_item`` to change,
``read:pipeline`` or ``read:work_item`` for ``pipeline_status``, ``search`` to search) and a refusal is a
tool error naming the missing scope. ``search`` runs as the token's principal with its permission filter
(a token without a principal cannot search). Writes are audited with the token's name as actor; a retry
says the work was queued, not that it finished. Tools run their database work in a worker thread.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Annotated, Any, Literal

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ki.adapters.search.search import MAX_LIMIT, MAX_OFFSET
from ki.api.auth import AuthError, Identity, authorize
from ki.api.mcp_arguments import strict_arguments
from ki.api.routes_search import MAX_QUERY_CHARS, SearchRefused
from ki.api.state import ServerState
from ki.app import work_items as service
from ki.app.scopes import READ_PIPELINE, READ_WORK_ITEM, SEARCH, WRITE_WORK_ITEM
from ki.core.errors import WorkItemRefused
from ki.orchestration import work_items as actions
from ki.store.work_items import WorkItemFilter, parse_work_item_id

log = logging.getLogger(__name__)

#: Where the app mounts the MCP app, and the SDK's own path inside it: together ``/mcp/full``.
MOUNT_PATH, ENDPOINT = "/mcp", "/full"
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
RETRY = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False)
CANCEL = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)

Status = Literal["pending", "runnable", "running", "done", "failed", "cancelled"]
Bucket = Literal["pending", "running", "done", "failed", "waiting", "disabled", "skipped", "quarantined"]
Kind = Literal["fetch", "convert", "classify_matter", "relate", "extract_metadata", "extract_decisions", "index"]
# The REST routes' bounds (ki.api.routes_work_items, ki.api.routes_search), as tool argument types.
Text = Annotated[str, Field(max_length=200)]
Signature = Annotated[str, Field(max_length=64)]
PathPrefix = Annotated[str, Field(max_length=4096)]
RunId = Annotated[int, Field(ge=1, le=2**63 - 1)]
Cursor = Annotated[str, Field(max_length=200)]
ItemId = Annotated[str, Field(min_length=1, max_length=100)]
PageLimit = Annotated[int, Field(ge=1, le=service.MAX_PAGE)]
GroupLimit = Annotated[int, Field(ge=1, le=1000)]
BulkLimit = Annotated[int, Field(ge=1, le=actions.MAX_BULK_LIMIT)]
Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]
SearchLimit = Annotated[int, Field(ge=1, le=MAX_LIMIT)]
SearchOffset = Annotated[int, Field(ge=0, le=MAX_OFFSET)]


def _headers(ctx: Context) -> Any:
    request = ctx.request_context.request
    if request is None:  # pragma: no cover - only HTTP transports are served
        raise ToolError("this tool needs an HTTP request (streamable HTTP)")
    return request.headers


def _identity(state: ServerState, ctx: Context, *needed: str) -> Identity:
    """The caller's identity; a tool error unless it holds one of ``needed``."""
    headers = _headers(ctx)
    try:
        identity = authorize(state.ctx.db.engine, authorization=headers.get("authorization"), cookie=None,
                             needed=None, tokens=state.tokens)
    except AuthError as exc:
        raise ToolError(exc.message) from exc
    if not any(identity.allows(scope) for scope in needed):
        raise ToolError(f"forbidden: the token {identity.name!r} lacks the scope {' or '.join(needed)!r}")
    return identity


def _filter(**values: Any) -> WorkItemFilter:
    try:
        return WorkItemFilter(**values)
    except ValueError as exc:
        raise ToolError(str(exc)) from exc


async def _in_thread(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a worker thread; ki's refusals become tool errors with their message, anything else
    a tool error naming only the exception's class (never its text: a database error quotes SQL)."""
    try:
        return await anyio.to_thread.run_sync(fn)
    except WorkItemRefused as exc:
        raise ToolError(f"{exc.code}: {exc.message}") from exc
    except ValueError as exc:
        raise ToolError(str(exc)) from exc
    except SearchRefused:
        raise  # the search tool words it
    except Exception as exc:
        log.exception("unexpected error in an MCP tool")
        raise ToolError(f"internal_error: the server failed ({type(exc).__name__}); see its log") from exc


def _id(value: str) -> Any:
    try:
        return parse_work_item_id(value)
    except ValueError as exc:
        raise ToolError(str(exc)) from exc


def build_server(state: ServerState, *, allowed_hosts: list[str]) -> FastMCP:
    """The FastMCP server with ki's tools, on ``state`` (the app's context, launcher and bucket cache)."""
    origins = [f"http://{h}" for h in allowed_hosts] + [f"https://{h}" for h in allowed_hosts]
    mcp = FastMCP("ki", instructions="ki's durable document-insertion pipeline: find, group, retry and cancel "
                  "failed work items; pipeline status; permission-filtered search.",
                  stateless_http=True, json_response=True, streamable_http_path=ENDPOINT,
                  transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                                               allowed_hosts=allowed_hosts, allowed_origins=origins))

    @mcp.tool(annotations=READ_ONLY)
    async def list_work_items(ctx: Context, status: Status | None = None, bucket: Bucket | None = None,
                              kind: Kind | None = None, reason: Text | None = None, error_class: Text | None = None,
                              signature: Signature | None = None, infrastructure: bool | None = None,
                              path_prefix: PathPrefix | None = None, run_id: RunId | None = None,
                              since: datetime | None = None, until: datetime | None = None, limit: PageLimit = 50,
                              cursor: Cursor | None = None) -> dict:
        """Work items (one per document and stage), newest first. status is the work-queue status (failed =
        quarantined, runnable = waiting to run or awaiting a retry); bucket is ki's console bucket. Pass the
        returned next_cursor as cursor for the next page. Needs read:work_item."""
        identity = _identity(state, ctx, READ_WORK_ITEM)
        flt = _filter(status=status, bucket=bucket, kind=kind, reason=reason, error_class=error_class,
                      signature=signature, infrastructure=infrastructure, path_prefix=path_prefix, run_id=run_id,
                      since=since, until=until)
        page = await _in_thread(lambda: service.list_page(state.ctx, flt, limit=limit, cursor=cursor,
                                                          principal=identity.principal))
        return page.model_dump(mode="json")

    @mcp.tool(annotations=READ_ONLY)
    async def get_work_item(ctx: Context, id: ItemId) -> dict:  # noqa: A002 - the spec's argument name
        """One work item ({"id": "work_item:<uuid>"}) with its whole attempt history. Needs read:work_item."""
        identity = _identity(state, ctx, READ_WORK_ITEM)
        wid = _id(id)
        return (await _in_thread(lambda: service.detail(state.ctx, wid, principal=identity.principal))
                ).model_dump(mode="json")

    @mcp.tool(annotations=READ_ONLY)
    async def list_failure_groups(ctx: Context, kind: Kind | None = None, reason: Text | None = None,
                                  error_class: Text | None = None, infrastructure: bool | None = None,
                                  path_prefix: PathPrefix | None = None, since: datetime | None = None,
                                  until: datetime | None = None, limit: GroupLimit = 100) -> dict:
        """Failing work items grouped by (stage, error signature): count, first/last seen, outage or not,
        three sample paths and one message. Needs read:work_item."""
        identity = _identity(state, ctx, READ_WORK_ITEM)
        flt = _filter(kind=kind, reason=reason, error_class=error_class, infrastructure=infrastructure,
                      path_prefix=path_prefix, since=since, until=until)
        return (await _in_thread(lambda: service.groups(state.ctx, flt, limit=limit, principal=identity.principal))
                ).model_dump(mode="json")

    async def _launch() -> None:
        from ki.api.routes_pipeline import launch_run

        await anyio.to_thread.run_sync(lambda: launch_run(state, trigger="work_item_retry"))

    @mcp.tool(annotations=RETRY)
    async def retry_work_item(ctx: Context, id: ItemId) -> dict:  # noqa: A002 - the spec's argument name
        """Reset a failed (or cancelled) work item to runnable: fresh attempt budget, lease and error cleared
        (the history keeps the error), later stages invalidated; a run is started. A running item is refused.
        Success means the work was queued, not that it finished. Needs write:work_item."""
        identity = _identity(state, ctx, WRITE_WORK_ITEM)
        wid = _id(id)
        result = await _in_thread(lambda: actions.retry_work_item(state.ctx, wid, actor=identity.name,
                                                                       principal=identity.principal))
        await _launch()
        return result.model_dump(mode="json")

    @mcp.tool(annotations=RETRY)
    async def retry_work_items(ctx: Context, dry_run: bool = True, confirmation_token: Signature | None = None,
                               limit: BulkLimit = actions.DEFAULT_BULK_LIMIT, status: Status | None = None,
                               bucket: Bucket | None = None, kind: Kind | None = None, reason: Text | None = None,
                               error_class: Text | None = None, signature: Signature | None = None,
                               infrastructure: bool | None = None, path_prefix: PathPrefix | None = None,
                               run_id: RunId | None = None, since: datetime | None = None,
                               until: datetime | None = None, all: bool = False) -> dict:  # noqa: A002 - REST's name
        """Retry every failed or cancelled work item matching the filter. First call with dry_run=true: it
        returns the count, a sample and a confirmation_token; then call again with dry_run=false and that
        token (same filter and limit). At most limit items per call; the answer says how many remain and
        gives the next token. An empty filter is refused unless all=true. Needs write:work_item."""
        identity = _identity(state, ctx, WRITE_WORK_ITEM)
        flt = _filter(status=status, bucket=bucket, kind=kind, reason=reason, error_class=error_class,
                      signature=signature, infrastructure=infrastructure, path_prefix=path_prefix, run_id=run_id,
                      since=since, until=until)
        if dry_run:
            preview = await _in_thread(lambda: actions.preview_bulk(state.ctx, "retry", flt, actor=identity.name,
                                                                    limit=limit, all_items=all,
                                                                    principal=identity.principal))
            return preview.model_dump(mode="json")
        result = await _in_thread(lambda: actions.run_bulk(state.ctx, "retry", flt, actor=identity.name,
                                                           token=confirmation_token, limit=limit,
                                                           all_items=all, principal=identity.principal))
        if result.acted:
            await _launch()
        return result.model_dump(mode="json")

    @mcp.tool(annotations=CANCEL)
    async def cancel_work_item(ctx: Context, id: ItemId) -> dict:  # noqa: A002 - the spec's argument name
        """Cancel a work item that is not running or finished (skipped + cancelled; later stages wait). A
        cancelled item can be retried. Needs write:work_item."""
        identity = _identity(state, ctx, WRITE_WORK_ITEM)
        wid = _id(id)
        return (await _in_thread(lambda: actions.cancel_work_item(state.ctx, wid, actor=identity.name,
                                                                        principal=identity.principal))
                ).model_dump(mode="json")

    @mcp.tool(annotations=READ_ONLY)
    async def pipeline_status(ctx: Context) -> dict:
        """Per stage, how many work items are in each of ki's buckets (pending, running, done, failed =
        awaiting a retry, waiting, disabled, skipped, quarantined). Needs read:pipeline or read:work_item."""
        _identity(state, ctx, READ_PIPELINE, READ_WORK_ITEM)
        from ki.store.status import bucket_counts

        def counts() -> dict:
            with state.ctx.db.engine.connect() as conn:
                return bucket_counts(conn)

        return {"stages": await _in_thread(counts)}

    @mcp.tool(annotations=READ_ONLY)
    async def search(ctx: Context, query: Query, limit: SearchLimit = 10, offset: SearchOffset = 0,
                     cursor: Cursor | None = None,
                     mode: Literal["hybrid", "lexical", "vector"] = "hybrid",
                     kind: Literal["passage", "clause"] = "passage", clause_type: Text | None = None,
                     party: Text | None = None, final: bool = False) -> dict:
        """Search the indexed documents as the token's principal: only what that principal may see. Hits
        best first; pass the returned next_cursor as cursor (or next_offset as offset) for the next page
        (None: the last page). kind=clause searches the clauses of final/executed agreements (each hit names
        clause_type, clause_number, clause_heading; grouped by document); clause_type (a clause-facet node,
        descendants included) implies it; party keeps documents naming that party (aliases included); final
        keeps final/executed versions only. Needs search (and a token made with a principal)."""
        identity = _identity(state, ctx, SEARCH)
        from ki.api.routes_search import search_as

        try:
            page = await _in_thread(lambda: search_as(state, identity, query, limit=limit, offset=offset,
                                                      cursor=cursor, mode=mode, kind=kind, clause_type=clause_type,
                                                      party=party, final=final))
        except SearchRefused as exc:
            raise ToolError(f"{exc.code}: {exc.message}") from exc
        return page.model_dump(mode="json")

    strict_arguments(mcp)
    return mcp


class BearerRequired:
    """ASGI wrapper of the MCP app: a request without a live bearer token gets a 401 (no SDK involved)."""

    def __init__(self, app: ASGIApp, state: ServerState):
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            request = Request(scope)
            try:
                await anyio.to_thread.run_sync(lambda: authorize(
                    self.state.ctx.db.engine, authorization=request.headers.get("authorization"), cookie=None,
                    needed=None, tokens=self.state.tokens))
            except AuthError as exc:
                response = JSONResponse({"error": exc.code, "message": exc.message}, status_code=exc.status,
                                        headers={"WWW-Authenticate": 'Bearer realm="ki"'})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def build_mcp(state: ServerState, *, served_host: str | None = None, served_port: int | None = None
              ) -> tuple[ASGIApp, Callable[[Any], contextlib.AbstractAsyncContextManager[None]]]:
    """(the ASGI app to mount at :data:`MOUNT_PATH`, the lifespan the host app must enter).

    Allowed ``Host`` headers: ``127.0.0.1``, ``localhost`` and ``[::1]`` on any port, plus
    ``served_host:served_port`` (a request naming any other host gets 421 from the SDK)."""
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    if served_host and served_host not in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::"):
        hosts.append(f"{served_host}:{served_port or '*'}")
    server = build_server(state, allowed_hosts=hosts)
    app = BearerRequired(server.streamable_http_app(), state)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        async with server.session_manager.run():
            yield

    return app, lifespan
