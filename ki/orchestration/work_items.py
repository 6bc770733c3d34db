"""Operator actions on work items: retry and cancel, one item or everything matching a filter.

spec/work-queue.md "Inspect and retry failed work" (a retry resets a failed item to
runnable with a fresh attempt budget, clears its lease and error, and never touches a running item);
DESIGN.md "Work items". The release is the quarantine retry's (:func:`ki.store.requeue.release_rows`:
downstream invalidated back to waiting), so both retries behave the same.

Bulk actions take a :class:`~ki.store.work_items.WorkItemFilter`: a dry run returns how many items
match (and are eligible), a sample, and a confirmation token bound to the action, the filter, that
count, the limit and the actor; the real call recomputes the count and refuses a token that does not
match it (the filter or the set of matching items changed since the preview). At most ``limit``
items per call; the answer says how many remain and carries the token for the next call. A bulk
action is one audit entry (actor, filter, count) plus one history entry per item. Launching the run
that picks the work up is the caller's (the API launches one; the CLI runs one).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any, Literal

from pydantic import BaseModel

from ki.core.errors import WorkItemRefused
from ki.domain.context import PipelineContext
from ki.orchestration.quarantine import reset_provider_cooldowns
from ki.store.audit import record_audit
from ki.store.requeue import release_rows
from ki.store.work_items import WorkItemFilter, cancel_rows, get_work_item, select_for_action

Action = Literal["retry", "cancel"]
#: Items one bulk call acts on at most, unless the caller asks for fewer.
DEFAULT_BULK_LIMIT = 1000
MAX_BULK_LIMIT = 10_000


class ItemActionResult(BaseModel):
    """What a single retry/cancel did: the item, its stage, the status it left, and (retry) the stages parked
    back to waiting and the error it overruled (kept in the history)."""

    id: str
    kind: str
    previous_status: str
    status: str
    invalidated_stages: list[str] = []
    previous_error: dict[str, Any] | None = None
    #: (retry) the stage released: this one, or an earlier stage of the file that was not done.
    released_stage: str | None = None
    message: str


class BulkPreview(BaseModel):
    """A dry run: ``count`` items match and are eligible; ``sample`` paths (``hidden_samples``: left out,
    the caller's principal may not see them); the token for the real call."""

    action: Action
    filter: dict[str, Any]
    count: int
    limit: int
    sample: list[str]
    confirmation_token: str
    hidden_samples: int = 0


class BulkResult(BaseModel):
    """A real bulk call: ``acted`` items changed, ``remaining`` still matching and eligible, and when some
    remain, the token for the next call of the same filter (``next_confirmation_token``)."""

    action: Action
    filter: dict[str, Any]
    acted: int
    remaining: int
    next_confirmation_token: str | None
    audit_id: int
    message: str
    hidden: int = 0


def confirmation_token(action: str, flt: WorkItemFilter, count: int, limit: int, actor: str) -> str:
    """The token a dry run returns: SHA-256 (32 hex) of the action, the canonical filter, the count, the limit
    and the actor. It proves the caller saw the preview of exactly this selection; authorisation is the
    caller's scope, not this token."""
    body = json.dumps({"action": action, "filter": flt.canonical(), "count": count, "limit": limit,
                       "actor": actor}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:32]


def _item(ctx: PipelineContext, conn: Any, work_item_id: uuid.UUID, principal: str | None) -> Any:
    """The item to act on; one of a file ``principal`` may not see is ``not_found``, like an unknown id."""
    from ki.domain.access.visibility import visible_objects

    row = get_work_item(conn, work_item_id, restore=True)  # an archived item comes back to be retried
    if row is None or not visible_objects(ctx.db.engine, principal, [row.source_object_id]):
        raise WorkItemRefused("not_found", f"no work item has id work_item:{work_item_id}")
    if row.stored_status == "running":
        raise WorkItemRefused("running", f"work_item:{work_item_id} ({row.stage} of {row.path}) is running: "
                                         "wait for its attempt to finish")
    return row


def retry_work_item(ctx: PipelineContext, work_item_id: uuid.UUID, *, actor: str,
                    principal: str | None = None) -> ItemActionResult:
    """Reset a failed, quarantined or cancelled item to runnable (fresh budget, error cleared from the row and
    kept in the history, downstream invalidated), audit it. The caller launches a run.

    A stage runs only after its predecessors: when an earlier stage of the file is failed, quarantined or
    cancelled, that earlier stage is released instead (and this one waits for it), as the quarantine
    retry does; the answer's ``kind`` and message name the stage released.

    Raises: WorkItemRefused ``not_found`` (also for an item of a file ``principal`` may not see),
    ``running``, ``not_retryable`` (also while an earlier stage of the file is still queued or running: the
    item runs after it anyway)."""
    with ctx.db.engine.begin() as conn:
        row = _item(ctx, conn, work_item_id, principal)
        released = release_rows(conn, [row.row_id], actor=actor)
        mine = [r for r in released if r.source_object_id == row.source_object_id]
        if not mine:
            if row.stored_status in ("failed", "quarantined") or row.status == "cancelled":
                raise WorkItemRefused("not_retryable", f"work_item:{work_item_id} ({row.stage}) waits on an "
                                                       "earlier stage of its file that is still queued or running")
            raise WorkItemRefused("not_retryable", f"work_item:{work_item_id} is {row.status} (bucket "
                                                   f"{row.bucket}): only failed or cancelled items are retried")
        previous = mine[0].previous_error
        reset_provider_cooldowns([previous])
        record_audit(conn, actor=actor, action="work_item_retry", source_object_id=row.source_object_id,
                     details={"id": f"work_item:{work_item_id}", "kind": row.stage, "overruled_error": previous,
                              "released_stage": mine[0].stage,
                              "invalidated_stages": mine[0].invalidated_stages})
    earlier = mine[0].stage != row.stage
    message = "queued for another attempt (a run picks it up; it has not finished)"
    if earlier:
        message = (f"the file's earlier stage {mine[0].stage} was not done: it was queued for another attempt "
                   f"instead, and {row.stage} waits for it (a run picks it up; it has not finished)")
    return ItemActionResult(id=f"work_item:{work_item_id}", kind=row.stage, previous_status=row.status,
                            status="waiting" if earlier else "runnable", released_stage=mine[0].stage,
                            invalidated_stages=mine[0].invalidated_stages,
                            previous_error={k: v for k, v in previous.items() if k != "traceback"},
                            message=message)


def cancel_work_item(ctx: PipelineContext, work_item_id: uuid.UUID, *, actor: str,
                     principal: str | None = None) -> ItemActionResult:
    """Cancel an item that is not running or finished: skipped + ``cancelled``, later stages parked; audited.
    A cancelled item can be retried.

    Raises: WorkItemRefused ``not_found`` (also for an item of a file ``principal`` may not see), ``running``,
    ``not_cancellable``."""
    with ctx.db.engine.begin() as conn:
        row = _item(ctx, conn, work_item_id, principal)
        if not cancel_rows(conn, [row.row_id], actor=actor):
            raise WorkItemRefused("not_cancellable", f"work_item:{work_item_id} is {row.status}: only runnable, "
                                                     "pending or failed items are cancelled")
        record_audit(conn, actor=actor, action="work_item_cancel", source_object_id=row.source_object_id,
                     details={"id": f"work_item:{work_item_id}", "kind": row.stage, "previous_status": row.status})
    return ItemActionResult(id=f"work_item:{work_item_id}", kind=row.stage, previous_status=row.status,
                            status="cancelled", message="cancelled (retry it to run it again)")


def _check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_BULK_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_BULK_LIMIT}")
    return limit


