"""The body of the source scan task (workflow ``ki-sync``): scan, finish the sync run, hand off.

Spec: insertion-pipeline.md "Orchestration" (``KI_HATCHET_SYNC_CONCURRENCY``: concurrent source
scans; the sweeper fails a sync run whose workflow ended without finishing it, because
``uq_pipeline_runs_active_sync`` refuses a second sync of a source while one is unfinished) and
"Configuration" (``pipeline.auto_insert_after_sync``: a sync that brought something new hands off
to an insertion run through ``launch_insertion``).

The workflow is declared in :mod:`ki.workflows.dag` (one task, ``scan``, at most
``KI_HATCHET_SYNC_CONCURRENCY`` at once). A scan error (e.g. ``SourceUnavailable``) fails the sync run with
its cause instead of retrying: a scan is cheap to start again and an unavailable source changes
nothing in the database.
"""

from __future__ import annotations

from typing import Any

from ki.store import runs
from ki.workflows.task import worker_runtime


def run_sync(run_id: int, source_id: int) -> dict[str, Any]:
    """Scan the source, finish the sync run row, and hand off to an insertion run when the scan
    brought something new (and ``pipeline.auto_insert_after_sync`` is on).

    Returns ``{"run_id", "status", "listed", "new", "changed", "insertion_run_id"}``.
    """
    from ki.sources.scan import scan_source

    rt = worker_runtime()
    ctx = rt.ctx
    ctx.reload_config()
    with ctx.db.engine.begin() as conn:
        runs.start_sync(conn, run_id)
    try:
        report = scan_source(ctx, source_id)
    except Exception as exc:  # noqa: BLE001 - the cause is recorded on the run row
        with ctx.db.engine.begin() as conn:
            runs.fail_sync(conn, run_id, f"{type(exc).__name__}: {exc}")
        return {"run_id": run_id, "status": "failed", "error": f"{type(exc).__name__}: {exc}"[:500]}
    changed = report.new + report.changed + report.reappeared + report.access_changed
    with ctx.db.engine.begin() as conn:
        runs.complete_sync(conn, run_id, listed=report.listed, changed=changed)
    insertion = None
    if changed and ctx.config.pipeline.auto_insert_after_sync:
        if rt.hand_off is None:
            raise RuntimeError("this worker runtime cannot launch runs (run it through ki worker)")
        insertion = rt.hand_off(ctx, source_id)
    return {"run_id": run_id, "status": "completed", "listed": report.listed, "new": report.new,
            "changed": report.changed, "insertion_run_id": insertion}
