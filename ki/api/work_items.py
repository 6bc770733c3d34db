"""The work-items reads, shaped for the API, MCP and ``ki work``: one implementation behind all three.

Issue 18 items 3-6. Each function opens its own connection on ``ctx``; the actions are in
:mod:`ki.orchestration.work_items`.
"""

from __future__ import annotations

import uuid

from ki.api.schemas_work_items import (
    FailureGroups,
    WorkItem,
    WorkItemDetail,
    WorkItemPage,
    work_item_out,
)
from ki.context import PipelineContext
from ki.errors import WorkItemRefused
from ki.store.attempts import history
from ki.store.work_items import WorkItemFilter, WorkItemRow, failure_groups, get_work_item, list_work_items

#: Items one page holds at most.
MAX_PAGE = 500


def _out(ctx: PipelineContext, row: WorkItemRow) -> WorkItem:
    pipeline = ctx.config.pipeline
    return work_item_out(row, max_attempts=pipeline.stage(row.stage).max_attempts,
                         claim_timeout_seconds=pipeline.claim_timeout_seconds)


def list_page(ctx: PipelineContext, flt: WorkItemFilter, *, limit: int = 50, cursor: str | None = None
              ) -> WorkItemPage:
    """A page of work items matching ``flt`` (newest first). Raises ValueError for a bad cursor or limit."""
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be between 1 and {MAX_PAGE}")
    with ctx.db.engine.connect() as conn:
        rows, next_cursor = list_work_items(conn, flt, limit=limit, cursor=cursor)
    return WorkItemPage(items=[_out(ctx, r) for r in rows], next_cursor=next_cursor, limit=limit)


def detail(ctx: PipelineContext, work_item_id: uuid.UUID) -> WorkItemDetail:
    """One work item with its attempt history. Raises WorkItemRefused ``not_found``."""
    with ctx.db.engine.begin() as conn:  # an archived item is restored (spec work-queue.md: cold history)
        row = get_work_item(conn, work_item_id, restore=True)
        if row is None:
            raise WorkItemRefused("not_found", f"no work item has id work_item:{work_item_id}")
        entries = history(conn, row.row_id)
    return WorkItemDetail(**_out(ctx, row).model_dump(), history=entries)


def groups(ctx: PipelineContext, flt: WorkItemFilter, *, limit: int = 100) -> FailureGroups:
    """Failure groups per (stage, signature) of the failing items matching ``flt``, largest first."""
    with ctx.db.engine.connect() as conn:
        return FailureGroups(groups=failure_groups(conn, flt, limit=limit))
