"""Every statement that puts ``processing_state`` rows back to work or parks them.

Seeding a new object's rows, the requeues of the prepare steps (outdated versions, newly enabled
stages, ontology scope, capability quarantines), a changed or reappeared file going back to fetch,
the quarantine retry's release, and access-only marking. Each function runs on a connection the
caller owns (the caller chooses the transaction); what to requeue (versions, enabled stages, the
ontology scope, the grants comparison) is decided by the caller.

Spec: insertion-pipeline.md "Processing states and console buckets" (seeding), "producer_version
semantics" (requeue_outdated_stages, requeue_newly_enabled_stages, requeue_ontology_outdated), "Retry
from quarantine", "Index" (access_only_reindex); DESIGN.md "Quarantine reasons" (capability releases).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.core.taxonomies import (
    ACCESS_ONLY_REINDEX,
    CANCELLED,
    DISABLED_BY_CONFIGURATION,
    LANE_BACKFILL,
    LANE_LIVE,
    LANE_RERUN,
    LANE_RETRY,
    PIPELINE_STAGE_ORDER,
    WAITING_FOR_PREVIOUS_STAGE,
)
from ki.store.archive import restore_objects
from ki.store.attempts import INSERT_FROM_ACTION
from ki.store.claims import WAITING_JSON

# -- name: seed_rows --
# A new object gets one row per stage: fetch pending, every later stage waiting.
SEED_ROWS_SQL = text("""
INSERT INTO processing_state (source_object_id, stage, status, last_error, lane)
SELECT o.id, s.stage,
       CASE WHEN s.stage = :first THEN 'pending' ELSE 'skipped' END,
       CASE WHEN s.stage = :first THEN NULL ELSE CAST(:waiting AS jsonb) END, :lane
FROM unnest(CAST(:ids AS bigint[])) AS o(id) CROSS JOIN unnest(CAST(:stages AS text[])) AS s(stage)
ON CONFLICT (source_object_id, stage) DO NOTHING
""")

# -- name: requeue_from_fetch --
# Changed bytes (or a reappeared file): every row of the object starts again from fetch.
REQUEUE_FROM_FETCH_SQL = text("""
UPDATE processing_state
SET status = CASE WHEN stage = :first THEN 'pending' ELSE 'skipped' END,
    last_error = CASE WHEN stage = :first THEN NULL ELSE CAST(:waiting AS jsonb) END,
    attempts = 0, producer_version = NULL, next_retry_at = NULL, claim_token = NULL, claimed_by = NULL,
    heartbeat_at = NULL, lane = :lane, updated_at = now()
