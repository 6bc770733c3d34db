"""The lease on a ``processing_state`` row: claim, complete, fail, renew, release, recover.

Each function runs one statement on a connection the caller owns (so the caller chooses the
transaction). Spec: insertion-pipeline.md "Processing states and console buckets" (claim query,
_unlock_next), "Retry policy and quarantine", "Stale claims"; DESIGN.md "Leases with fencing".
The other state statements are in :mod:`ki.store.requeue` (seeding and every requeue/park/release),
:mod:`ki.store.status` (the reads), :mod:`ki.store.downstream` (a document's later stages: skip, rerun),
:mod:`ki.store.stale_claims` (recovery of silent claims) and :mod:`ki.store.runs` (the run ledger).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.core.taxonomies import (
    DISABLED_BY_CONFIGURATION,
    WAITING_FOR_PREVIOUS_STAGE,
)
from ki.store.attempts import INSERT_FROM_COMPLETED, INSERT_FROM_FAILED, MESSAGE_MAX_CHARS
from ki.store.lanes import probe_order
from ki.store.signatures import record_signature

WAITING_JSON = json.dumps({"reason": WAITING_FOR_PREVIOUS_STAGE})


@dataclass(frozen=True)
class Claim:
    """A claimed processing_state row.

    Attributes:
        row_id: processing_state.id.
        source_object_id / stage: what to run.
        attempts: attempts including this one.
        token: the fencing token; completions commit only while the row holds it.
        object_row: the object's columns (:data:`OBJECT_COLUMNS` order) when the claim statement
            returned them, so the executor needs no second read; None otherwise.
        last_error: the row's ``last_error`` as it was when claimed (e.g. the ``access_only_reindex``
            marker, or the previous failure); None for a fresh row.
        worker: who claimed it (the attempt history records it with the outcome).
        waited_seconds: how long the row had been runnable when this claim took it (since it became
            pending, or since its retry fell due); None when not read.
    """

    row_id: int
    source_object_id: int
    stage: str
    attempts: int
    token: uuid.UUID
    object_row: tuple[Any, ...] | None = field(default=None, compare=False, repr=False)
    last_error: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    worker: str | None = field(default=None, compare=False)
    waited_seconds: float | None = field(default=None, compare=False)


#: What an executor needs of the claimed row's object and source (``SourceObjectView`` field order).
OBJECT_COLUMNS = """so.id, so.source_id, s.kind, s.root, so.external_id, so.path, so.size, so.mtime_ns,
       so.content_hash, so.deleted_at, s.config, so.parent_id, so.embedded_index, so.scanned_hash,
       so.external_id_raw"""
_N_CLAIM_COLUMNS = 6

#: When a row became runnable: a pending row when the statement that made it owed wrote it, a failed row
#: when its retry fell due (the claims' ``next`` CTE reads it before the claim overwrites both columns).
READY_AT_SQL = "CASE WHEN status = 'failed' THEN greatest(updated_at, next_retry_at) ELSE updated_at END"


_CLAIM_SET = """
    status = 'running', attempts = ps.attempts + 1, claim_token = :token, claimed_by = :worker,
    claimed_at = now(), heartbeat_at = now(), updated_at = now(), run_id = :run_id, next_retry_at = NULL
