"""How fast the active runs move: stage executions completed in the last minute, per run.

What ``ki status`` shows for an active run (documents/s over the last minute and the ETA beside its
counters). A run's claims write its id on the rows they complete (``processing_state.run_id``), so the
rows a run finished recently are the rows with its id whose ``updated_at`` is recent and whose status is
an outcome (done, skipped, quarantined; a failure waiting for its retry counts too: it was an execution).
Spec: insertion-pipeline.md "The console page" (active run progress).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import text
from sqlalchemy.engine import Connection

#: The window the rate is measured over (s).
RATE_WINDOW_SECONDS = 60

# -- name: recent_executions --
RECENT_EXECUTIONS_SQL = text("""
SELECT run_id, count(*) AS n
FROM processing_state
WHERE run_id = ANY(:runs) AND status IN ('done', 'skipped', 'quarantined', 'failed')
  AND updated_at > now() - make_interval(secs => :window)
GROUP BY run_id
""")

# -- name: remaining_rows --
# Rows still owed (pending, running, failed awaiting a retry, waiting on the stage before) of every stage,
# of one source's objects or of all: what an active run may still execute.
REMAINING_SQL = text("""
SELECT count(*) FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
WHERE so.deleted_at IS NULL AND (CAST(:source AS bigint) IS NULL OR so.source_id = :source)
  AND (ps.status IN ('pending', 'running', 'failed')
       OR (ps.status = 'skipped' AND ps.reason = 'waiting_for_previous_stage'))
""")


def recent_executions(conn: Connection, run_ids: Sequence[int], *, window: int = RATE_WINDOW_SECONDS
                      ) -> dict[int, int]:
    """``{run id: stage executions completed in the last ``window`` seconds}`` (runs without any left out)."""
    if not run_ids:
        return {}
    return {int(r.run_id): int(r.n) for r in conn.execute(RECENT_EXECUTIONS_SQL,
                                                          {"runs": list(run_ids), "window": window})}


def remaining_rows(conn: Connection, source_id: int | None) -> int:
    """Rows still owed of ``source_id``'s live objects (None: of every source)."""
    return int(conn.execute(REMAINING_SQL, {"source": source_id}).scalar_one())