WHERE source_object_id = ANY(CAST(:ids AS bigint[]))
""")


def seed_rows(conn: Connection, ids: list[int], *, lane: str = LANE_BACKFILL) -> None:
    """Insert the seven stage rows of each new object (fetch pending, the rest waiting) in ``lane``
    (``ki.core.taxonomies.CLAIM_LANES``: ``backfill`` for a first insertion, ``live`` for a change); existing
    rows stay."""
    if ids:
        conn.execute(SEED_ROWS_SQL, {"ids": ids, "stages": list(PIPELINE_STAGE_ORDER),
                                     "first": PIPELINE_STAGE_ORDER[0], "waiting": WAITING_JSON, "lane": lane})


def requeue_from_fetch(conn: Connection, ids: list[int], *, lane: str = LANE_LIVE) -> None:
    """Reset every stage row of ``ids``: fetch pending, the rest waiting, fresh attempt budgets, in
    ``lane`` (changed bytes found by a sync or the watcher: ``live``)."""
    if ids:
        restore_objects(conn, ids)  # a file tombstoned long ago, listed again: its archived rows come back first
        conn.execute(REQUEUE_FROM_FETCH_SQL, {"ids": ids, "first": PIPELINE_STAGE_ORDER[0],
                                              "waiting": WAITING_JSON, "lane": lane})


def _stage_table(versions: dict[str, str]) -> dict[str, Any]:
    stages = list(PIPELINE_STAGE_ORDER)
    return {
        "stages": stages,
        "versions": [versions.get(s, "") for s in stages],
        "ords": list(range(len(stages))),
        "waiting": WAITING_JSON,
    }


_STAGE_CTE = """
eff(stage, version, ord) AS (
    SELECT * FROM unnest(CAST(:stages AS text[]), CAST(:versions AS text[]), CAST(:ords AS int[]))
)"""

_REQUEUE_TAIL = f"""
requeued AS (
    UPDATE processing_state ps
    SET status = 'pending', attempts = 0, last_error = NULL, next_retry_at = NULL, claim_token = NULL,
        claimed_by = NULL, lane = '{LANE_RERUN}', updated_at = now()
    FROM picked p WHERE ps.source_object_id = p.source_object_id AND ps.stage = p.stage
    RETURNING ps.id
),
parked AS (
    UPDATE processing_state ps
    SET status = 'skipped', last_error = CAST(:waiting AS jsonb), producer_version = NULL, next_retry_at = NULL,
        claim_token = NULL, claimed_by = NULL, updated_at = now()
    FROM picked p JOIN eff e2 ON e2.ord > p.ord
    WHERE ps.source_object_id = p.source_object_id AND ps.stage = e2.stage AND ps.status <> 'quarantined'
      AND NOT (ps.status = 'skipped' AND ps.reason = :waiting_reason)
    RETURNING ps.id
)
SELECT (SELECT count(*) FROM requeued) AS requeued, (SELECT count(*) FROM parked) AS parked
"""

def _requeue_earliest_sql(where: str) -> Any:
    """Requeue each object's earliest row matching ``where`` (fresh attempts) and park every later
    stage back to waiting, in one statement."""
    return text(f"""
