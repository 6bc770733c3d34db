"""``/v1/work-items``: list, detail with history, failure groups, and retry/cancel (one item or a filter).

spec/work-queue.md "Inspect and retry failed work"; DESIGN.md "Work items" and
"The operator surface is one app". ``read:work_item`` to read, ``write:work_item`` to act. A retry
launches a run (as the quarantine retry does) and says the work was queued, not that it finished.
A running item → 409; a bulk call without the confirmation token of a matching dry run → 409.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from fastapi import APIRouter, Depends, Query

from ki.api.auth import Identity, require_scope
from ki.api.errors import ApiError, error_responses
from ki.api.routes_pipeline import launch_run
from ki.api.state import ServerState, server_state
from ki.app import work_items as service
from ki.app.scopes import READ_WORK_ITEM, WRITE_WORK_ITEM
from ki.app.work_item_views import (
    BulkPreview,
    BulkRequest,
    BulkResult,
    FailureGroups,
    ItemActionResult,
    WorkItemDetail,
    WorkItemPage,
)
from ki.core.errors import WorkItemRefused
from ki.orchestration import work_items as actions
from ki.store.work_items import WorkItemFilter, parse_work_item_id

router = APIRouter(prefix="/v1/work-items", tags=["work items"])

Status = Literal["pending", "runnable", "running", "done", "failed", "cancelled"]
Bucket = Literal["pending", "running", "done", "failed", "waiting", "disabled", "skipped", "quarantined"]
Kind = Literal["fetch", "convert", "classify_matter", "relate", "extract_metadata", "extract_decisions", "index"]


def _utc(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def work_item_filter(
    status: Status | None = Query(None, description="work-queue status (failed = quarantined)"),
    bucket: Bucket | None = Query(None, description="ki's console bucket (failed = awaiting a retry)"),
    kind: Kind | None = Query(None, description="the stage"),
    reason: str | None = Query(None, max_length=200), error_class: str | None = Query(None, max_length=200),
    signature: str | None = Query(None, max_length=64), infrastructure: bool | None = None,
    path_prefix: str | None = Query(None, max_length=4096), run_id: int | None = Query(None, ge=1, le=2**63 - 1),
    since: datetime | None = Query(None, description="updated at or after (ISO 8601; naive = UTC)"),
    until: datetime | None = Query(None, description="updated before (ISO 8601; naive = UTC)"),
) -> WorkItemFilter:
    """The filter of the list, the groups and the bulk actions, from the query string."""
    return WorkItemFilter(status=status, bucket=bucket, kind=kind, reason=reason, error_class=error_class,
                          signature=signature, infrastructure=infrastructure, path_prefix=path_prefix, run_id=run_id,
                          since=_utc(since), until=_utc(until))


def refused(exc: WorkItemRefused) -> ApiError:
    """The API error of a refused action."""
    return ApiError(exc.status, exc.code, exc.message)


def _work_item_id(value: str):  # noqa: ANN202 - uuid.UUID
    try:
        return parse_work_item_id(value)
    except ValueError as exc:
        raise ApiError(404, "not_found", str(exc)) from exc


@router.get("", response_model=WorkItemPage, responses=error_responses(401, 403, 422))
def list_items(flt: WorkItemFilter = Depends(work_item_filter), limit: int = Query(50, ge=1, le=service.MAX_PAGE),
               cursor: str | None = Query(None, max_length=200), state: ServerState = Depends(server_state),
               identity: Identity = Depends(require_scope(READ_WORK_ITEM))) -> WorkItemPage:
    """Work items matching the filter, newest first; pass ``next_cursor`` back as ``cursor`` for the next page.
    A token with a principal sees only the items of files that principal may see (``hidden`` counts the rest)."""
    state.config()
    try:
        return service.list_page(state.ctx, flt, limit=limit, cursor=cursor, principal=identity.principal)
    except ValueError as exc:
        raise ApiError(422, "invalid_cursor", str(exc)) from exc


@router.get("/groups", response_model=FailureGroups, responses=error_responses(401, 403, 422))
def list_groups(flt: WorkItemFilter = Depends(work_item_filter), limit: int = Query(100, ge=1, le=1000),
                state: ServerState = Depends(server_state),
                identity: Identity = Depends(require_scope(READ_WORK_ITEM))) -> FailureGroups:
    """Failing items (awaiting a retry or quarantined) per (stage, error signature), largest group first
    (a token with a principal gets only sample paths and messages of files it may see)."""
    return service.groups(state.ctx, flt, limit=limit, principal=identity.principal)


def _bulk(action: actions.Action, body: BulkRequest, flt: WorkItemFilter, state: ServerState,
          identity: Identity) -> BulkPreview | BulkResult:
    try:
        if body.dry_run:
            return actions.preview_bulk(state.ctx, action, flt, actor=identity.name, limit=body.limit,
                                        all_items=body.all, principal=identity.principal)
        result = actions.run_bulk(state.ctx, action, flt, actor=identity.name, token=body.confirmation_token,
                                  limit=body.limit, all_items=body.all, principal=identity.principal)
    except WorkItemRefused as exc:
        raise refused(exc) from exc
    if action == "retry" and result.acted:
        launch_run(state, trigger="work_item_retry")
    return result


@router.post("/retry", response_model=BulkPreview | BulkResult, responses=error_responses(401, 403, 409, 422, 503))
def retry_many(body: BulkRequest, flt: WorkItemFilter = Depends(work_item_filter),
               state: ServerState = Depends(server_state),
               identity: Identity = Depends(require_scope(WRITE_WORK_ITEM))) -> BulkPreview | BulkResult:
    """Retry every failed or cancelled item matching the filter (dry run first; at most ``limit`` per call)."""
    state.config()
    return _bulk("retry", body, flt, state, identity)


@router.post("/cancel", response_model=BulkPreview | BulkResult, responses=error_responses(401, 403, 409, 422))
def cancel_many(body: BulkRequest, flt: WorkItemFilter = Depends(work_item_filter),
                state: ServerState = Depends(server_state),
                identity: Identity = Depends(require_scope(WRITE_WORK_ITEM))) -> BulkPreview | BulkResult:
    """Cancel every not-running, unfinished item matching the filter (dry run first; at most ``limit``)."""
    state.config()
    return _bulk("cancel", body, flt, state, identity)


@router.get("/{work_item_id}", response_model=WorkItemDetail, responses=error_responses(401, 403, 404))
def get_item(work_item_id: str, state: ServerState = Depends(server_state),
             identity: Identity = Depends(require_scope(READ_WORK_ITEM))) -> WorkItemDetail:
    """One work item with its whole attempt history (a retry never erases a failure); 404 for an item of a
    file the token's principal may not see."""
    state.config()
    try:
        return service.detail(state.ctx, _work_item_id(work_item_id), principal=identity.principal)
    except WorkItemRefused as exc:
        raise refused(exc) from exc