def _check_scope(flt: WorkItemFilter, all_items: bool) -> None:
    """A bulk action over no filter at all must say so: a misspelt filter must not become "everything"."""
    if not flt.canonical() and not all_items:
        raise WorkItemRefused("filter_required", "a bulk action with an empty filter acts on every work item: "
                                                 "name a filter, or pass all=true to mean all of them")


def preview_bulk(ctx: PipelineContext, action: Action, flt: WorkItemFilter, *, actor: str,
                 limit: int = DEFAULT_BULK_LIMIT, all_items: bool = False, principal: str | None = None
                 ) -> BulkPreview:
    """The dry run of a bulk ``action`` (changes nothing); the sample shows only what ``principal`` may
    see (None: an operator, everything). Raises ValueError for a limit out of range, WorkItemRefused
    ``filter_required`` for an empty filter without ``all_items``."""
    from ki.domain.access.visibility import split_visible

    _check_limit(limit)
    _check_scope(flt, all_items)
    with ctx.db.engine.connect() as conn:
        count, _ids, sample = select_for_action(conn, flt, action, limit=min(limit, 5))
    shown, hidden = split_visible(ctx.db.engine, principal, sample, lambda pair: pair[0])
    return BulkPreview(action=action, filter=flt.canonical(), count=count, limit=limit,
                       sample=[path for _oid, path in shown], hidden_samples=hidden,
                       confirmation_token=confirmation_token(action, flt, count, limit, actor))