WITH {_STAGE_CTE},
picked AS (
    SELECT DISTINCT ON (ps.source_object_id) ps.source_object_id, ps.stage, e.ord
    FROM processing_state ps
    JOIN eff e ON e.stage = ps.stage
    JOIN source_object so ON so.id = ps.source_object_id AND so.deleted_at IS NULL
    WHERE {where}
    ORDER BY ps.source_object_id, e.ord
),
{_REQUEUE_TAIL}
""")


# -- name: requeue_outdated_stages --
# Each object's earliest done/skipped stage whose recorded version differs from the
# effective one is requeued (fresh attempts); every later stage is parked back to waiting.
REQUEUE_OUTDATED_SQL = _requeue_earliest_sql(
    f"""ps.status IN ('done', 'skipped') AND ps.producer_version IS NOT NULL
      AND ps.producer_version <> e.version AND ps.reason IS DISTINCT FROM '{DISABLED_BY_CONFIGURATION}'""")

# -- name: requeue_newly_enabled_stages --
# disabled_by_configuration rows of enabled stages go back to pending; later stages wait again.
REQUEUE_ENABLED_SQL = _requeue_earliest_sql(
    f"ps.status = 'skipped' AND ps.reason = '{DISABLED_BY_CONFIGURATION}' AND ps.stage = ANY(:enabled)")


def requeue_outdated_stages(conn: Connection, versions: dict[str, str]) -> tuple[int, int]:
    """Apply ``requeue_outdated_stages`` for the effective ``versions`` (stage → producer_version).

    Returns (rows requeued, rows parked back to waiting).
    """
    params = _stage_table(versions) | {"waiting_reason": WAITING_FOR_PREVIOUS_STAGE}
    row = conn.execute(REQUEUE_OUTDATED_SQL, params).one()
    return int(row.requeued), int(row.parked)


def requeue_newly_enabled_stages(conn: Connection, enabled: list[str]) -> tuple[int, int]:
    """Apply ``requeue_newly_enabled_stages`` for the ``enabled`` stages. Returns (requeued, parked)."""
    params = _stage_table({}) | {"enabled": enabled, "waiting_reason": WAITING_FOR_PREVIOUS_STAGE}
    row = conn.execute(REQUEUE_ENABLED_SQL, params).one()
    return int(row.requeued), int(row.parked)


# -- name: requeue_ontology_outdated --
# Documents whose type fell out of the visible scope, or that were left untyped under another scope
# fingerprint, get extract_metadata requeued and every later stage parked.
ONTOLOGY_STAGE = "extract_metadata"
REQUEUE_ONTOLOGY_SQL = text(f"""
WITH {_STAGE_CTE},
picked AS (
    SELECT ps.source_object_id, ps.stage, e.ord
    FROM processing_state ps
    JOIN eff e ON e.stage = ps.stage
    JOIN source_object so ON so.id = ps.source_object_id AND so.deleted_at IS NULL
    JOIN document_metadata dm ON dm.source_object_id = ps.source_object_id
    WHERE ps.stage = '{ONTOLOGY_STAGE}' AND ps.status IN ('done', 'skipped') AND ps.producer_version IS NOT NULL
      AND ((dm.doc_type IS NOT NULL AND NOT (dm.doc_type = ANY(CAST(:visible AS text[]))))
           OR (dm.doc_type IS NULL AND dm.ontology_fingerprint <> :fingerprint))
),
{_REQUEUE_TAIL}
""")


def requeue_ontology_outdated(conn: Connection, versions: dict[str, str], *, visible: list[str],
                              fingerprint: str) -> tuple[int, int]:
    """Requeue ``extract_metadata`` where the scope ``visible`` / ``fingerprint`` no longer holds the
    judgement (see ``ki.domain.ontology.requeue``). Returns (rows requeued, rows parked back to waiting)."""
    params = _stage_table(versions) | {"waiting_reason": WAITING_FOR_PREVIOUS_STAGE,
                                      "visible": sorted(visible), "fingerprint": fingerprint}
    row = conn.execute(REQUEUE_ONTOLOGY_SQL, params).one()
    return int(row.requeued), int(row.parked)


# -- name: release_capability_quarantines --
# needs_ocr / unsupported_format quarantines whose recorded capabilities lack one available now.
RELEASE_CAPABILITY_SQL = text("""
UPDATE processing_state ps
SET status = 'pending', attempts = 0, last_error = NULL, next_retry_at = NULL, lane = :lane, updated_at = now()
WHERE ps.status = 'quarantined' AND ps.reason = ANY(:reasons)
  AND NOT (coalesce(ps.last_error->'capabilities', '[]'::jsonb) @> CAST(:current AS jsonb))
