"""Work items: ``processing_state`` rows seen through the work-queue spec's names — reads and cancel.

DESIGN.md "Work items" and the work-queue -> ki table; spec/work-queue.md
"Inspect and retry failed work". A work item is one (document, stage) row: id ``work_item:<uuid>``
(``processing_state.work_item_id``), ``kind`` = stage, ``status`` mapped (:data:`WORK_STATUSES`),
``bucket`` = ki's console bucket. Every function runs on a connection the caller owns.

Paging is keyset paging on the row id, newest first: a cursor names the last id seen, so rows that
change status, or new rows, never make a page repeat or skip an item that matches throughout.
The retry release is :func:`ki.store.requeue.release_rows` (the quarantine retry's); the cancel is
:func:`cancel_rows`.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.core.like_pattern import like_escape
from ki.core.taxonomies import (
    BUCKETS,
    CANCELLED,
    DISABLED_BY_CONFIGURATION,
    PIPELINE_STAGE_ORDER,
    WAITING_FOR_PREVIOUS_STAGE,
    stage_bucket,
)
from ki.store.archive import restore_work_item
from ki.store.attempts import INSERT_FROM_ACTION
from ki.store.claims import WAITING_JSON
from ki.store.requeue import RETRYABLE_SQL

#: The work-queue statuses (DESIGN.md's table): pending = waiting on a predecessor, runnable = ki's
#: pending or failed-awaiting-retry, failed = quarantined (terminal until an operator retries).
WORK_STATUSES: tuple[str, ...] = ("pending", "runnable", "running", "done", "failed", "cancelled")
_W, _D, _C = WAITING_FOR_PREVIOUS_STAGE, DISABLED_BY_CONFIGURATION, CANCELLED
_STATUS_SQL = {
    "pending": f"(ps.status = 'skipped' AND ps.reason = '{_W}')",
    "runnable": "ps.status IN ('pending', 'failed')",
    "running": "ps.status = 'running'",
    "done": f"(ps.status = 'done' OR (ps.status = 'skipped' AND coalesce(ps.reason, '') NOT IN ('{_W}', '{_C}')))",
    "failed": "ps.status = 'quarantined'",
    "cancelled": f"(ps.status = 'skipped' AND ps.reason = '{_C}')",
}
_BUCKET_SQL = {
    "pending": "ps.status = 'pending'", "running": "ps.status = 'running'", "done": "ps.status = 'done'",
    "failed": "ps.status = 'failed'", "quarantined": "ps.status = 'quarantined'",
    "waiting": f"(ps.status = 'skipped' AND ps.reason = '{_W}')",
    "disabled": f"(ps.status = 'skipped' AND ps.reason = '{_D}')",
    "skipped": f"(ps.status = 'skipped' AND coalesce(ps.reason, '') NOT IN ('{_W}', '{_D}'))",
}
assert set(_BUCKET_SQL) == set(BUCKETS)
#: Rows a cancel may take: not running, not finished (→ skipped + cancelled).
CANCELLABLE_SQL = f"(ps.status IN ('pending', 'failed', 'quarantined') OR {_STATUS_SQL['pending']})"
WORK_ITEM_PREFIX = "work_item:"


def work_status(status: str, reason: str | None) -> str:
    """The work-queue status of a stored (status, reason) — :data:`WORK_STATUSES`; mirrors the SQL filter."""
    if status == "skipped":
        return {_W: "pending", _C: "cancelled"}.get(reason or "", "done")
    return {"pending": "runnable", "failed": "runnable", "quarantined": "failed"}.get(status, status)


def parse_work_item_id(value: str) -> uuid.UUID:
    """``work_item:<uuid>`` (or a bare uuid) → the uuid. Raises ValueError naming the expected form."""
    raw = value[len(WORK_ITEM_PREFIX):] if value.startswith(WORK_ITEM_PREFIX) else value
    try:
        return uuid.UUID(raw)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a work item id (expected 'work_item:<uuid>')") from exc


@dataclass(frozen=True)
class WorkItemFilter:
    """The filter of the list, the groups and the bulk actions; None = any.

    Attributes:
        status: a work-queue status (:data:`WORK_STATUSES`); bucket: a console bucket (``BUCKETS``).
        kind: the stage; reason / error_class: ``last_error`` fields.
        signature: the failing rows (ki failed or quarantined) whose failure has this signature.
        infrastructure: True = failures an outage caused (``last_error.infrastructure`` set), False = the rest.
        path_prefix: the object's path starts with it; run_id: the row's last run.
        since / until: ``updated_at`` bounds (UTC, inclusive / exclusive).
    Raises (at construction): ValueError for an unknown status, bucket or kind.
    """

    status: str | None = None
    bucket: str | None = None
    kind: str | None = None
    reason: str | None = None
    error_class: str | None = None
    signature: str | None = None
    infrastructure: bool | None = None
    path_prefix: str | None = None
    run_id: int | None = None
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        for name, value, allowed in (("status", self.status, WORK_STATUSES), ("bucket", self.bucket, BUCKETS),
                                     ("kind", self.kind, PIPELINE_STAGE_ORDER)):
            if value is not None and value not in allowed:
                raise ValueError(f"unknown {name} {value!r}; one of {', '.join(allowed)}")

    def canonical(self) -> dict[str, Any]:
        """The filter's set fields as JSON-ready values (datetimes ISO), for confirmation tokens and audit."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = value.isoformat() if isinstance(value, datetime) else value
        return out

    def where(self) -> tuple[str, dict[str, Any]]:
        """(SQL condition over ``ps`` = processing_state and ``so`` = source_object, parameters)."""
        sql, params = ["TRUE"], {}
        if self.status:
            sql.append(_STATUS_SQL[self.status])
        if self.bucket:
            sql.append(_BUCKET_SQL[self.bucket])
        if self.signature is not None:  # a failure group: the failing rows (their index serves it)
            sql.append("ps.status IN ('failed', 'quarantined')")
        for name, column in (("kind", "ps.stage"), ("reason", "ps.reason"), ("error_class", "ps.last_error->>'class'"),
                             ("signature", "ps.signature"), ("run_id", "ps.run_id")):
            if getattr(self, name) is not None:
                sql.append(f"{column} = :f_{name}")
                params[f"f_{name}"] = getattr(self, name)
        if self.infrastructure is not None:
            sql.append("ps.last_error->>'class' IS NOT NULL AND "
                       + ("ps.last_error->>'infrastructure' IS NOT NULL" if self.infrastructure
                          else "ps.last_error->>'infrastructure' IS NULL"))
        if self.path_prefix:
            sql.append(r"so.path LIKE :f_path_prefix ESCAPE '\'")  # ix_source_object_path_prefix
            params["f_path_prefix"] = like_escape(self.path_prefix) + "%"
        if self.since is not None:
            sql.append("ps.updated_at >= :f_since")
            params["f_since"] = self.since
        if self.until is not None:
            sql.append("ps.updated_at < :f_until")
            params["f_until"] = self.until
        return " AND ".join(sql), params


