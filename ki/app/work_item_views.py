"""Pydantic models of the work-items API (``/v1/work-items``) and its MCP tools.

spec/work-queue.md "Inspect and retry failed work"; DESIGN.md "Work items". Times are
timezone-aware UTC (ISO 8601), durations seconds.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ki.orchestration.work_items import BulkPreview, BulkResult, ItemActionResult  # noqa: F401 - re-exported
from ki.store.attempts import Attempt
from ki.store.work_items import FailureGroup, WorkItemRow


class Lease(BaseModel):
    """A running item's claim: the worker, when it claimed, its last heartbeat and when the claim expires
    (heartbeat + ``pipeline.claim_timeout_seconds``; recovery fails it after that)."""

    worker: str | None
    claimed_at: datetime | None
    heartbeat_at: datetime | None
    expires_at: datetime | None


class WorkItem(BaseModel):
    """One work item: ``id`` = ``work_item:<uuid>``, ``kind`` = stage, ``status`` = the
    work-queue status, ``bucket`` = ki's console bucket, ``last_error`` without the traceback."""

    id: str
    kind: str
    status: str
    bucket: str
    path: str
    source_object_id: int
    attempts: int
    max_attempts: int
    last_error: dict[str, Any] | None
    lease: Lease | None
    next_retry_at: datetime | None
    run_id: int | None
    updated_at: datetime


class WorkItemDetail(WorkItem):
    """A work item with its whole attempt history, oldest first."""

    history: list[Attempt]


class WorkItemPage(BaseModel):
    """A page of work items, newest first; ``next_cursor`` fetches the next page (None: this was the last)."""

    items: list[WorkItem]
    next_cursor: str | None
    limit: int
    hidden: int = Field(0, description="items of this page left out: the token's principal may not see them")


class FailureGroups(BaseModel):
    """Failure groups, largest first."""

    groups: list[FailureGroup]


class BulkRequest(BaseModel):
    """A bulk retry/cancel: ``dry_run`` previews (count, sample, confirmation token); the real call needs the
    token of a dry run of the same filter and limit. The filter is the list's query parameters."""

    model_config = ConfigDict(extra="forbid")

    dry_run: bool = False
    confirmation_token: str | None = Field(None, max_length=64)
    all: bool = Field(False, description="act on every work item when the filter is empty (else refused, 422)")
    limit: int = Field(1000, ge=1, le=10_000, description="items one call acts on at most")


def work_item_out(row: WorkItemRow, *, max_attempts: int, claim_timeout_seconds: float) -> WorkItem:
    """The API shape of a stored row."""
    lease = None
    if row.stored_status == "running":
        expires = row.heartbeat_at + timedelta(seconds=claim_timeout_seconds) if row.heartbeat_at else None
        lease = Lease(worker=row.claimed_by, claimed_at=row.claimed_at, heartbeat_at=row.heartbeat_at,
                      expires_at=expires)
    return WorkItem(id=f"work_item:{row.work_item_id}", kind=row.stage, status=row.status, bucket=row.bucket,
                    path=row.path, source_object_id=row.source_object_id, attempts=row.attempts,
                    max_attempts=max_attempts, last_error=row.last_error, lease=lease,
                    next_retry_at=row.next_retry_at, run_id=row.run_id, updated_at=row.updated_at)