RETURNING ps.id
""")


def capability_quarantines_exist(conn: Connection, reasons: list[str]) -> bool:
    """Whether any row is quarantined with one of ``reasons`` (the capability reasons): when none is, the
    prepare step need not find out what this install can convert (probing OCR imports onnxruntime)."""
    return bool(conn.execute(text("SELECT EXISTS (SELECT 1 FROM processing_state WHERE status = 'quarantined' "
                                  "AND reason = ANY(:reasons))"), {"reasons": reasons}).scalar_one())


def release_capability_quarantines(conn: Connection, *, reasons: list[str], current: list[str]) -> int:
    """Release the quarantines of ``reasons`` recorded without every capability in ``current``
    (pending, fresh attempt budget). Returns rows released."""
    rows = conn.execute(RELEASE_CAPABILITY_SQL, {"reasons": reasons, "current": json.dumps(current),
                                                 "lane": LANE_RERUN}).fetchall()
    return len(rows)


@dataclass(frozen=True)
class Released:
    """One row :func:`release_rows` released: its id, object, stage, the ``last_error`` it had, and the
    downstream stages parked back to waiting."""

    row_id: int
    source_object_id: int
    stage: str
    previous_error: dict[str, Any]
    invalidated_stages: list[str]


#: Rows an operator retry may release: awaiting a retry, quarantined, or cancelled.
#: (A condition over ``processing_state ps``.)
RETRYABLE_SQL = ("(ps.status IN ('failed', 'quarantined') OR (ps.status = 'skipped' AND ps.reason = "
                 f"'{CANCELLED}'))")

# -- name: release_rows --
# The one release of the quarantine retry and the work-item retry (spec: "Retry from quarantine"):
# for each object with a retryable row among the given ones, lock the object's retryable rows, take the
# earliest stage of them (an earlier failed, quarantined or cancelled stage is released instead of a later
# one asked for: a stage never runs before its predecessors are done), unless an earlier stage is still
# pending or running (then nothing of that object is released); reset it to pending with a fresh attempt
# budget (error cleared from the row; the history keeps it), park every later stage of the object back to
# waiting, and append a ``retried`` entry to each released row's history. One statement.
RELEASE_ROWS_SQL = text(f"""
WITH asked AS (
    SELECT DISTINCT ps.source_object_id FROM processing_state ps
    WHERE ps.id = ANY(CAST(:ids AS bigint[])) AND {RETRYABLE_SQL}
), locked AS (
    SELECT ps.id, ps.source_object_id, ps.stage, ps.attempts, ps.last_error FROM processing_state ps
    WHERE ps.source_object_id IN (SELECT source_object_id FROM asked) AND {RETRYABLE_SQL}
    FOR UPDATE
), earliest AS (
    SELECT DISTINCT ON (source_object_id) *, array_position(CAST(:order AS text[]), stage) AS pos
    FROM locked ORDER BY source_object_id, array_position(CAST(:order AS text[]), stage)
), picked AS (
    SELECT e.* FROM earliest e WHERE NOT EXISTS (
        SELECT 1 FROM processing_state b WHERE b.source_object_id = e.source_object_id
          AND array_position(CAST(:order AS text[]), b.stage) < e.pos AND b.status IN ('pending', 'running'))
), acted AS (
    UPDATE processing_state ps SET status = 'pending', attempts = 0, last_error = NULL, next_retry_at = NULL,
        claim_token = NULL, claimed_by = NULL, heartbeat_at = NULL, lane = :lane, updated_at = now()
    FROM picked p WHERE ps.id = p.id
    RETURNING ps.id, ps.source_object_id, ps.stage, p.attempts, ps.run_id
), parked AS (
    UPDATE processing_state ps SET status = 'skipped', last_error = CAST(:w AS jsonb), producer_version = NULL,
        attempts = 0, next_retry_at = NULL, claim_token = NULL, updated_at = now()
    FROM picked p
    WHERE ps.source_object_id = p.source_object_id AND array_position(CAST(:order AS text[]), ps.stage) > p.pos
    RETURNING ps.id
), history AS ({INSERT_FROM_ACTION})
SELECT id, source_object_id, stage, last_error FROM picked ORDER BY id
""")


def release_rows(conn: Connection, row_ids: list[int], *, actor: str) -> list[Released]:
    """Release, per object of the retryable rows among ``row_ids``, its earliest retryable stage (see the
    statement above: possibly an earlier stage than the one given); returns what was released, by row id.
    Rows that are not retryable (running, done, waiting...) are left alone, and so is an object whose
    earlier stage is still pending or running.

    Spec: insertion-pipeline.md "Retry from quarantine"."""
    if not row_ids:
        return []
    rows = conn.execute(RELEASE_ROWS_SQL, {"ids": sorted(set(row_ids)), "order": list(PIPELINE_STAGE_ORDER),
                                           "w": WAITING_JSON, "outcome": "retried", "actor": actor,
                                           "lane": LANE_RETRY}).fetchall()
    return [Released(int(r.id), int(r.source_object_id), r.stage, dict(r.last_error or {}),
                     list(PIPELINE_STAGE_ORDER[PIPELINE_STAGE_ORDER.index(r.stage) + 1:])) for r in rows]


QUARANTINED_IDS_SQL = text("SELECT id FROM processing_state WHERE source_object_id = :id AND status = 'quarantined'")


def release_quarantined(conn: Connection, source_object_id: int, *, actor: str = "cli") -> Released | None:
    """Release the object's earliest quarantined stage (pending, fresh budget) and park every later
    stage back to waiting (:func:`release_rows`). None when nothing is quarantined.

    Spec: insertion-pipeline.md "Retry from quarantine"."""
    ids = list(conn.execute(QUARANTINED_IDS_SQL, {"id": source_object_id}).scalars())
    released = release_rows(conn, ids, actor=actor)
    return released[0] if released else None


# -- name: mark_access_only_reindex --
# A done index row whose object's grants changed (and nothing else) goes back to pending with the
# durable marker; its attempt budget starts afresh. Rows in any other state are left alone: a
# pending/failed full index compiles the current grants anyway.
MARK_ACCESS_ONLY_SQL = text("""
UPDATE processing_state
SET status = 'pending', attempts = 0, last_error = CAST(:marker AS jsonb), next_retry_at = NULL,
    claim_token = NULL, claimed_by = NULL, heartbeat_at = NULL, lane = :lane, updated_at = now()
