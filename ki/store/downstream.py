"""A document's later stages, when an earlier stage's result ends the document or changes.

One statement per function on a connection the caller owns. Spec: insertion-pipeline.md
"Processing states and console buckets" (a handler verdict that ends the document skips every later
stage) and "Relate" / "Classify" (a result computed without something it must read runs again, lane
``rerun``). The lease itself is :mod:`ki.store.claims`.
"""

from __future__ import annotations

import json

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.core.taxonomies import LANE_RERUN, PIPELINE_STAGE_ORDER, WAITING_FOR_PREVIOUS_STAGE
from ki.store.claims import WAITING_JSON

# -- name: skip_downstream --
# A handler verdict that ends the document (e.g. source_object_deleted) skips every later stage.
SKIP_DOWNSTREAM_SQL = text("""
UPDATE processing_state
SET status = 'skipped', last_error = CAST(:last_error AS jsonb), producer_version = NULL,
    claim_token = NULL, updated_at = now()
WHERE source_object_id = :source_object_id AND stage = ANY(:stages) AND status <> 'quarantined'
""")


def skip_downstream(conn: Connection, source_object_id: int, stage: str, reason: str) -> None:
    """Skip every stage after ``stage`` with ``reason`` (quarantined rows stay)."""
    later = list(PIPELINE_STAGE_ORDER[PIPELINE_STAGE_ORDER.index(stage) + 1 :])
    if later:
        conn.execute(
            SKIP_DOWNSTREAM_SQL,
            {"source_object_id": source_object_id, "stages": later, "last_error": json.dumps({"reason": reason})},
        )


# -- name: request_rerun --
# Another file's stage found that these (object, stage) results were computed without something
# they must read (relate: a file of the matter classified later). Done and running rows go back
# to pending with a fresh attempt budget; a running claim's token is cleared, so the worker's late
# completion is refused and the row runs again. Other statuses are left alone (pending, failed
# and waiting rows will run anyway; quarantined and disabled rows are not reclaimed this way).
REQUEST_RERUN_SQL = text("""
UPDATE processing_state
SET status = 'pending', attempts = 0, last_error = NULL, next_retry_at = NULL, claim_token = NULL,
    claimed_by = NULL, heartbeat_at = NULL, lane = :lane, updated_at = now()
WHERE source_object_id = ANY(CAST(:oids AS bigint[])) AND stage = :stage AND status IN ('done', 'running')
RETURNING id
""")


def request_rerun(conn: Connection, source_object_ids: list[int], stage: str) -> int:
    """Put ``stage`` of the objects back to pending in lane ``rerun`` (see the statement above); returns
    how many rows moved."""
    return len(conn.execute(REQUEST_RERUN_SQL, {"oids": sorted(set(source_object_ids)), "stage": stage,
                                                "lane": LANE_RERUN}).fetchall())


# -- name: request_rerun_from --
# As request_rerun, and every later stage of those objects waits again (a stage's output is the
# next stage's input: Classify choosing another matter changes what Relate and Extract metadata
# derive). Quarantined later rows stay quarantined.
REQUEST_RERUN_FROM_SQL = text("""
WITH requeued AS (
    UPDATE processing_state
    SET status = 'pending', attempts = 0, last_error = NULL, next_retry_at = NULL, claim_token = NULL,
        claimed_by = NULL, heartbeat_at = NULL, lane = coalesce(:lane, lane), updated_at = now()
    WHERE source_object_id = ANY(CAST(:oids AS bigint[])) AND stage = :stage AND status IN ('done', 'running')
    RETURNING source_object_id
), parked AS (
    UPDATE processing_state ps
    SET status = 'skipped', last_error = CAST(:waiting AS jsonb), producer_version = NULL, next_retry_at = NULL,
        claim_token = NULL, claimed_by = NULL, heartbeat_at = NULL, updated_at = now()
    FROM requeued r
    WHERE ps.source_object_id = r.source_object_id AND ps.stage = ANY(CAST(:later AS text[]))
      AND ps.status <> 'quarantined' AND NOT (ps.status = 'skipped' AND ps.reason = :waiting_reason)
    RETURNING ps.id
)
SELECT (SELECT count(*) FROM requeued) AS requeued
""")


def request_rerun_from(conn: Connection, source_object_ids: list[int], stage: str, *,
                       lane: str | None = None) -> int:
    """Put ``stage`` of the objects back to pending (in ``lane``; None: each row keeps its lane) and every
    later stage back to waiting; returns how many ``stage`` rows moved (see the statement above)."""
    later = list(PIPELINE_STAGE_ORDER[PIPELINE_STAGE_ORDER.index(stage) + 1:])
    return int(conn.execute(REQUEST_RERUN_FROM_SQL, {
        "oids": sorted(set(source_object_ids)), "stage": stage, "later": later, "waiting": WAITING_JSON,
        "waiting_reason": WAITING_FOR_PREVIOUS_STAGE, "lane": lane}).scalar_one())