@dataclass(frozen=True)
class WorkItemRow:
    """One work item as stored: the row, its object's path, and the derived status and bucket."""

    row_id: int
    work_item_id: uuid.UUID
    source_object_id: int
    path: str
    stage: str
    status: str
    bucket: str
    stored_status: str
    attempts: int
    last_error: dict[str, Any] | None
    claimed_by: str | None
    claimed_at: datetime | None
    heartbeat_at: datetime | None
    next_retry_at: datetime | None
    run_id: int | None
    updated_at: datetime
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


_SELECT = """
SELECT ps.id, ps.work_item_id, ps.source_object_id, so.path, ps.stage, ps.status, ps.reason, ps.attempts,
       ps.last_error - 'traceback' AS last_error, ps.claimed_by, ps.claimed_at, ps.heartbeat_at, ps.next_retry_at,
       ps.run_id, ps.updated_at
FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
"""


def _row(r: Any) -> WorkItemRow:
    return WorkItemRow(int(r.id), r.work_item_id, int(r.source_object_id), r.path, r.stage,
                       work_status(r.status, r.reason), stage_bucket(r.status, r.reason), r.status, int(r.attempts),
                       r.last_error, r.claimed_by, r.claimed_at, r.heartbeat_at, r.next_retry_at, r.run_id,
                       r.updated_at)


