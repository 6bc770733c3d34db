"""The end of a local run that was asked to cancel (``ki run cancel``; :mod:`ki.store.cancel`).

The runner (:class:`ki.orchestration.runner.PipelineRunner`) reads the request, stops claiming and lets the
claims in hand finish; :func:`end_local_cancelled` then writes the run's end. Spec: work-queue.md "Work Item
Lifecycle" (``Cancelled``); docs/design-decisions.md "Cancelling a run".
"""

from __future__ import annotations

from ki.domain.context import PipelineContext
from ki.store import cancel


def cancel_note(cancelled_by: str | None, owed: int) -> str:
    """The text kept as the cancelled run's ``error``: who cancelled it and what it left for the next run."""
    who = cancelled_by or "an operator"
    return (f"cancelled by {who}; {owed} row(s) left as they were (pending, awaiting retry or held elsewhere): "
            "the next run resumes them")


def end_local_cancelled(ctx: PipelineContext, run_id: int, counters: object) -> str:
    """End local run ``run_id`` ``cancelled`` with ``counters`` (a ``RunCounters``); returns the note written."""
    with ctx.db.engine.begin() as conn:
        note = cancel_note(cancel.cancelled_by(conn, run_id), cancel.owed_rows(conn))
        cancel.finish_cancelled(conn, run_id, counters, note)
    return note