"""
#: A row a claim may take now: pending, or failed with its retry due.
ELIGIBLE_SQL = "(status = 'pending' OR (status = 'failed' AND next_retry_at <= now()))"

# The claim returns the object with the row (one statement instead of claim + read).
_CLAIM_FROM = """
FROM next, source_object so JOIN source s ON s.id = so.source_id
WHERE ps.id = next.id AND so.id = ps.source_object_id
"""
_CLAIM_RETURNING = ("RETURNING ps.id, ps.source_object_id, ps.stage, ps.attempts, ps.last_error, "
                    f"extract(epoch FROM now() - next.ready_at), {OBJECT_COLUMNS}")

# -- name: claim_next --
# Claim the oldest eligible row (pending, or failed with its retry due) by updated_at, of a stage
# not paused (:paused, the stages whose dependency's circuit breaker is open; ki.adapters.breaker).
# Its transaction commits asynchronously (set_config(..., true) = SET LOCAL, in the statement
# itself so an autocommit connection needs no extra round trip): a claim lost in a server crash
# only returns its row to pending, and the worker's late completion is refused by the token.
CLAIM_NEXT_SQL = text(f"""
WITH next AS (
    SELECT id, {READY_AT_SQL} AS ready_at FROM processing_state
    WHERE {ELIGIBLE_SQL} AND stage <> ALL(CAST(:paused AS text[]))
    ORDER BY updated_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE processing_state ps SET {_CLAIM_SET}
{_CLAIM_FROM}  AND set_config('synchronous_commit', 'off', true) IS NOT NULL
{_CLAIM_RETURNING}
""")

# -- name: claim_next_in_lanes --
# The claim of the local provider (DESIGN.md "Lanes"; work-queue.md "Lease-Based Claiming", 1. Poll;
# docs/design-decisions.md "Depth-first claim order"): (lane, stage) pairs are probed in the order given
# (:func:`probe_order`: the caller's lane schedule, and within each lane the latest stage first), each
# through ix_processing_state_lane_stage, oldest first within the pair. (``x BETWEEN p.x AND p.x`` is
# ``x = p.x`` in a form the planner does not treat as a constant: with ``=`` it reduces ORDER BY to
# updated_at and walks ix_processing_state_claimable, filtering every other pair's rows — 0.6 s at 50,000
# documents instead of 1 ms.) The nested loop stops at the first pair that yields rows: a probe of an
# empty pair costs one index descent and no lock, and no probe walks another lane's or stage's rows
# (paused stages are simply not in the list). With
# :model_first (a worker reserved for the model stages) the model stages' pairs of every lane are
# probed first (CTE ``model``, given its own pair list); the general probe runs only when that found
# none. Commits asynchronously, as claim_next.
_PAIR_PROBE = f"""
    SELECT c.id, c.ready_at FROM unnest(CAST(:{{lanes}} AS text[]), CAST(:{{stages}} AS text[])) AS p(lane, stage)
    CROSS JOIN LATERAL (
        SELECT id, {READY_AT_SQL} AS ready_at FROM processing_state
        WHERE lane BETWEEN p.lane AND p.lane AND stage BETWEEN p.stage AND p.stage AND {ELIGIBLE_SQL}{{extra}}
        ORDER BY lane, stage, updated_at LIMIT :limit FOR UPDATE SKIP LOCKED) c"""
CLAIM_IN_LANES_SQL = text(f"""
WITH model AS MATERIALIZED ({_PAIR_PROBE.format(lanes="model_lanes", stages="model_stages", extra="")}
    LIMIT :limit
), general AS MATERIALIZED ({_PAIR_PROBE.format(lanes="lanes", stages="stages",
                                                extra=" AND NOT EXISTS (SELECT 1 FROM model)")}
    LIMIT :limit
), next AS (SELECT id, ready_at FROM model UNION ALL SELECT id, ready_at FROM general)
UPDATE processing_state ps SET {_CLAIM_SET}
{_CLAIM_FROM}  AND set_config('synchronous_commit', 'off', true) IS NOT NULL
{_CLAIM_RETURNING}
""")
# -- name: claim_next_shuffled --
# Testing only (``pipeline.claim_order_seed``): claim an eligible row in a pseudo-random order
# fixed by the seed (md5 of row id and seed) instead of by updated_at, so a test or benchmark can
# process one estate in many orders. Never used unless the setting is given.
CLAIM_NEXT_SHUFFLED_SQL = text(f"""
WITH next AS (
    SELECT id, {READY_AT_SQL} AS ready_at FROM processing_state
    WHERE {ELIGIBLE_SQL} AND stage <> ALL(CAST(:paused AS text[]))
    ORDER BY md5(id::text || ':' || CAST(:seed AS text))
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE processing_state ps SET {_CLAIM_SET}
{_CLAIM_FROM}  AND set_config('synchronous_commit', 'off', true) IS NOT NULL
{_CLAIM_RETURNING}
""")

# -- name: claim_row --
# Claim one (object, stage) row if it is eligible and nobody holds it.
CLAIM_ROW_SQL = text(f"""
WITH next AS (
    SELECT id, {READY_AT_SQL} AS ready_at FROM processing_state
    WHERE source_object_id = :source_object_id AND stage = :stage AND {ELIGIBLE_SQL}
    FOR UPDATE SKIP LOCKED
)
UPDATE processing_state ps SET {_CLAIM_SET}
{_CLAIM_FROM}{_CLAIM_RETURNING}
""")


def _claim(row: Any, token: uuid.UUID, worker: str) -> Claim:
    waited = None if row[5] is None else max(0.0, float(row[5]))
    return Claim(row[0], row[1], row[2], row[3], token, tuple(row[_N_CLAIM_COLUMNS:]), row[4], worker, waited)


def claim_next(conn: Connection, *, worker: str, run_id: int | None, limit: int = 1,
               order_seed: int | None = None, paused: Sequence[str] = (), lanes: Sequence[str] | None = None,
               model_first: bool = False) -> list[Claim]:
    """Claim up to ``limit`` eligible rows with ``FOR UPDATE SKIP LOCKED``.

    ``lanes`` (DESIGN.md "Lanes": a permutation of ``ki.core.taxonomies.CLAIM_LANES``, from
    :class:`ki.store.lanes.LaneSchedule`): the rows of the first lane in that order that has an
    eligible row, of that lane's latest stage that has one, oldest first (depth-first:
    docs/design-decisions.md "Depth-first claim order"; :func:`ki.store.lanes.probe_order`);
    ``model_first``: the model stages' rows (of every lane, in that order) before any other (a worker
    reserved for the model stages; spec work-queue.md "1. Poll"). Without ``lanes``: the oldest eligible
    rows whatever their lane.

    Each claim increments attempts and writes a fresh token (one token per batch
    row would be shared otherwise, so the batch shares one token per call; the
    fencing is per row id + token). ``order_seed`` (``pipeline.claim_order_seed``, tests and
    benchmarks only) replaces the order by a pseudo-random one fixed by the seed (lanes ignored).
    ``paused``: stages not to claim (their dependency's circuit breaker is open, :mod:`ki.adapters.breaker`;
    their rows stay as they are, no attempt is spent).
    Returns the claims (maybe empty).
    """
    token = uuid.uuid4()
    params = {"token": token, "worker": worker, "run_id": run_id, "limit": limit, "paused": list(paused)}
    if order_seed is None and lanes:
        pair_lanes, pair_stages = probe_order(lanes, paused)
        model_lanes, model_stages = probe_order(lanes, paused, model_only=True) if model_first else ([], [])
        rows = conn.execute(CLAIM_IN_LANES_SQL, {**params, "lanes": pair_lanes, "stages": pair_stages,
                                                 "model_lanes": model_lanes, "model_stages": model_stages})
    elif order_seed is None:
        rows = conn.execute(CLAIM_NEXT_SQL, params)
    else:
        rows = conn.execute(CLAIM_NEXT_SHUFFLED_SQL, {**params, "seed": str(order_seed)})
    return [_claim(r, token, worker) for r in rows]


def claim_row(
    conn: Connection, source_object_id: int, stage: str, *, worker: str, run_id: int | None
) -> Claim | None:
    """Claim the (object, stage) row if eligible; None when it is not (done, running, waiting...)."""
    token = uuid.uuid4()
    row = conn.execute(
        CLAIM_ROW_SQL,
        {"source_object_id": source_object_id, "stage": stage, "token": token, "worker": worker, "run_id": run_id},
    ).first()
    return _claim(row, token, worker) if row else None


@dataclass(frozen=True)
class UnlockPlan:
    """What finishing a stage opens (``_unlock_next``), computed from the configuration.

    Attributes:
        skip: ``(stage, producer_version)`` of the switched-off stages right after the finished
            one: their waiting rows are recorded ``skipped/disabled_by_configuration`` on the way,
            exactly as a claim of them would record (without spending a claim on each).
        next_stage: the first enabled stage after those, whose waiting row becomes pending; None
            after the last stage.
    """

    skip: tuple[tuple[str, str], ...] = ()
    next_stage: str | None = None


NO_UNLOCK = UnlockPlan()
DISABLED_JSON = json.dumps({"reason": DISABLED_BY_CONFIGURATION})

# -- name: complete_claim --
# Record a handler's outcome, only while the row still holds the claim token (fencing), and in
# the same statement run _unlock_next: switched-off stages on the way are skipped, the next
# enabled stage's waiting row becomes pending (in the finished row's lane: a document keeps the
# lane it is owed in); and append the attempt to the history. One round trip, one commit.
COMPLETE_SQL = text(f"""
WITH done AS (
    UPDATE processing_state
    SET status = :status, last_error = CAST(:last_error AS jsonb), producer_version = :producer_version,
        completions = completions + CASE WHEN :status = 'done' THEN 1 ELSE 0 END,
        claim_token = NULL, claimed_by = NULL, heartbeat_at = NULL, next_retry_at = NULL, updated_at = now()
    WHERE id = :row_id AND claim_token = :token AND status = 'running'
    RETURNING id, source_object_id, stage, attempts, claimed_at, run_id, lane
),
history AS ({INSERT_FROM_COMPLETED}),
passed AS (
    UPDATE processing_state ps
    SET status = 'skipped', last_error = CAST(:disabled AS jsonb), producer_version = v.version,
        run_id = done.run_id, updated_at = now()
    FROM done, unnest(CAST(:skip_stages AS text[]), CAST(:skip_versions AS text[])) AS v(stage, version)
    WHERE ps.source_object_id = done.source_object_id AND ps.stage = v.stage
      AND ps.status = 'skipped' AND ps.reason = '{WAITING_FOR_PREVIOUS_STAGE}'
    RETURNING ps.id
),
unlocked AS (
    UPDATE processing_state ps
    SET status = 'pending', last_error = NULL, attempts = 0, lane = done.lane, updated_at = now()
    FROM done
    WHERE ps.source_object_id = done.source_object_id AND ps.stage = :next_stage
      AND ps.status = 'skipped' AND ps.reason = '{WAITING_FOR_PREVIOUS_STAGE}'
    RETURNING ps.id
)
SELECT (SELECT count(*) FROM done) AS completed, (SELECT count(*) FROM passed) AS passed
""")


@dataclass(frozen=True)
class Completion:
    """A committed completion. ``passed``: switched-off stages recorded skipped on the way."""

    passed: int = 0



def complete_claim(
    conn: Connection, claim: Claim, *, status: str, producer_version: str, last_error: dict[str, Any] | None,
    unlock: UnlockPlan = NO_UNLOCK,
) -> Completion | None:
    """Commit a ``done``/``skipped`` outcome and apply ``unlock`` (nothing by default).

    Returns the :class:`Completion`, or None when the claim was lost (refused; nothing is
    written, nothing unlocked).
    """
    row = conn.execute(
        COMPLETE_SQL,
        {
            "row_id": claim.row_id,
            "token": claim.token,
            "status": status,
            "producer_version": producer_version,
            "last_error": json.dumps(last_error) if last_error is not None else None,
            "disabled": DISABLED_JSON,
            "skip_stages": [s for s, _ in unlock.skip],
            "skip_versions": [v for _, v in unlock.skip],
            "next_stage": unlock.next_stage,
            "worker": claim.worker,
        },
    ).one()
    return Completion(int(row.passed)) if row.completed else None


# -- name: fail_claim --
# Record a failure, fenced by the token. The verdict is computed here from the treatment:
# deterministic → quarantined; infrastructure → failed (never quarantined; counted in
# last_error.infrastructure_attempts, carried across failures until attempts reset); park → skipped
# (a waiting reason such as source_unreadable; released by ki.store.unreadable), counted as infrastructure;
# retry → quarantined once the attempts the document is responsible for reach max_attempts.
# The same statement appends the attempt (with its error signature) to the history.
INFRA_SQL = "coalesce((last_error->>'infrastructure_attempts')::int, 0)"
FAIL_SQL = text(f"""
WITH verdict AS (
    SELECT id,
           {INFRA_SQL} + CASE WHEN :treatment IN ('infrastructure', 'park') THEN 1 ELSE 0 END AS infra,
           CASE WHEN :treatment = 'deterministic' THEN 'quarantined'
                WHEN :treatment = 'park' THEN 'skipped'
                WHEN :treatment = 'infrastructure' THEN 'failed'
                WHEN attempts - {INFRA_SQL} >= :max_attempts THEN 'quarantined'
                ELSE 'failed' END AS status
    FROM processing_state
    WHERE id = :row_id AND claim_token = :token AND status = 'running'
), failed AS (
    UPDATE processing_state ps
    SET status = v.status,
        last_error = CAST(:last_error AS jsonb) || jsonb_build_object('infrastructure_attempts', v.infra),
        next_retry_at = CASE WHEN v.status = 'failed' THEN now() + make_interval(secs => :delay) ELSE NULL END,
        claim_token = NULL, claimed_by = NULL, heartbeat_at = NULL, updated_at = now()
    FROM verdict v WHERE ps.id = v.id
    RETURNING ps.id, ps.source_object_id, ps.stage, ps.attempts, ps.status, ps.claimed_at, ps.run_id
), history AS ({INSERT_FROM_FAILED})
SELECT status FROM failed
""")


def fail_claim(
    conn: Connection, claim: Claim, *, treatment: str, max_attempts: int, delay_seconds: float,
    last_error: dict[str, Any],
) -> str | None:
    """Record a failure of ``treatment`` (deterministic / retry / infrastructure / park).

    Returns the new status (``failed``, ``quarantined``, or ``skipped`` for ``park``), or None when the
    claim was lost.
    ``delay_seconds`` applies when the row stays ``failed``. ``last_error`` is stored with its
    ``signature`` (:func:`ki.store.signatures.record_signature`) added; the attempt goes to the history.
    """
    signature = record_signature(last_error)
    record = {**last_error, "message": str(last_error.get("message") or "")[:MESSAGE_MAX_CHARS],
              "signature": signature}
    row = conn.execute(
        FAIL_SQL,
        {
            "row_id": claim.row_id,
            "token": claim.token,
            "treatment": treatment,
            "max_attempts": int(max_attempts),
            "delay": float(delay_seconds),
            "last_error": json.dumps(record),
            "worker": claim.worker,
            "error_class": record.get("class"),
            "reason": record.get("reason"),
            "message": record["message"],
            "infrastructure": record.get("infrastructure"),
            "signature": signature,
        },
    ).first()
    return row.status if row is not None else None


# -- name: renew_claim --
# A long stage proves it is alive; claim_timeout_seconds measures silence.
RENEW_SQL = text("""
UPDATE processing_state SET heartbeat_at = now()
WHERE id = :row_id AND claim_token = :token AND status = 'running'
RETURNING id
""")


def renew_claim(conn: Connection, claim: Claim) -> bool:
    """Refresh the claim's heartbeat. Returns False when the claim is no longer held."""
    return conn.execute(RENEW_SQL, {"row_id": claim.row_id, "token": claim.token}).first() is not None


