"""The sweeper of local runs: a run whose process is gone never stays ``running``.

A local run records the process running it (``pipeline_runs.worker``, ``host:pid:start``;
``ki.core.liveness``) and writes its counters about every second (``updated_at`` is its heartbeat).
:func:`sweep_local_runs` fails, with the recorded cause:

* a run whose process on this host has ended (killed, crashed) or whose pid another program now
  uses — at once;
* any other local run silent for ``KI_RUN_SILENT_MINUTES`` (another host's process, or one that
  hangs) — presumed dead.

Its documents' rows are never touched here: the claims its process held are recovered by
:func:`ki.orchestration.prepare.recover_stale_claims` (at once for an ended process) and the next
run adopts whatever is left. Called before every local run starts, by ``ki status``, by the
console's status reads and by the Hatchet sweeper (``ki.workflows.sweeper.sweep_if_due``).
"""

from __future__ import annotations

import logging

from ki.core.liveness import dead_here
from ki.domain.context import PipelineContext
from ki.store import batches, runs

log = logging.getLogger(__name__)


def sweep_local_runs(ctx: PipelineContext) -> list[tuple[int, str]]:
    """Fail every active local run whose process is gone or that is silent for too long.

    Returns ``(run id, error written)`` per run failed; never raises (a status read must not fail
    because of the sweep: a failure is logged and nothing is returned).
    """
    try:
        silent_limit = ctx.settings.run_silent_minutes * 60.0
        failed: list[tuple[int, str]] = []
        with ctx.db.engine.begin() as conn:
            for run_id, worker, silent in runs.local_active_runs(conn):
                if worker is not None and worker == ctx.worker_id:
                    continue  # this process's own run
                if worker is not None and dead_here(worker):
                    error = (f"the process running it ({worker}) ended without finishing it (killed or crashed); "
                             f"its remaining work is adopted by the next run")
                elif silent_limit and silent > silent_limit:
                    error = (f"silent for {silent / 60:.0f} min (KI_RUN_SILENT_MINUTES {silent_limit / 60:g}); "
                             f"its process ({worker or 'unknown'}) is presumed dead")
                else:
                    continue
                if batches.fail_run(conn, run_id, error):
                    failed.append((run_id, error))
        for run_id, error in failed:
            log.warning("run %d failed by the sweeper: %s", run_id, error)
        return failed
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("sweeping local runs failed: %s", exc)
        return []
