"""Evidence of whose fault an outage-looking failure is: did the dependency serve other files meanwhile?

Spec work-queue.md "Poison messages" and insertion-pipeline.md "Retry policy and quarantine"; the
decision is in docs/design-decisions.md ("Whose fault is a fault that only one file meets"). Read
on the failure path only (never on a claim or a completion): the successes come from the attempt
history (``work_item_attempt``, index ``ix_work_item_attempt_signature``: a ``done`` attempt has no
signature), the other files still failing from ``processing_state`` (partial index
``ix_processing_state_signature`` over failed rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.core.served import Served

#: Successes counted at most (the evidence says "at least this many"; the read stays bounded).
SUCCESS_COUNT_CAP = 1000

#: Reasons of faults already held against their own file: they are no evidence of an outage.
OWN_FAULT_REASONS = ("poison_suspected", "timeout")

# -- name: fault_evidence --
# Since :since (default: when the failing attempt was claimed): how many attempts of other files
# finished ``done`` in :stages, the latest of them, and whether another file of those stages failed
# with an outage-looking fault after that latest success (then the dependency fails for others too).
FAULT_EVIDENCE_SQL = text("""
WITH since AS (
    SELECT coalesce(CAST(:since AS timestamptz), (SELECT claimed_at FROM processing_state WHERE id = :row_id),
                    now()) AS at
), ok AS (
    SELECT a.finished_at FROM work_item_attempt a, since
    WHERE a.stage = ANY(CAST(:stages AS text[])) AND a.signature IS NULL AND a.outcome = 'done'
      AND a.finished_at > since.at AND a.source_object_id <> :oid
    ORDER BY a.finished_at DESC LIMIT :cap
)
SELECT (SELECT at FROM since) AS since, (SELECT count(*) FROM ok) AS succeeded,
       (SELECT max(finished_at) FROM ok) AS last_success,
       EXISTS (SELECT 1 FROM processing_state ps
               WHERE ps.stage = ANY(CAST(:stages AS text[])) AND ps.status = 'failed' AND ps.source_object_id <> :oid
                 AND ps.updated_at > (SELECT max(finished_at) FROM ok)
                 AND ps.last_error->>'infrastructure' IS NOT NULL
                 AND coalesce(ps.reason, '') <> ALL(CAST(:own AS text[]))) AS others_failing
""")


@dataclass(frozen=True)
class FaultEvidence(Served):
    """What other files met in the same stages since a file's fault streak began (:class:`ki.core.served.Served`:
    ``succeeded`` counts attempts of other files that finished ``done``, at most :data:`SUCCESS_COUNT_CAP`;
    ``others_failing``: another file of those stages failed with an outage-looking fault after the latest).

    Attributes:
        since: when the streak began (UTC; the first faulting attempt's claim).
    """

    since: datetime | None = None


def fault_evidence(conn: Connection, *, row_id: int, source_object_id: int, stages: list[str],
                   since: datetime | str | None) -> FaultEvidence:
    """The :class:`FaultEvidence` for the failing row ``row_id`` (object ``source_object_id``) over
    ``stages`` since ``since`` (None: the row's ``claimed_at``)."""
    row = conn.execute(FAULT_EVIDENCE_SQL, {
        "since": since, "row_id": row_id, "oid": source_object_id, "stages": list(stages),
        "cap": SUCCESS_COUNT_CAP, "own": list(OWN_FAULT_REASONS)}).one()
    return FaultEvidence(int(row.succeeded), row.last_success, bool(row.others_failing), since=row.since)
