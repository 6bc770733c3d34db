"""Pulling a neighbour's fetch/convert forward for ``open_file`` (inline conversion).

Spec: insertion-pipeline.md "Relate: what the model is given" (open_file): "If the target has not
converted yet, the stage pulls its fetch/convert forward through the normal claim machinery
(ensure_source_object_ready), bounded by inline_conversion_budget_seconds and
inline_conversion_slots, observing rather than duplicating a claim another worker holds, and
returning an honest status (busy, in_progress, quarantined, …)". The claim machinery is the
executor's ``run_stage_for_object``, handed in as ``run_stage`` (``StageContext.ensure_ready``), so the
rows stay the source of truth, a conversion done here is never repeated by the runner, and relate
never imports the executor.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from ki.domain.context import PipelineContext
from ki.store.status import StageRow, rows_by_stage

#: ``run_stage_for_object`` bound to a pipeline context: ``(stage, source_object_id) -> ExecutionResult``.
RunStage = Callable[[str, int], Any]
ReadyStatus = Literal["ok", "busy", "in_progress", "quarantined", "failed", "deleted", "not_found"]
STAGES = ("fetch", "convert")
POLL_SECONDS = 0.1

_slots_lock = threading.Lock()
_slots: dict[int, threading.BoundedSemaphore] = {}


def slots(n: int) -> threading.BoundedSemaphore:
    """The process-wide semaphore of ``n`` inline-conversion slots (one per configured size)."""
    with _slots_lock:
        if n not in _slots:
            _slots[n] = threading.BoundedSemaphore(n)
        return _slots[n]


def _row(ctx: PipelineContext, oid: int, stage: str) -> StageRow | None:
    with ctx.db.engine.connect() as conn:
        return rows_by_stage(conn, oid).get(stage)


def ensure_source_object_ready(ctx: PipelineContext, oid: int, *, run_stage: RunStage | None = None,
                               budget_seconds: float | None = None,
                               slot_count: int | None = None) -> tuple[ReadyStatus, str]:
    """Make object ``oid`` fetched and converted within the budget, through its own stage rows.

    Args:
        run_stage: ``(stage, oid) -> result`` with the ``ExecutionResult`` attributes ``kind`` and
            ``error_class``: the executor's ``run_stage_for_object`` (``StageContext.ensure_ready``
            supplies it). Without it a pending row is only observed, like one running elsewhere.
        budget_seconds: default ``pipeline.inline_conversion_budget_seconds``.
        slot_count: default ``pipeline.inline_conversion_slots`` (process-wide cap).
    Returns: (status, detail): ``ok``; ``busy`` (no free slot within the budget); ``in_progress``
        (another worker holds the claim, or the budget ran out); ``quarantined``; ``failed`` (awaiting
        a retry); ``deleted``; ``not_found``.
    """
    budget = ctx.config.pipeline.inline_conversion_budget_seconds if budget_seconds is None else budget_seconds
    deadline = time.monotonic() + max(0.0, budget)
    n_slots = slot_count or ctx.config.pipeline.inline_conversion_slots
    sem = slots(n_slots)
    if not sem.acquire(timeout=max(0.0, budget)):
        return "busy", f"all {n_slots} inline-conversion slots are busy"
    try:
        for stage in STAGES:
            while True:
                row = _row(ctx, oid, stage)
                if row is None:
                    return "not_found", f"object {oid} has no {stage} row"
                if row.deleted:
                    return "deleted", "the file was deleted"
                if row.status == "done":
                    break
                if row.status == "quarantined":
                    return "quarantined", f"{stage} is quarantined"
                if row.status == "failed" and not row.due:
                    return "failed", f"{stage} failed and awaits its retry"
                if row.status in ("pending", "failed") and run_stage is not None:
                    result = run_stage(stage, oid)
                    if result.kind in ("done", "skipped", "not_claimed", "claim_lost"):
                        continue
                    return ("quarantined" if result.kind == "quarantined" else "failed",
                            f"{stage} {result.kind}: {result.error_class}")
                if row.status == "skipped" and row.reason != "waiting_for_previous_stage":
                    return "deleted" if row.reason == "source_object_deleted" else "failed", f"{stage} skipped"
                # running elsewhere, or waiting behind the previous stage: observe, do not duplicate
                if time.monotonic() >= deadline:
                    return "in_progress", f"{stage} is being processed by another worker"
                time.sleep(POLL_SECONDS)
        return "ok", "converted"
    finally:
        sem.release()
