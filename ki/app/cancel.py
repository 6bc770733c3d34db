"""``cancel_run``: the one entry of ``ki run cancel`` and ``POST /api/runs/{id}/cancel``, above both providers.

Spec: work-queue.md "Work Item Lifecycle" (``Runnable --> Cancelled``) applied to a run; docs/design-decisions.md
"Cancelling a run". The request is recorded on the run row (:func:`ki.store.cancel.request_cancel`) and audited;
then

* ``local``: the process running the run reads it within a second, claims nothing more, lets its claims in hand
  finish and ends the run ``cancelled`` with its counters (:mod:`ki.orchestration.cancel`); this call waits up
  to ``wait_seconds`` for that end. A run whose process is gone (``ki.core.liveness``) is ended here.
* ``hatchet``: the batch is ended here and its DAGs cancelled (:mod:`ki.workflows.cancel`).

No row is rewritten: what the run never claimed keeps its state, what it finished stays finished, so the next
``ki insert`` resumes exactly where the run stopped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ki.core.liveness import dead_here
from ki.domain.context import PipelineContext
from ki.orchestration.cancel import cancel_note
from ki.store import audit, cancel, runs
from ki.store.runs import RunRow
from ki.workflows.cancel import cancel_batch


class RunNotCancellable(Exception):
    """The run cannot be cancelled: ``code`` ``not_found`` (no such run), ``finished`` (it already ended) or
    ``sync`` (a sync run: cancel the insertion run it handed off to)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class CancelOutcome:
    """What :func:`cancel_run` did: the run row after it (``status`` ``cancelled``, or still ``running`` while
    its local process finishes the claims in hand) and a one-line ``message``."""

    run: RunRow
    message: str


def cancel_run(ctx: PipelineContext, run_id: int, *, actor: str, wait_seconds: float = 30.0,
               poll_seconds: float = 0.2, reason: str | None = None) -> CancelOutcome:
    """Cancel active run ``run_id`` on behalf of ``actor`` (a token name, ``cli``); audited with ``reason``.

    Raises:
        RunNotCancellable: unknown run, a run that already ended, or a sync run (nothing is written).
    """
    with ctx.db.engine.begin() as conn:
        row = runs.get_run(conn, run_id)
        if row is None:
            raise RunNotCancellable("not_found", f"no run has id {run_id}")
        if row.kind == runs.KIND_SYNC:
            raise RunNotCancellable("sync", f"run {run_id} is a sync run: a scan is not cancelled; cancel the "
                                            f"insertion run it hands off to")
        req = cancel.request_cancel(conn, run_id, actor=actor)
        if not req.requested:
            raise RunNotCancellable("finished", f"run {run_id} already ended ({req.status}): nothing to cancel")
        audit.record_audit(conn, actor=actor, action="run_cancel",
                           details={"run_id": run_id, "provider": req.provider, "kind": req.kind, "reason": reason})
    if req.provider == "hatchet":
        with ctx.db.engine.connect() as conn:
            note = cancel_note(actor, cancel.owed_rows(conn))
        cancel_batch(ctx, run_id, note)
    elif req.worker is None or dead_here(req.worker):
        with ctx.db.engine.begin() as conn:
            cur = runs.get_run(conn, run_id)
            if cur is not None and cur.status in runs.ACTIVE_RUN_STATUSES:
                cancel.finish_cancelled(conn, run_id, cur, cancel_note(actor, cancel.owed_rows(conn)))
    deadline = time.monotonic() + max(0.0, wait_seconds)
    while True:
        with ctx.db.engine.connect() as conn:
            cur = runs.get_run(conn, run_id)
        assert cur is not None  # a run row is never deleted while active
        if cur.status not in runs.ACTIVE_RUN_STATUSES or time.monotonic() >= deadline:
            break
        time.sleep(poll_seconds)
    if cur.status == cancel.STATUS_CANCELLED:
        message = (f"run {run_id} cancelled: {cur.done} done, {cur.skipped} skipped, {cur.retried} retried, "
                   f"{cur.quarantined} quarantined before it stopped")
    elif cur.status in runs.ACTIVE_RUN_STATUSES:
        message = (f"run {run_id} is cancelling: it claims nothing more and ends when the stages it holds finish "
                   f"(process {req.worker})")
    else:
        message = f"run {run_id} ended {cur.status} before the cancellation took effect"
    return CancelOutcome(cur, message)