@router.post("/{work_item_id}/retry", response_model=ItemActionResult,
             responses=error_responses(401, 403, 404, 409, 503))
def retry_item(work_item_id: str, state: ServerState = Depends(server_state),
               identity: Identity = Depends(require_scope(WRITE_WORK_ITEM))) -> ItemActionResult:
    """Reset a failed or cancelled item to runnable (fresh budget, downstream invalidated) and launch a run."""
    state.config()
    try:
        result = actions.retry_work_item(state.ctx, _work_item_id(work_item_id), actor=identity.name,
                                         principal=identity.principal)
    except WorkItemRefused as exc:
        raise refused(exc) from exc
    launch_run(state, trigger="work_item_retry")
    return result


@router.post("/{work_item_id}/cancel", response_model=ItemActionResult, responses=error_responses(401, 403, 404, 409))
def cancel_item(work_item_id: str, state: ServerState = Depends(server_state),
                identity: Identity = Depends(require_scope(WRITE_WORK_ITEM))) -> ItemActionResult:
    """Cancel an item (skipped + cancelled, later stages parked); a cancelled item can be retried."""
    state.config()
    try:
        return actions.cancel_work_item(state.ctx, _work_item_id(work_item_id), actor=identity.name,
                                        principal=identity.principal)
    except WorkItemRefused as exc:
        raise refused(exc) from exc
