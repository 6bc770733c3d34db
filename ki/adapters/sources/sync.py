"""The body of a sync run, shared by both providers: scan the source, finish the run, hand off.

Spec: insertion-pipeline.md "Orchestration" (a sync run per source scan; ``uq_pipeline_runs_active_sync`` refuses a
second unfinished sync of a source) and "Configuration" (``pipeline.auto_insert_after_sync``: a sync that brought
something new hands off to an insertion run through ``launch_insertion``; the sync run records the insertion run's
id, ``insertion_run_id``; null when it handed off nothing).

The ``local`` provider runs :func:`run_sync_body` in-process (:func:`ki.app.launch.launch_sync`); the
``hatchet`` provider runs it in the ``ki-sync`` workflow's task (:mod:`ki.workflows.sync`). The hand-off
is given by the caller (this layer never imports the launcher): it is called with an ``on_started``
callback that the insertion launcher calls with the new run's id, and :func:`run_sync_body` completes
the sync run with that id in the same statement, so a reader never sees a completed sync whose
hand-off is still unrecorded. A hand-off that fails before its run exists fails the sync run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ki.adapters.sources.scan import ScanReport, ScanScope, scan_source
from ki.domain.context import PipelineContext
from ki.store import runs

#: ``hand_off(ctx, source_id, on_started) -> insertion run id``; the launcher calls ``on_started(run_id)``
#: as soon as the insertion run's row exists.
HandOff = Callable[[PipelineContext, int, Callable[[int], None]], int | None]


@dataclass
class SyncResult:
    """What one sync run did.

    Attributes:
        run_id: the sync run.
        status: ``completed`` or ``failed``.
        report: the scan's :class:`ScanReport` (None when the scan failed).
        insertion_run_id: the insertion run it handed off to (None: nothing new, auto-insert off,
            or the hand-off failed before its run existed).
        error: the cause of a failure (``Class: message``); cause: the exception itself.
    """

    run_id: int
    status: str
    report: ScanReport | None = None
    insertion_run_id: int | None = None
    error: str | None = None
    cause: BaseException | None = field(default=None, repr=False)

    @property
    def changed(self) -> int:
        """Objects the scan made owed: new, changed, reappeared, grants changed (0 without a report)."""
        r = self.report
        return 0 if r is None else r.new + r.changed + r.reappeared + r.access_changed + r.renamed


def run_sync_body(ctx: PipelineContext, run_id: int, source_id: int, *, hand_off: HandOff | None,
                  scope: ScanScope | None = None,
                  on_scanned: Callable[[ScanReport], None] | None = None, insert: bool = False) -> SyncResult:
    """Run the sync run ``run_id`` of ``source_id``: mark it running, scan, hand off, finish it.

    Args:
        hand_off: starts the insertion run (None: never hand off, as with auto-insert off).
        scope: what the scan looks at (a watcher's settled files, what to defer); None: the whole source.
        on_scanned: called with the ScanReport once the scan succeeded (before the hand-off).
        insert: hand off even when the scan brought nothing new and auto-insert is off (``ki insert``: the
            insertion also finishes work an earlier run left owed).
    Returns: the :class:`SyncResult` (for a run that had already ended, its recorded outcome, without a
        report: nothing is scanned or handed off twice). A scan error (e.g. ``SourceUnavailable``) fails
        the run with its cause and is not raised: a scan is cheap to start again and an unavailable
        source changes nothing.
    """
    with ctx.db.engine.begin() as conn:
        active = runs.start_sync(conn, run_id)
    if not active:  # a replay of a sync that already ended: its outcome stands
        with ctx.db.engine.connect() as conn:
            row = runs.get_run(conn, run_id)
        if row is None:
            return SyncResult(run_id, "failed", error=f"sync run {run_id} does not exist")
        return SyncResult(run_id, row.status, insertion_run_id=row.insertion_run_id, error=row.error)
    try:
        report = scan_source(ctx, source_id, scope)
    except Exception as exc:  # noqa: BLE001 - the cause is recorded on the run row
        error = f"{type(exc).__name__}: {exc}"
        with ctx.db.engine.begin() as conn:
            runs.fail_sync(conn, run_id, error)
        return SyncResult(run_id, "failed", error=error, cause=exc)
    result = SyncResult(run_id, "completed", report)
    if on_scanned is not None:
        on_scanned(report)
    listed = report.listed

    def complete(insertion_run_id: int | None) -> None:
        result.insertion_run_id = insertion_run_id
        with ctx.db.engine.begin() as conn:
            runs.complete_sync(conn, run_id, listed=listed, changed=result.changed,
                               insertion_run_id=insertion_run_id)

    due = insert or (result.changed and ctx.config.pipeline.auto_insert_after_sync)
    if hand_off is None or not due:
        complete(None)
        return result
    completed = [False]

    def on_started(insertion_run_id: int) -> None:
        completed[0] = True
        complete(insertion_run_id)

    try:
        hand_off(ctx, source_id, on_started)
    except Exception as exc:
        if not completed[0]:
            error = f"hand-off failed: {type(exc).__name__}: {exc}"
            with ctx.db.engine.begin() as conn:
                runs.fail_sync(conn, run_id, error)
            result.status, result.error, result.cause = "failed", error, exc
            return result
        raise
    if not completed[0]:  # the hand-off started nothing (e.g. an insertion already covers the work)
        complete(None)
    return result
