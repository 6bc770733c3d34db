"""Cancelling a Hatchet batch: end it in the ledger, then cancel its DAGs in the engine.

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider, the conveyor); docs/design-decisions.md
"Cancelling a run". :func:`ki.store.cancel.end_batch_cancelled` ends the run ``cancelled`` and finishes every
unfinished member (``cancelled``), so the conveyor (:mod:`ki.store.conveyor`, which releases only while the run
is active) triggers nothing more; the DAGs in flight are then cancelled with one bulk call. A task that is
executing a stage when its DAG is cancelled finishes that stage (its outcome commits under its fencing token) and
claims nothing more (:func:`ki.workflows.task.drive_stage` reads the request before each claim).
"""

from __future__ import annotations

import logging

from ki.domain.context import PipelineContext
from ki.store import cancel
from ki.workflows.client import hatchet_client

log = logging.getLogger(__name__)


def cancel_batch(ctx: PipelineContext, run_id: int, note: str) -> cancel.BatchCancelled:
    """End Hatchet batch ``run_id`` ``cancelled`` and cancel its DAGs in flight (best effort: a DAG the engine
    cannot cancel now still claims nothing more). Returns what was ended."""
    with ctx.db.engine.begin() as conn:
        ended = cancel.end_batch_cancelled(conn, run_id, note)
    if ended.in_flight:
        try:
            from hatchet_sdk.features.runs import BulkCancelReplayOpts

            hatchet_client().runs.bulk_cancel(BulkCancelReplayOpts(ids=[w for _, w in ended.in_flight]))
        except Exception as exc:  # noqa: BLE001 - the ledger already ended the batch; its tasks stop claiming
            log.warning("run %s: cancelling %d document DAG(s) in Hatchet failed (%s); their tasks stop at their "
                        "next claim", run_id, len(ended.in_flight), exc)
    return ended