WHERE stage = 'index' AND status = 'done' AND source_object_id = ANY(CAST(:ids AS bigint[]))
RETURNING source_object_id
""")

# Live objects of a source whose index row is done, with the projection their chunks carry now.
INDEXED_ACCESS_SQL = text("""
SELECT so.id, c.allowed_principals, c.denied_principals
FROM source_object so
JOIN processing_state ps ON ps.source_object_id = so.id AND ps.stage = 'index' AND ps.status = 'done'
JOIN LATERAL (SELECT allowed_principals, denied_principals FROM chunk
              WHERE chunk.source_object_id = so.id ORDER BY ordinal LIMIT 1) c ON true
WHERE so.source_id = :sid AND so.deleted_at IS NULL
""")


def indexed_access(conn: Connection, source_id: int) -> list[Any]:
    """Rows ``(id, allowed_principals, denied_principals)``: the live objects of ``source_id`` whose
    index row is done, with the projection their chunks carry now (what access marking compares)."""
    return conn.execute(INDEXED_ACCESS_SQL, {"sid": source_id}).fetchall()


def mark_access_only_reindex(conn: Connection, ids: list[int]) -> list[int]:
    """Mark the done index rows of ``ids`` ``access_only_reindex`` (pending, fresh budget). Returns
    the object ids marked."""
    if not ids:
        return []
    marked = conn.execute(MARK_ACCESS_ONLY_SQL, {"ids": ids, "marker": json.dumps({ACCESS_ONLY_REINDEX: True}),
                                                 "lane": LANE_LIVE})
    return [r.source_object_id for r in marked]


# -- name: denied_fetches --
# Fetch rows of a source waiting out a permission fault: a rescan that finds the
# file readable makes them due at once.
DENIED_FETCHES_SQL = text("""
SELECT ps.id, so.external_id, so.external_id_raw
FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
WHERE so.source_id = :sid AND so.deleted_at IS NULL AND ps.stage = :first AND ps.status = 'failed'
  AND ps.reason = :reason
""")

RETRY_NOW_SQL = text("""
UPDATE processing_state SET next_retry_at = now(), updated_at = now()
WHERE id = ANY(CAST(:ids AS bigint[])) AND status = 'failed'
""")


def denied_fetches(conn: Connection, source_id: int, reason: str) -> list[tuple[int, str, bytes | None]]:
    """``(row id, external id, raw name)`` of the source's fetch rows failed with ``reason``
    (``permission_denied``), waiting for their retry."""
    rows = conn.execute(DENIED_FETCHES_SQL, {"sid": source_id, "first": PIPELINE_STAGE_ORDER[0], "reason": reason})
    return [(int(r.id), r.external_id, bytes(r.external_id_raw) if r.external_id_raw is not None else None)
            for r in rows]


def retry_now(conn: Connection, row_ids: list[int]) -> int:
    """Make the ``failed`` rows among ``row_ids`` due now (their backoff is cut short). Returns rows changed."""
    if not row_ids:
        return 0
    return conn.execute(RETRY_NOW_SQL, {"ids": row_ids}).rowcount