def run_bulk(ctx: PipelineContext, action: Action, flt: WorkItemFilter, *, actor: str, token: str | None,
             limit: int = DEFAULT_BULK_LIMIT, all_items: bool = False, principal: str | None = None) -> BulkResult:
    """Retry or cancel up to ``limit`` items matching ``flt`` (oldest first) in one transaction, given the
    ``token`` of a dry run of the same action, filter, count and limit; an empty filter needs ``all_items``.
    A caller with a ``principal`` acts only on items of files that principal may see
    (:mod:`ki.domain.access.visibility`): the others among the selection are left as they are and counted in
    ``hidden`` (and not in ``remaining`` when the selection held every match).

    Raises: WorkItemRefused ``confirmation_required`` (no token), ``confirmation_mismatch`` (the filter,
        limit or matching count differs from the dry run's) or ``filter_required``; ValueError for a limit
        out of range."""
    _check_limit(limit)
    _check_scope(flt, all_items)
    if not token:
        raise WorkItemRefused("confirmation_required", "a bulk action needs the confirmation_token of a dry run "
                                                       "(dry_run=true) of the same filter and limit")
    from ki.domain.access.visibility import visible_objects

    with ctx.db.engine.begin() as conn:
        count, selected, _sample = select_for_action(conn, flt, action, limit=limit)
        if token != confirmation_token(action, flt, count, limit, actor):
            raise WorkItemRefused("confirmation_mismatch", f"the confirmation token does not match this filter "
                                                           f"and limit, or the matching count changed (now {count}): "
                                                           "run the dry run again")
        seen = visible_objects(ctx.db.engine, principal, (oid for _row, oid in selected))
        ids = [row for row, oid in selected if oid in seen]
        hidden = len(selected) - len(ids)
        if action == "retry":
            released = release_rows(conn, ids, actor=actor)
            reset_provider_cooldowns([r.previous_error for r in released])
            acted = len(released)
        else:
            acted = len(cancel_rows(conn, ids, actor=actor))
        matching, _, _ = select_for_action(conn, flt, action, limit=0)
        # the next call's dry-run count is ``matching``; when the selection held every match, the hidden ones
        # among it are not the caller's to act on and are not reported as remaining
        remaining = max(0, matching - hidden) if count <= limit else matching
        audit_id = record_audit(conn, actor=actor, action=f"work_items_{action}",
                                details={"filter": flt.canonical(), "count": count, "acted": acted,
                                         "limit": limit, "remaining": remaining, "hidden": hidden})
    verb = "queued for another attempt (a run picks them up; they have not finished)" if action == "retry" \
        else "cancelled"
    return BulkResult(action=action, filter=flt.canonical(), acted=acted, remaining=remaining,
                      next_confirmation_token=confirmation_token(action, flt, matching, limit, actor)
                      if remaining else None, audit_id=audit_id,
                      hidden=hidden, message=f"{acted} work items {verb}; {remaining} more match"
                      + (f"; {hidden} not acted on: the token's principal may not see them" if hidden else ""))
