"""The reads of the durable state: bucket counts, the idle snapshot, an object's rows, the quarantine list,
why a completion was refused.

What ``ki status``, the runner's idle verdict, a Hatchet task, an inline conversion and the console
API read from ``processing_state``. Each function runs on a connection the caller owns.

Spec: insertion-pipeline.md "Processing states and console buckets" (``stage_bucket`` and the
counts), "In-process provider" (run until idle), "What quarantine records" (GET /api/quarantine
returns path, stage, attempts and the error object), "What save re-runs and what it does not" (the
"Re-run all files" count covers the done, skipped and disabled buckets).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.core.taxonomies import (
    BUCKETS,
    LANE_RERUN,
    PIPELINE_STAGE_ORDER,
    STAGE_BUCKET_SQL,
    WAITING_FOR_PREVIOUS_STAGE,
    stage_bucket,
)
from ki.store.archive import archived_bucket_counts
from ki.store.claims import ELIGIBLE_SQL
from ki.store.stale_claims import STALE_CLASS

# -- name: bucket_counts --
# Exact per-stage bucket counts (GET /api/status, ki status): stage_bucket() in SQL.
BUCKET_COUNTS_SQL = text(f"""
SELECT stage, {STAGE_BUCKET_SQL} AS bucket, count(*) AS n
FROM processing_state
GROUP BY stage, bucket
""")


def bucket_counts(conn: Connection) -> dict[str, dict[str, int]]:
    """Per-stage bucket counts: ``{stage: {bucket: n}}`` with every stage and bucket present; the state rows moved
    to the cold history (:mod:`ki.store.archive`) are counted from ``archive_bucket_counts``."""
    out = {s: dict.fromkeys(BUCKETS, 0) for s in PIPELINE_STAGE_ORDER}
    for row in conn.execute(BUCKET_COUNTS_SQL):
        if row.stage in out:
            out[row.stage][row.bucket] = int(row.n)
    for stage, bucket, n in archived_bucket_counts(conn):  # rows moved to the cold history still count
        if stage in out and bucket in out[stage]:
            out[stage][bucket] += n
    return out


# -- name: idle_snapshot --
# Whether a runner has anything left, in one statement so one snapshot: a row that moves from
# running to done while unlocking the next (pending) one cannot slip between two reads.
IDLE_SQL = text(f"""
SELECT EXISTS (SELECT 1 FROM processing_state WHERE {ELIGIBLE_SQL}
               AND stage <> ALL(CAST(:held AS text[]))) AS eligible,
       (SELECT count(*) FROM processing_state WHERE status = 'running') AS running,
       (SELECT min(next_retry_at) FROM processing_state WHERE status = 'failed') AS due,
       (SELECT count(*) FROM processing_state WHERE status = 'failed') AS failed
