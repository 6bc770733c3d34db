"""The body of the source scan task (workflow ``ki-sync``): :func:`ki.adapters.sources.sync.run_sync_body` in a worker.

Spec: insertion-pipeline.md "Orchestration" (``KI_HATCHET_SYNC_CONCURRENCY``: concurrent source
scans; the sweeper fails a sync run whose workflow ended without finishing it, because
``uq_pipeline_runs_active_sync`` refuses a second sync of a source while one is unfinished) and
"Configuration" (``pipeline.auto_insert_after_sync``: a sync that brought something new hands off
to an insertion run through ``launch_insertion``, whose id the sync run records).

The workflow is declared in :mod:`ki.workflows.dag` (one task, ``scan``, at most
``KI_HATCHET_SYNC_CONCURRENCY`` at once). A scan error (e.g. ``SourceUnavailable``) fails the sync run with
its cause instead of retrying: a scan is cheap to start again and an unavailable source changes
nothing in the database. A replayed task finds its run ended and does nothing twice.
"""

from __future__ import annotations

from typing import Any

from ki.workflows.inputs import SyncInput
from ki.workflows.task import worker_runtime


def run_sync(run_id: int, source_id: int, inp: SyncInput | None = None) -> dict[str, Any]:
    """Scan the source (what ``inp`` scopes: the watcher's paths, what to defer; None: all of it), finish the
    sync run row, and hand off to an insertion run when the scan brought something new (and
    ``pipeline.auto_insert_after_sync`` is on).

    Returns ``{"run_id", "status", "listed", "new", "changed", "insertion_run_id"}`` (``error`` when failed).
    Raises: RuntimeError when a hand-off is due and this worker runtime cannot launch runs.
    """
    from ki.adapters.sources.scan import ScanScope
    from ki.adapters.sources.sync import run_sync_body

    rt = worker_runtime()
    ctx = rt.ctx
    ctx.reload_config()

    def hand_off(ctx, source_id, on_started):
        if rt.hand_off is None:
            raise RuntimeError("this worker runtime cannot launch runs (run it through ki worker)")
        return rt.hand_off(ctx, source_id, on_started)

    scope = None
    if inp is not None:
        scope = ScanScope(paths=tuple(inp.paths) if inp.paths is not None else None, defer=frozenset(inp.defer),
                          defer_younger_than=inp.defer_younger_than, gone=tuple(inp.gone),
                          delete_at_once_max=inp.delete_at_once_max)
    result = run_sync_body(ctx, run_id, source_id, hand_off=hand_off, scope=scope)
    if result.status != "completed":
        return {"run_id": run_id, "status": result.status, "error": (result.error or "")[:500]}
    report = result.report
    return {"run_id": run_id, "status": "completed", "listed": report.listed if report else 0,
            "new": report.new if report else 0, "changed": report.changed if report else 0,
            "insertion_run_id": result.insertion_run_id}