def encode_cursor(row_id: int) -> str:
    """The opaque cursor after ``row_id`` (URL-safe base64 of ``{"before": id}``)."""
    return base64.urlsafe_b64encode(json.dumps({"before": row_id}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    """The row id a cursor from :func:`encode_cursor` names. Raises ValueError for anything else."""
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        before = int(data["before"])
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise ValueError("the cursor is not one this API returned") from exc
    if before < 1:
        raise ValueError("the cursor is not one this API returned")
    return before


def list_work_items(conn: Connection, flt: WorkItemFilter, *, limit: int = 50, cursor: str | None = None
                    ) -> tuple[list[WorkItemRow], str | None]:
    """A page of work items matching ``flt``, newest row first; returns (items, next cursor or None).

    Raises: ValueError for a cursor this API did not return."""
    where, params = flt.where()
    if cursor:
        where += " AND ps.id < :before"
        params["before"] = decode_cursor(cursor)
    rows = conn.execute(text(f"{_SELECT} WHERE {where} ORDER BY ps.id DESC LIMIT :limit"),
                        {**params, "limit": limit + 1}).fetchall()
    items = [_row(r) for r in rows[:limit]]
    return items, (encode_cursor(items[-1].row_id) if len(rows) > limit else None)


def get_work_item(conn: Connection, work_item_id: uuid.UUID, *, restore: bool = False) -> WorkItemRow | None:
    """The work item with this uuid, or None. ``restore``: an archived item (cold history, :mod:`ki.store.archive`)
    is first moved back with its object's other rows and its attempts (the caller's transaction commits it)."""
    row = conn.execute(text(f"{_SELECT} WHERE ps.work_item_id = :wid"), {"wid": work_item_id}).first()
    if row is None and restore and restore_work_item(conn, work_item_id):
        row = conn.execute(text(f"{_SELECT} WHERE ps.work_item_id = :wid"), {"wid": work_item_id}).first()
    return _row(row) if row else None


@dataclass(frozen=True)
class FailureGroup:
    """Failures of one (stage, signature): ``kind`` (the stage), how many rows fail so now, when the signature
    was first and last recorded (history), whether an outage caused them, three sample paths and one message."""

    kind: str
    signature: str
    count: int
    first_seen: datetime
    last_seen: datetime
    infrastructure: bool
    error_class: str | None
    reason: str | None
    sample_paths: list[str]
    message: str | None
    #: The source objects of ``sample_paths`` (the first is the newest row's: the one ``message`` is of).
    sample_object_ids: list[int] = field(default_factory=list)
    #: Samples left out because the caller's principal may not see them (their paths are never shown).
    hidden_samples: int = 0


def failure_groups(conn: Connection, flt: WorkItemFilter, *, limit: int = 100) -> list[FailureGroup]:
    """Per (stage, signature) of the failing rows (ki failed or quarantined) that match ``flt``, largest
    first (``GET /v1/work-items/groups``). Three statements: the groups over the rows'
    stored ``signature`` (their partial index; error objects read only for each group's newest row), the
    sample paths, the first/last seen from the history. Class, reason, message and whether an outage
    caused them are the newest row's."""
    where, params = flt.where()
    join = "JOIN source_object so ON so.id = ps.source_object_id" if flt.path_prefix else ""
    rows = conn.execute(text(f"""
        WITH g AS (
            SELECT ps.stage, ps.signature, count(*) AS n, min(ps.updated_at) AS first_row,
                   max(ps.updated_at) AS last_row, max(ps.id) AS newest,
                   (array_agg(ps.source_object_id ORDER BY ps.id DESC))[1:3] AS samples
            FROM processing_state ps {join}
            WHERE ps.status IN ('failed', 'quarantined') AND ps.signature IS NOT NULL AND {where}
            GROUP BY 1, 2 ORDER BY n DESC, 1, 2 LIMIT :limit)
        SELECT g.*, ps.last_error->>'class' AS error_class, ps.reason, ps.last_error->>'message' AS message,
               ps.last_error->>'infrastructure' IS NOT NULL AS infrastructure
        FROM g JOIN processing_state ps ON ps.id = g.newest ORDER BY g.n DESC, g.stage, g.signature"""),
        {**params, "limit": limit}).fetchall()
    if not rows:
        return []
    paths = dict(conn.execute(text("SELECT id, path FROM source_object WHERE id = ANY(CAST(:ids AS bigint[]))"),
                              {"ids": sorted({i for r in rows for i in r.samples})}).fetchall())
    seen = {(r.stage, r.signature): (r.first_seen, r.last_seen) for r in conn.execute(text("""
        SELECT stage, signature, min(finished_at) AS first_seen, max(finished_at) AS last_seen
        FROM work_item_attempt
        WHERE (stage, signature) IN (SELECT * FROM unnest(CAST(:stages AS text[]), CAST(:sigs AS text[])))
        GROUP BY 1, 2"""), {"stages": [r.stage for r in rows], "sigs": [r.signature for r in rows]})}
    out = []
    for r in rows:
        first, last = seen.get((r.stage, r.signature), (r.first_row, r.last_row))
        out.append(FailureGroup(r.stage, r.signature, int(r.n), min(first, r.first_row), max(last, r.last_row),
                                bool(r.infrastructure), r.error_class, r.reason,
                                [paths[i] for i in r.samples if i in paths], r.message,
                                [int(i) for i in r.samples if i in paths]))
    return out


def select_for_action(conn: Connection, flt: WorkItemFilter, action: str, *, limit: int
                      ) -> tuple[int, list[tuple[int, int]], list[tuple[int, str]]]:
    """What a bulk ``retry``/``cancel`` with ``flt`` would take now: (how many rows match and are eligible,
    the (row id, source object id) of the first ``limit`` of them (oldest first), up to five of their
    (source object id, path))."""
    eligible = RETRYABLE_SQL if action == "retry" else CANCELLABLE_SQL
    where, params = flt.where()
    base = f"FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id WHERE {where} AND {eligible}"
    count = int(conn.execute(text(f"SELECT count(*) {base}"), params).scalar_one())
    rows = conn.execute(text(f"SELECT ps.id, so.id AS oid, so.path {base} ORDER BY ps.id LIMIT :limit"),
                        {**params, "limit": limit}).fetchall()
    return count, [(int(r.id), int(r.oid)) for r in rows], [(int(r.oid), r.path) for r in rows[:5]]


@dataclass(frozen=True)
class Cancelled:
    """One row :func:`cancel_rows` cancelled: id, object, stage, its previous status."""

    row_id: int
    source_object_id: int
    stage: str
    previous_status: str


# -- name: cancel_rows --
# Cancel: the cancellable rows among the ids → skipped + cancelled (the actor kept
# in last_error), every later stage of their objects parked back to waiting, a ``cancelled`` history
# entry per row. One statement. A cancelled row can be retried (release_rows).
CANCEL_ROWS_SQL = text(f"""
WITH locked AS (
    SELECT ps.id, ps.source_object_id, ps.stage, ps.attempts, ps.status,
           array_position(CAST(:order AS text[]), ps.stage) AS pos
    FROM processing_state ps WHERE ps.id = ANY(CAST(:ids AS bigint[])) AND {CANCELLABLE_SQL}
    FOR UPDATE
), acted AS (
    UPDATE processing_state ps SET status = 'skipped', producer_version = NULL,
        last_error = jsonb_build_object('reason', '{CANCELLED}', 'actor', CAST(:actor AS text)),
        next_retry_at = NULL, claim_token = NULL, claimed_by = NULL, heartbeat_at = NULL, updated_at = now()
    FROM locked l WHERE ps.id = l.id
    RETURNING ps.id, ps.source_object_id, ps.stage, l.attempts, ps.run_id, l.status
), parked AS (
    UPDATE processing_state ps SET status = 'skipped', last_error = CAST(:w AS jsonb), producer_version = NULL,
        attempts = 0, next_retry_at = NULL, claim_token = NULL, updated_at = now()
    FROM (SELECT source_object_id, min(pos) AS pos FROM locked GROUP BY 1) l
    WHERE ps.source_object_id = l.source_object_id AND array_position(CAST(:order AS text[]), ps.stage) > l.pos
      AND ps.id NOT IN (SELECT id FROM locked) AND ps.status <> 'running'
    RETURNING ps.id
), history AS ({INSERT_FROM_ACTION})
SELECT id, source_object_id, stage, status FROM acted ORDER BY id
""")


def cancel_rows(conn: Connection, row_ids: list[int], *, actor: str) -> list[Cancelled]:
    """Cancel the cancellable rows among ``row_ids`` (see the statement above); the others are left alone."""
    if not row_ids:
        return []
    rows = conn.execute(CANCEL_ROWS_SQL, {"ids": sorted(set(row_ids)), "order": list(PIPELINE_STAGE_ORDER),
                                          "w": WAITING_JSON, "outcome": "cancelled", "actor": actor}).fetchall()
    return [Cancelled(int(r.id), int(r.source_object_id), r.stage, r.status) for r in rows]
