"""The source scan as a Hatchet workflow (``ki-sync``): scan, finish the sync run, hand off.

Spec: insertion-pipeline.md "Orchestration" (``KI_HATCHET_SYNC_CONCURRENCY``: concurrent source
scans; the sweeper fails a sync run whose workflow ended without finishing it, because
``uq_pipeline_runs_active_sync`` refuses a second sync of a source while one is unfinished) and
"Configuration" (``pipeline.auto_insert_after_sync``: a sync that brought something new hands off
to an insertion run through ``launch_insertion``).

One task, ``scan``, with a constant concurrency key ``'sync'`` capped at
``KI_HATCHET_SYNC_CONCURRENCY``. A scan error (e.g. ``SourceUnavailable``) fails the sync run with
its cause instead of retrying: a scan is cheap to start again and an unavailable source changes
nothing in the database.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ki.store import runs

if TYPE_CHECKING:
    from hatchet_sdk import Hatchet

    from ki.config.loader import ProcessSettings

SYNC_WORKFLOW = "ki-sync"
SYNC_KEY_EXPRESSION = "'sync'"


class SyncInput(BaseModel):
    """Input of a sync run: the pipeline_runs id (kind ``sync``) and the source, as decimal strings."""

    run_id: str
    source_id: str


def run_sync(run_id: int, source_id: int) -> dict[str, Any]:
    """Scan the source, finish the sync run row, and hand off to an insertion run when the scan
    brought something new (and ``pipeline.auto_insert_after_sync`` is on).

    Returns ``{"run_id", "status", "listed", "new", "changed", "insertion_run_id"}``.
    """
    from ki.orchestration.insertion import launch_insertion
    from ki.sources.scan import scan_source
    from ki.workflows.runtime import worker_runtime

    ctx = worker_runtime().ctx
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
        insertion = launch_insertion(ctx, trigger="sync", source_id=source_id).run_id
    return {"run_id": run_id, "status": "completed", "listed": report.listed, "new": report.new,
            "changed": report.changed, "insertion_run_id": insertion}


def sync_workflow(hatchet: Hatchet, settings: ProcessSettings) -> Any:
    """Declare ``ki-sync`` on ``hatchet`` (one ``scan`` task, ≤ KI_HATCHET_SYNC_CONCURRENCY at once)."""
    from hatchet_sdk import ConcurrencyExpression, ConcurrencyLimitStrategy

    from ki.workflows.insertion import TASK_TIMEOUT

    wf = hatchet.workflow(name=SYNC_WORKFLOW, input_validator=SyncInput)

    def scan(inp: SyncInput, ctx) -> dict[str, Any]:
        return run_sync(int(inp.run_id), int(inp.source_id))

    wf.task(name="scan", retries=2, backoff_factor=5.0, backoff_max_seconds=60, schedule_timeout=TASK_TIMEOUT,
            execution_timeout=TASK_TIMEOUT,
            concurrency=[ConcurrencyExpression(expression=SYNC_KEY_EXPRESSION,
                                               max_runs=settings.hatchet_sync_concurrency,
                                               limit_strategy=ConcurrencyLimitStrategy.GROUP_ROUND_ROBIN)])(scan)
    return wf
