"""``GET /api/quarantine``, ``GET /api/quarantine/{id}``, ``POST /api/quarantine/{id}/retry``.

Spec: insertion-pipeline.md "What quarantine records" (path, stage, attempts and the error object:
class, message, traceback tail, deterministic flag) and "Retry from quarantine": the retry releases
the earliest quarantined stage with a fresh attempt budget, invalidates every downstream stage back
to waiting, is written to the audit log with the overruled error, and immediately launches an
insertion run. A row that is not quarantined → 409.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Path, Query

from ki.api.auth import Identity, require_scope
from ki.api.errors import ApiError, error_responses
from ki.api.routes_pipeline import launch_run
from ki.api.schemas import QuarantineDetail, QuarantineItem, QuarantinePage, RetryOut, StageRowOut
from ki.api.state import ServerState, server_state
from ki.app.scopes import READ_PIPELINE, WRITE_PIPELINE
from ki.core.taxonomies import PIPELINE_STAGE_ORDER, STAGE_CONSOLE_NAMES
from ki.domain.access.visibility import split_visible, visible_objects
from ki.orchestration.quarantine import retry_quarantined
from ki.store.status import object_rows, quarantine_facets, quarantine_page

router = APIRouter(prefix="/api", tags=["quarantine"])

StageId = Literal["fetch", "convert", "classify_matter", "relate", "extract_metadata", "extract_decisions", "index"]
ObjectId = Path(ge=1, le=2**63 - 1, description="the source object id")

DETERMINISTIC_WARNING = ("the original failure was deterministic: the file will quarantine again on its first "
                         "attempt unless the file itself changed")


@router.get("/quarantine", response_model=QuarantinePage, responses=error_responses(401, 403))
def list_quarantine(state: ServerState = Depends(server_state),
                    identity: Identity = Depends(require_scope(READ_PIPELINE)),
                    stage: StageId | None = None,
                    reason: str | None = Query(None, max_length=200, description="e.g. corrupt, needs_ocr"),
                    error_class: str | None = Query(None, max_length=200, description="e.g. UnsupportedDocument"),
                    limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0, le=10_000_000)
                    ) -> QuarantinePage:
    """Quarantined rows, newest first (filters: stage, reason, error class; paged), with filter facets; a
    token with a principal gets only rows of files it may see (``hidden`` counts the rest of the page)."""
    with state.ctx.db.engine.connect() as conn:
        rows, total = quarantine_page(conn, stage=stage, reason=reason, error_class=error_class, limit=limit,
                                      offset=offset)
        facets = quarantine_facets(conn)
    rows, hidden = split_visible(state.ctx.db.engine, identity.principal, rows, lambda r: r.source_object_id)
    items = [QuarantineItem(source_object_id=r.source_object_id, path=r.path, stage=r.stage,
                            name=STAGE_CONSOLE_NAMES.get(r.stage, r.stage), attempts=r.attempts, error=r.error,
                            deterministic=bool(r.error.get("deterministic")), updated_at=r.updated_at) for r in rows]
    return QuarantinePage(items=items, total=total, limit=limit, offset=offset, facets=facets, hidden=hidden)


@router.get("/quarantine/{source_object_id}", response_model=QuarantineDetail, responses=error_responses(401, 403, 404))
def quarantine_detail(source_object_id: int = ObjectId, state: ServerState = Depends(server_state),
                      identity: Identity = Depends(require_scope(READ_PIPELINE))) -> QuarantineDetail:
    """An object's stage rows with the whole error object of each (traceback tail included); 404 for an
    object the token's principal may not see."""
    config = state.config()
    with state.ctx.db.engine.connect() as conn:
        path, rows = object_rows(conn, source_object_id)
    if path is not None and not visible_objects(state.ctx.db.engine, identity.principal, [source_object_id]):
        path = None
    if path is None:
        raise ApiError(404, "not_found", f"no source object has id {source_object_id}")
    order = {s: i for i, s in enumerate(PIPELINE_STAGE_ORDER)}
    rows = sorted(rows, key=lambda r: order.get(r.stage, 99))
    stages = [StageRowOut(stage=r.stage, name=STAGE_CONSOLE_NAMES.get(r.stage, r.stage), status=r.status,
                          bucket=r.bucket, attempts=r.attempts,
                          max_attempts=config.pipeline.stage(r.stage).max_attempts if r.stage in order else 0,
                          producer_version=r.producer_version, error=r.last_error, next_retry_at=r.next_retry_at,
                          updated_at=r.updated_at) for r in rows]
    return QuarantineDetail(source_object_id=source_object_id, path=path, stages=stages,
                            quarantined_stages=[r.stage for r in rows if r.status == "quarantined"])


@router.post("/quarantine/{source_object_id}/retry", response_model=RetryOut,
             responses=error_responses(401, 403, 404, 409, 503))
def retry(source_object_id: int = ObjectId, stage: StageId | None = Query(
              None, description="the stage asked for; the earliest quarantined stage is released"),
          state: ServerState = Depends(server_state),
          identity: Identity = Depends(require_scope(WRITE_PIPELINE))) -> RetryOut:
    """Release the object's earliest quarantined stage, invalidate downstream, audit it, start a run."""
    with state.ctx.db.engine.connect() as conn:
        path, _rows = object_rows(conn, source_object_id)
    if path is not None and not visible_objects(state.ctx.db.engine, identity.principal, [source_object_id]):
        path = None
    if path is None:
        raise ApiError(404, "not_found", f"no source object has id {source_object_id}")
    state.config()
    try:
        resp = retry_quarantined(state.ctx, source_object_id, stage=stage, actor=identity.name)
    except LookupError as exc:
        raise ApiError(409, "not_quarantined", f"{path} has no quarantined stage: nothing to retry") from exc
    run, follow_up = launch_run(state, trigger="quarantine_retry")
    return RetryOut(**resp.model_dump(), warning=DETERMINISTIC_WARNING if resp.deterministic else None, run=run,
                    follow_up=follow_up)