""")


@dataclass(frozen=True)
class IdleSnapshot:
    """What is left: ``eligible`` (a row claimable now), ``running`` rows (any process), the
    earliest ``due`` retry (None when no row failed) and the number of ``failed`` rows."""

    eligible: bool
    running: int
    due: datetime | None
    failed: int


def idle_snapshot(conn: Connection, *, held: list[str] | tuple[str, ...] = ()) -> IdleSnapshot:
    """Read :class:`IdleSnapshot` in one statement (spec: "In-process provider": run until idle); rows of the
    ``held`` stages (a spending cap reached: ``ki.orchestration.budget``) do not count as eligible."""
    row = conn.execute(IDLE_SQL, {"held": list(held)}).one()
    return IdleSnapshot(bool(row.eligible), int(row.running), row.due, int(row.failed))


def held_rows(conn: Connection, stages: list[str] | tuple[str, ...]) -> int:
    """Rows of ``stages`` a claim would take now (pending, or awaiting a retry that is due): those a reached
    spending cap holds (``ki.orchestration.budget``)."""
    if not stages:
        return 0
    return int(conn.execute(text(f"SELECT count(*) FROM processing_state WHERE {ELIGIBLE_SQL} "
                                 "AND stage = ANY(CAST(:s AS text[]))"), {"s": list(stages)}).scalar_one())


# -- name: object_work --
# The unfinished rows of an object and of everything embedded in it (its tree): what a quarantine
# retry released and what that work produced (an e-mail's attachments), in one snapshot.
OBJECT_WORK_SQL = text(f"""
WITH RECURSIVE tree AS (
    SELECT id FROM source_object WHERE id = :oid
    UNION ALL
    SELECT so.id FROM source_object so JOIN tree t ON so.parent_id = t.id
)
SELECT ps.source_object_id, ps.stage, ps.status, ps.next_retry_at, {ELIGIBLE_SQL} AS eligible
FROM processing_state ps JOIN tree ON tree.id = ps.source_object_id
WHERE ps.status IN ('pending', 'running', 'failed')
""")


@dataclass(frozen=True)
class ObjectWork:
    """What is left of one object's tree: ``eligible`` (object id, stage) pairs claimable now, in
    stage order; ``running`` rows (any process); ``failed`` rows awaiting a retry and the earliest
    ``due`` (None when none)."""

    eligible: list[tuple[int, str]]
    running: int
    failed: int
    due: datetime | None

    @property
    def finished(self) -> bool:
        """Nothing claimable, running or awaiting a retry is left."""
        return not self.eligible and not self.running and not self.failed


def object_work(conn: Connection, source_object_id: int) -> ObjectWork:
    """Read :class:`ObjectWork` of the object ``source_object_id`` and its embedded descendants."""
    rows = conn.execute(OBJECT_WORK_SQL, {"oid": source_object_id}).fetchall()
    order = {s: i for i, s in enumerate(PIPELINE_STAGE_ORDER)}
    eligible = sorted(((int(r.source_object_id), r.stage) for r in rows if r.eligible),
                      key=lambda e: (order.get(e[1], len(order)), e[0]))
    failed = [r for r in rows if r.status == "failed" and not r.eligible]
    return ObjectWork(eligible, sum(1 for r in rows if r.status == "running"), len(failed),
                      min((r.next_retry_at for r in failed if r.next_retry_at is not None), default=None))


@dataclass(frozen=True)
class QuarantineRow:
    """One quarantined row: the object, its path, the stage, attempts, the error object, when."""

    source_object_id: int
    path: str
    stage: str
    attempts: int
    error: dict[str, Any]
    updated_at: datetime


def _quarantine_filter(stage: str | None, reason: str | None, error_class: str | None,
                       source_id: int | None = None, run_id: int | None = None) -> str:
    where = ["ps.status = 'quarantined'"]
    if source_id is not None:
        where.append("ps.source_object_id IN (SELECT id FROM source_object WHERE source_id = :sid)")
    if run_id is not None:
        where.append("ps.run_id = :run_id")
    if stage:
        where.append("ps.stage = :stage")
    if reason:
        where.append("ps.reason = :reason")
    if error_class:
        where.append("ps.last_error->>'class' = :cls")
    return " AND ".join(where)


def quarantine_page(conn: Connection, *, stage: str | None = None, reason: str | None = None,
                    error_class: str | None = None, limit: int = 50, offset: int = 0,
                    with_traceback: bool = False, source_id: int | None = None,
                    run_id: int | None = None) -> tuple[list[QuarantineRow], int]:
    """Quarantined rows, newest first, filtered and paged; returns (rows, total matching).

    ``source_id``: only that source's objects; ``run_id``: only rows a claim of that run quarantined
    (the row's ``run_id``: the run of its last claim). The error object omits ``traceback`` unless
    ``with_traceback`` (the detail view shows it).
    """
    where = _quarantine_filter(stage, reason, error_class, source_id, run_id)
    params = {"stage": stage, "reason": reason, "cls": error_class, "limit": limit, "offset": offset,
              "sid": source_id, "run_id": run_id}
    total = int(conn.execute(text(f"SELECT count(*) FROM processing_state ps WHERE {where}"), params).scalar_one())
    error = "ps.last_error" if with_traceback else "ps.last_error - 'traceback'"
    rows = conn.execute(text(f"""
        SELECT ps.source_object_id, so.path, ps.stage, ps.attempts, {error} AS error, ps.updated_at
        FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
        WHERE {where} ORDER BY ps.updated_at DESC, ps.id DESC LIMIT :limit OFFSET :offset"""), params).fetchall()
    return [QuarantineRow(int(r.source_object_id), r.path, r.stage, int(r.attempts), dict(r.error or {}),
                          r.updated_at) for r in rows], total


QUARANTINE_FACETS_SQL = text("""
SELECT stage, coalesce(reason, '') AS reason, coalesce(last_error->>'class', '') AS cls, count(*) AS n
FROM processing_state WHERE status = 'quarantined' GROUP BY 1, 2, 3
""")


def quarantine_facets(conn: Connection) -> dict[str, dict[str, int]]:
    """Counts of quarantined rows per ``stage``, per ``reason`` and per error ``class`` (filter menus)."""
    out: dict[str, dict[str, int]] = {"stage": {}, "reason": {}, "class": {}}
    for r in conn.execute(QUARANTINE_FACETS_SQL):
        for facet, value in (("stage", r.stage), ("reason", r.reason), ("class", r.cls)):
            if value:
                out[facet][value] = out[facet].get(value, 0) + int(r.n)
    return out


@dataclass(frozen=True)
class StageRow:
    """One stage row of an object, with its bucket and the whole error object (traceback included).

    Attributes:
        stage, status, attempts, producer_version, last_error, next_retry_at, updated_at: the row.
        bucket: its console bucket (``stage_bucket``); reason: ``last_error.reason``.
        due: a failed row's retry is due now (by the server clock).
        deleted: the object is tombstoned.
    """

    stage: str
    status: str
    bucket: str
    attempts: int
    producer_version: str | None
    last_error: dict[str, Any] | None
    next_retry_at: datetime | None
    updated_at: datetime
    reason: str | None = None
    due: bool = False
    deleted: bool = False


OBJECT_ROWS_SQL = text("""
SELECT so.path, so.deleted_at IS NOT NULL AS deleted, ps.stage, ps.status,
       ps.attempts, ps.producer_version, ps.last_error, ps.next_retry_at, ps.updated_at, ps.reason,
       coalesce(ps.next_retry_at <= now(), false) AS due
FROM source_object so LEFT JOIN processing_state ps ON ps.source_object_id = so.id
WHERE so.id = :id
""")


def object_rows(conn: Connection, source_object_id: int) -> tuple[str | None, list[StageRow]]:
    """An object's path (None when it does not exist) and its stage rows in no particular order
    (one statement)."""
    rows = conn.execute(OBJECT_ROWS_SQL, {"id": source_object_id}).fetchall()
    if not rows:
        return None, []
    return rows[0].path, [
        StageRow(r.stage, r.status, stage_bucket(r.status, r.reason), int(r.attempts), r.producer_version,
                 r.last_error, r.next_retry_at, r.updated_at, r.reason, bool(r.due), bool(r.deleted))
        for r in rows if r.stage is not None]


def rows_by_stage(conn: Connection, source_object_id: int) -> dict[str, StageRow]:
    """``{stage: StageRow}`` of one object (empty when it has no rows or does not exist)."""
    return {r.stage: r for r in object_rows(conn, source_object_id)[1]}


RERUN_COUNTS_SQL = text(f"""
SELECT count(*) AS files, count(DISTINCT so.content_hash) AS contents
FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
WHERE ps.stage = :stage
  AND (ps.status = 'done' OR (ps.status = 'skipped' AND ps.reason IS DISTINCT FROM '{WAITING_FOR_PREVIOUS_STAGE}'))
""")


def rerun_counts(conn: Connection, stage: str) -> tuple[int, int]:
    """(files, distinct contents) a "Re-run all files" of ``stage`` covers: rows in the done, skipped
    and disabled buckets (the rows that recorded a version; waiting rows are not part of a re-run)."""
    row = conn.execute(RERUN_COUNTS_SQL, {"stage": stage}).one()
    return int(row.files), int(row.contents)


@dataclass(frozen=True)
class LostClaim:
    """Why a claim's completion was refused (``ki.store.claims.complete_claim``/``fail_claim`` returned
    None): ``cause`` is ``stale`` (its lease was recovered: the worker was silent longer than
    ``claim_timeout_seconds`` or its process was judged ended — a fault worth a warning), ``rerun``
    (another file's stage asked for this stage again: it must read something new), ``changed`` (the
    file changed or was released: it runs again), ``reclaimed`` (its lease was recovered and another
    claim runs it now; a row claimed once since its attempts were reset counts as ``rerun``/``changed``
    by its lane), ``gone`` (the row no longer exists) or ``other``; ``detail`` says it in words.
    DESIGN.md "Leases with fencing"."""

    cause: str
    detail: str

    @property
    def expected(self) -> bool:
        """True for a refusal the pipeline asked for itself (rerun, changed): not a fault."""
        return self.cause in ("rerun", "changed")


LOST_CLAIM_SQL = text("""
SELECT status, lane, attempts, claimed_by, claim_token, last_error FROM processing_state WHERE id = :row_id
""")


def lost_claim(conn: Connection, row_id: int, token: Any) -> LostClaim:
    """Read what became of row ``row_id`` after a completion under ``token`` was refused (see
    :class:`LostClaim`). One read; the row may have moved on again since, so this is the row's state
    now, best effort."""
    row = conn.execute(LOST_CLAIM_SQL, {"row_id": row_id}).first()
    if row is None:
        return LostClaim("gone", "the row no longer exists (its file was removed)")
    error = row.last_error if isinstance(row.last_error, dict) else {}
    rerun = "another file's stage asked for it again (it must read something new)"
    changed = "the file changed or was released: it runs again"
    if row.status == "running" and str(row.claim_token) != str(token):
        again = f"; it is running again under worker {row.claimed_by}"
        if row.attempts == 1:  # claimed once since its budget was reset: a rerun or a change, not a recovery
            if row.lane == LANE_RERUN:
                return LostClaim("rerun", rerun + again)
            return LostClaim("changed", changed + again)
        return LostClaim("reclaimed", f"its lease was recovered{again}")
    if error.get("class") == STALE_CLASS:
        return LostClaim("stale", f"its lease was recovered: {error.get('message', 'claim silent')}")
    if row.status == "pending" and row.lane == LANE_RERUN and row.attempts == 0:
        return LostClaim("rerun", rerun)
    if row.status in ("pending", "skipped") and row.attempts == 0:
        return LostClaim("changed", f"{changed} (the row is {row.status})")
    return LostClaim("other", f"the row is now {row.status}")
