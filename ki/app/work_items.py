"""The work-items reads, shaped for the API, MCP and ``ki work``: one implementation behind all three.

Each function opens its own connection on ``ctx``; the actions are in
:mod:`ki.orchestration.work_items`.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from ki.app.work_item_views import (
    FailureGroups,
    WorkItem,
    WorkItemDetail,
    WorkItemPage,
    work_item_out,
)
from ki.core.errors import WorkItemRefused
from ki.domain.access.visibility import split_visible, visible_objects
from ki.domain.context import PipelineContext
from ki.store.attempts import history
from ki.store.work_items import WorkItemFilter, WorkItemRow, failure_groups, get_work_item, list_work_items

#: Items one page holds at most.
MAX_PAGE = 500


def _out(ctx: PipelineContext, row: WorkItemRow) -> WorkItem:
    pipeline = ctx.config.pipeline
    return work_item_out(row, max_attempts=pipeline.stage(row.stage).max_attempts,
                         claim_timeout_seconds=pipeline.claim_timeout_seconds)


def list_page(ctx: PipelineContext, flt: WorkItemFilter, *, limit: int = 50, cursor: str | None = None,
              principal: str | None = None) -> WorkItemPage:
    """A page of work items matching ``flt`` (newest first); with ``principal``, only the items it may see
    (``hidden`` counts the others; the page may then be shorter than ``limit``, and ``next_cursor``
    still continues after it). Raises ValueError for a bad cursor or limit."""
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be between 1 and {MAX_PAGE}")
    with ctx.db.engine.connect() as conn:
        rows, next_cursor = list_work_items(conn, flt, limit=limit, cursor=cursor)
    shown, hidden = split_visible(ctx.db.engine, principal, rows, lambda r: r.source_object_id)
    return WorkItemPage(items=[_out(ctx, r) for r in shown], next_cursor=next_cursor, limit=limit, hidden=hidden)


def detail(ctx: PipelineContext, work_item_id: uuid.UUID, *, principal: str | None = None) -> WorkItemDetail:
    """One work item with its attempt history. Raises WorkItemRefused ``not_found`` (also for an item
    ``principal`` may not see: its existence is not confirmed)."""
    with ctx.db.engine.begin() as conn:  # an archived item is restored (spec work-queue.md: cold history)
        row = get_work_item(conn, work_item_id, restore=True)
        if row is not None and principal is not None and \
                row.source_object_id not in visible_objects(ctx.db.engine, principal, [row.source_object_id]):
            row = None
        if row is None:
            raise WorkItemRefused("not_found", f"no work item has id work_item:{work_item_id}")
        entries = history(conn, row.row_id)
    return WorkItemDetail(**_out(ctx, row).model_dump(), history=entries)


def groups(ctx: PipelineContext, flt: WorkItemFilter, *, limit: int = 100, principal: str | None = None
           ) -> FailureGroups:
    """Failure groups per (stage, signature) of the failing items matching ``flt``, largest first; with
    ``principal``, sample paths it may not see are left out (``hidden_samples``) and the message is
    dropped unless its item (the newest) is visible — counts stay whole."""
    with ctx.db.engine.connect() as conn:
        found = failure_groups(conn, flt, limit=limit)
    if principal is not None:
        seen = visible_objects(ctx.db.engine, principal, (i for g in found for i in g.sample_object_ids))
        found = [replace(g, sample_paths=[p for p, i in zip(g.sample_paths, g.sample_object_ids, strict=True)
                                          if i in seen],
                         sample_object_ids=[i for i in g.sample_object_ids if i in seen],
                         hidden_samples=sum(1 for i in g.sample_object_ids if i not in seen),
                         message=g.message if g.sample_object_ids and g.sample_object_ids[0] in seen else None)
                 for g in found]
    return FailureGroups(groups=found)