# -- name: renew_claims --
# One process renews every claim it holds in one statement (ki.orchestration.heartbeat).
RENEW_MANY_SQL = text("""
UPDATE processing_state SET heartbeat_at = now()
WHERE status = 'running'
  AND (id, claim_token) IN (SELECT * FROM unnest(CAST(:ids AS bigint[]), CAST(:tokens AS uuid[])))
""")


def renew_claims(conn: Connection, claims: list[Claim]) -> int:
    """Refresh the heartbeat of every claim still held among ``claims``. Returns rows refreshed."""
    if not claims:
        return 0
    return conn.execute(RENEW_MANY_SQL, {"ids": [c.row_id for c in claims],
                                         "tokens": [c.token for c in claims]}).rowcount


# -- name: claim_held --
# Whether the row still holds this claim (a handler checks before it writes its results).
CLAIM_HELD_SQL = text("""
SELECT 1 FROM processing_state WHERE id = :row_id AND claim_token = :token AND status = 'running'
""")


def claim_held(conn: Connection, claim: Claim) -> bool:
    """True while the row is running under ``claim``'s token (read on the caller's transaction)."""
    return conn.execute(CLAIM_HELD_SQL, {"row_id": claim.row_id, "token": claim.token}).first() is not None


# -- name: release_claim --
# Give a claim back untouched: pending again, the attempt not counted (a configuration error is
# neither the file's fault nor an outage).
RELEASE_SQL = text("""
UPDATE processing_state SET status = 'pending', attempts = greatest(attempts - 1, 0), claim_token = NULL,
    claimed_by = NULL, heartbeat_at = NULL, updated_at = now()
WHERE id = :row_id AND claim_token = :token AND status = 'running'
""")


def release_claim(conn: Connection, claim: Claim) -> bool:
    """Release ``claim`` (pending, attempt given back). False when the claim was no longer held."""
    return conn.execute(RELEASE_SQL, {"row_id": claim.row_id, "token": claim.token}).rowcount > 0
