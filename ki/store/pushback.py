"""Engine back-pressure on a Hatchet batch: its refused triggers, its AIMD window, its unconfirmed DAGs.

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider, ``KI_HATCHET_DOCUMENT_CONCURRENCY``, the
sweeper) and docs/design-decisions.md "Triggers the engine refuses". Migration ``0028_trigger_pushback``.

A member of a batch (:mod:`ki.store.conveyor`) counts as released once the engine acknowledged its workflow
run (``workflow_run_id`` recorded, ``acknowledged_at``); until then it only holds a slot of the window and its
releaser retries the trigger. While the engine pushes back the batch's window shrinks and regrows:

* :func:`refused` — a trigger of the run was refused or went unanswered: the window halves (at most once per
  :data:`DECREASE_EVERY_SECONDS`, so a burst of refusals from many tasks counts as one), never below 1; the
  refusal is counted and its cause kept on the run;
* :func:`regrow` — a trigger was acknowledged and the engine has not refused for :data:`QUIET_SECONDS`: the
  window grows by one, up to ``window_limit`` (the configured window).

The sweeper's early check reads :func:`unconfirmed` (acknowledged DAGs that never showed a sign of life) and
records :func:`mark_verified`; :func:`overdue_stranded` counts slots whose trigger is overdue.
Every function takes a connection the caller owns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.engine import Connection

#: A second halving of a run's window needs this long since the previous refusal (s).
DECREASE_EVERY_SECONDS = 2.0
#: The window regrows only after this long without a refusal (s).
QUIET_SECONDS = 2.0

REFUSED_SQL = text("""
UPDATE pipeline_runs SET
    document_window = CASE WHEN last_refusal_at IS NULL OR last_refusal_at < now() - make_interval(secs => :every)
                           THEN greatest(1, document_window / 2) ELSE document_window END,
    window_limit = coalesce(window_limit, document_window),
    trigger_refusals = trigger_refusals + 1, last_refusal_at = now(), last_refusal = :cause
WHERE id = :r AND document_window IS NOT NULL
RETURNING document_window
""")
WINDOW_MIN_SQL = text("UPDATE pipeline_runs SET window_min = least(coalesce(window_min, :w), :w) WHERE id = :r")
REFUSED_NO_WINDOW_SQL = text("""
UPDATE pipeline_runs SET trigger_refusals = trigger_refusals + 1, last_refusal_at = now(), last_refusal = :cause
WHERE id = :r
""")


def refused(conn: Connection, run_id: int, cause: str) -> int | None:
    """Record that the engine refused (or did not answer) a trigger of run ``run_id`` with ``cause`` (cut to
    500 characters) and shrink the batch's window. Returns the window now (None: a run without one, a sync)."""
    params = {"r": run_id, "cause": cause[:500], "every": DECREASE_EVERY_SECONDS}
    window = conn.execute(REFUSED_SQL, params).scalar()
    if window is None:
        conn.execute(REFUSED_NO_WINDOW_SQL, params)
        return None
    conn.execute(WINDOW_MIN_SQL, {"r": run_id, "w": int(window)})
    return int(window)


REGROW_SQL = text("""
UPDATE pipeline_runs SET document_window = document_window + 1
WHERE id = :r AND window_limit IS NOT NULL AND document_window < window_limit
  AND (last_refusal_at IS NULL OR last_refusal_at < now() - make_interval(secs => :quiet))
RETURNING document_window
""")


def regrow(conn: Connection, run_id: int) -> int | None:
    """A trigger of run ``run_id`` was acknowledged: grow its window by one when it is below its limit and the
    engine has been quiet for :data:`QUIET_SECONDS`. Returns the new window, or None when unchanged."""
    return conn.execute(REGROW_SQL, {"r": run_id, "quiet": QUIET_SECONDS}).scalar()


@dataclass(frozen=True)
class Pushback:
    """What the engine's back-pressure did to a run: its window now, its limit and low point, its refusals."""

    window: int | None
    window_limit: int | None
    window_min: int | None
    refusals: int
    last_refusal_at: datetime | None
    last_refusal: str | None


def pushback(conn: Connection, run_id: int) -> Pushback | None:
    """The :class:`Pushback` recorded on run ``run_id`` (None: no such run)."""
    row = conn.execute(text("SELECT document_window, window_limit, window_min, trigger_refusals, last_refusal_at, "
                            "last_refusal FROM pipeline_runs WHERE id = :r"), {"r": run_id}).first()
    if row is None:
        return None
    return Pushback(row.document_window, row.window_limit, row.window_min, int(row.trigger_refusals),
                    row.last_refusal_at, row.last_refusal)


# Acknowledged, unfinished, never confirmed, acknowledged at least :grace s ago, and no row of the document
# touched since: a DAG the engine runs shows a claim within seconds, so only queued or lost DAGs are asked about.
UNCONFIRMED_SQL = text("""
SELECT m.source_object_id, m.workflow_run_id FROM pipeline_run_object m
WHERE m.run_id = :r AND m.finished_at IS NULL AND m.workflow_run_id IS NOT NULL AND m.verified_at IS NULL
  AND m.acknowledged_at < now() - make_interval(secs => :grace)
  AND NOT EXISTS (SELECT 1 FROM processing_state ps WHERE ps.source_object_id = m.source_object_id
                  AND ps.updated_at > m.acknowledged_at)
ORDER BY m.acknowledged_at, m.source_object_id
LIMIT :n
""")


def unconfirmed(conn: Connection, run_id: int, *, grace_seconds: float, limit: int) -> list[tuple[int, str]]:
    """``(object id, workflow run id)`` of at most ``limit`` members of run ``run_id`` whose acknowledged DAG
    showed no sign of life for ``grace_seconds`` and was never confirmed, oldest acknowledgement first."""
    rows = conn.execute(UNCONFIRMED_SQL, {"r": run_id, "grace": float(grace_seconds), "n": int(limit)})
    return [(int(r.source_object_id), str(r.workflow_run_id)) for r in rows]


def mark_verified(conn: Connection, run_id: int, pairs: Sequence[tuple[int, str]]) -> None:
    """Record that the engine knows each ``(object id, workflow run id)`` (only while that id is recorded)."""
    if pairs:
        conn.execute(text("""
UPDATE pipeline_run_object m SET verified_at = now()
FROM unnest(CAST(:o AS bigint[]), CAST(:w AS text[])) AS v(oid, wid)
WHERE m.run_id = :r AND m.source_object_id = v.oid AND m.workflow_run_id = v.wid
"""), {"r": run_id, "o": [int(p[0]) for p in pairs], "w": [str(p[1]) for p in pairs]})


def overdue_stranded(conn: Connection, run_id: int, *, older_than_seconds: float) -> int:
    """Members of run ``run_id`` released into a slot more than ``older_than_seconds`` ago whose trigger was
    never acknowledged (their releaser gave up or died)."""
    return int(conn.execute(text("""
SELECT count(*) FROM pipeline_run_object
WHERE run_id = :r AND released_at IS NOT NULL AND finished_at IS NULL AND workflow_run_id IS NULL
  AND released_at < now() - make_interval(secs => :s)
"""), {"r": run_id, "s": float(older_than_seconds)}).scalar())
