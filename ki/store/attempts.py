"""The append-only attempt history of every (document, stage): ``work_item_attempt``.

DESIGN.md "Work items" (every attempt is kept, so a retry never erases a failure).
Each outcome writes its history row in the statement that records the outcome (no extra round
trip on the claim path): :mod:`ki.store.claims` embeds :data:`INSERT_FROM_COMPLETED`,
:data:`INSERT_FROM_FAILED` and :data:`INSERT_FROM_STALE` as data-modifying CTEs over the rows its
UPDATE returned; operator actions (``retried``, ``cancelled``) embed :data:`INSERT_FROM_ACTION`
(:mod:`ki.store.work_items`, :mod:`ki.store.requeue`). Reads: :func:`history`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.engine import Connection

#: The longest message a history row keeps (the row's ``last_error`` keeps the same).
#: Durations and finish times use ``clock_timestamp()``: a handler may run inside the claim's transaction,
#: whose ``now()`` is the claim time.
MESSAGE_MAX_CHARS = 2000

_COLUMNS = """(processing_state_id, source_object_id, stage, attempt, outcome, started_at, worker, run_id,
     actor, error_class, reason, message, infrastructure, signature, duration_seconds, producer_version, finished_at)"""

#: CTE body: a history row per row of CTE ``done`` (id, source_object_id, stage, attempts, claimed_at,
#: run_id) — a committed ``done``/``skipped`` completion. Parameters: ``:status``, ``:worker``,
#: ``:producer_version``, ``:last_error`` (JSON text or NULL: its ``reason`` is kept).
INSERT_FROM_COMPLETED = f"""INSERT INTO work_item_attempt {_COLUMNS}
    SELECT id, source_object_id, stage, attempts, :status, claimed_at, :worker, run_id,
           NULL, NULL, CAST(:last_error AS jsonb)->>'reason', NULL, NULL, NULL,
           extract(epoch FROM clock_timestamp() - claimed_at), :producer_version, clock_timestamp()
    FROM done"""

#: CTE body: a history row per row of CTE ``failed`` (id, source_object_id, stage, attempts, status,
#: claimed_at, run_id) — a recorded failure, outcome = the new status (``failed``/``quarantined``).
#: Parameters: ``:worker``, ``:error_class``, ``:reason``, ``:message``, ``:infrastructure``, ``:signature``.
INSERT_FROM_FAILED = f"""INSERT INTO work_item_attempt {_COLUMNS}
    SELECT id, source_object_id, stage, attempts, status, claimed_at, :worker, run_id,
           NULL, :error_class, :reason, :message, :infrastructure, :signature,
           extract(epoch FROM clock_timestamp() - claimed_at), NULL, clock_timestamp()
    FROM failed"""

#: CTE body: a history row per row of CTE ``recovered`` (id, source_object_id, stage, attempts, claimed_at,
#: run_id, worker, last_error) — a stale claim failed by recovery (outcome ``stale``). Parameter:
#: ``:signature`` (the stale-claim signature, one for every stale claim).
INSERT_FROM_STALE = f"""INSERT INTO work_item_attempt {_COLUMNS}
    SELECT id, source_object_id, stage, attempts, 'stale', claimed_at, worker, run_id,
           NULL, last_error->>'class', last_error->>'reason', last_error->>'message', NULL, :signature,
           extract(epoch FROM clock_timestamp() - claimed_at), NULL, clock_timestamp()
    FROM recovered"""

#: CTE body: a history row per row of CTE ``acted`` (id, source_object_id, stage, attempts, run_id) — an
#: operator action. Parameters: ``:outcome`` (``retried``/``cancelled``), ``:actor``.
INSERT_FROM_ACTION = f"""INSERT INTO work_item_attempt {_COLUMNS}
    SELECT id, source_object_id, stage, attempts, :outcome, NULL, NULL, run_id,
           :actor, NULL, NULL, NULL, NULL, NULL, NULL, NULL, clock_timestamp()
    FROM acted"""


@dataclass(frozen=True)
class Attempt:
    """One history entry (see :class:`ki.store.models_work_items.WorkItemAttempt` for the fields)."""

    id: int
    attempt: int
    outcome: str
    started_at: datetime | None
    finished_at: datetime
    worker: str | None
    run_id: int | None
    actor: str | None
    error_class: str | None
    reason: str | None
    message: str | None
    infrastructure: str | None
    signature: str | None
    duration_seconds: float | None
    producer_version: str | None


_HISTORY_COLUMNS = """id, attempt, outcome, started_at, finished_at, worker, run_id, actor, error_class, reason,
       message, infrastructure, signature, duration_seconds, producer_version"""
# the live history and the entries archived for their age (ki.store.archive): one history
HISTORY_SQL = text(f"""
SELECT {_HISTORY_COLUMNS} FROM work_item_attempt WHERE processing_state_id = :row_id
UNION ALL
SELECT {_HISTORY_COLUMNS} FROM work_item_attempt_archive WHERE processing_state_id = :row_id
ORDER BY id
""")


def history(conn: Connection, row_id: int) -> list[Attempt]:
    """Every history entry of the processing_state row ``row_id``, oldest first (archived entries included)."""
    return [Attempt(**dict(r._mapping)) for r in conn.execute(HISTORY_SQL, {"row_id": row_id})]
