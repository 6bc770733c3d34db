"""Stale claims: running rows whose worker fell silent or ended are failed (or quarantined at the
attempt limit) and become due again; and who holds the running rows.

Spec: insertion-pipeline.md "Stale claims"; DESIGN.md "Leases with fencing" (a recovered row's token
is cleared, so the silent worker's late completion is refused). The lease itself is
:mod:`ki.store.claims`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.store.attempts import INSERT_FROM_STALE
from ki.store.signatures import error_signature

# -- name: recover_stale_claims --
# Running rows silent longer than claim_timeout_seconds, or held by a worker known dead (a process
# of this host that is gone: ki.core.liveness), become failed (StaleClaim), due now; a row whose
# attempts (outage attempts excepted) reached max_attempts is quarantined instead.
# Each is appended to the history (outcome ``stale``, the silent worker named) in the same statement.
STALE_CLASS = "StaleClaim"
STALE_SIGNATURE = error_signature(STALE_CLASS, None, "claim silent (worker presumed dead)")
RECOVER_STALE_SQL = text(f"""
WITH limits(stage, max_attempts) AS (SELECT * FROM unnest(CAST(:stages AS text[]), CAST(:limits AS int[]))),
silent AS (SELECT id, claimed_by FROM processing_state WHERE status = 'running'), recovered AS (
UPDATE processing_state ps
SET status = CASE WHEN ps.attempts - coalesce((ps.last_error->>'infrastructure_attempts')::int, 0)
                        >= l.max_attempts THEN 'quarantined' ELSE 'failed' END,
    last_error = jsonb_build_object(
        'infrastructure_attempts', coalesce((ps.last_error->>'infrastructure_attempts')::int, 0),
        'class', '{STALE_CLASS}', 'signature', '{STALE_SIGNATURE}',
        'message', CASE WHEN ps.claimed_by = ANY(CAST(:dead AS text[]))
                        THEN 'worker ' || ps.claimed_by || ' is gone (its process ended): claim recovered at once'
                        ELSE 'claim silent for more than ' || :timeout || ' s (worker '
                             || coalesce(ps.claimed_by, '?') || ' presumed dead)' END,
        'traceback', '', 'deterministic', false, 'infrastructure', NULL,
        'reason', CASE WHEN ps.attempts - coalesce((ps.last_error->>'infrastructure_attempts')::int, 0)
                            >= l.max_attempts THEN 'internal_error' END),
    next_retry_at = CASE WHEN ps.attempts - coalesce((ps.last_error->>'infrastructure_attempts')::int, 0)
                          >= l.max_attempts THEN NULL ELSE now() END,
    claim_token = NULL, claimed_by = NULL, heartbeat_at = NULL, updated_at = now()
FROM limits l, silent
WHERE l.stage = ps.stage AND silent.id = ps.id AND ps.status = 'running'
  AND (ps.heartbeat_at < now() - make_interval(secs => :timeout) OR ps.claimed_by = ANY(CAST(:dead AS text[])))
RETURNING ps.id, ps.source_object_id, ps.stage, ps.attempts, ps.claimed_at, ps.run_id, silent.claimed_by AS worker,
          ps.last_error, ps.status
), history AS ({INSERT_FROM_STALE})
SELECT id, status FROM recovered
""")


def recover_stale_claims(conn: Connection, *, timeout_seconds: float, max_attempts: dict[str, int],
                         dead_workers: list[str] | tuple[str, ...] = ()) -> int:
    """Fail (or quarantine at the attempt limit) running rows silent for ``timeout_seconds`` or held
    by one of ``dead_workers`` (``claimed_by`` values known dead). Returns count."""
    stages = list(max_attempts)
    rows = conn.execute(
        RECOVER_STALE_SQL,
        {"stages": stages, "limits": [max_attempts[s] for s in stages], "timeout": float(timeout_seconds),
         "signature": STALE_SIGNATURE, "dead": list(dead_workers)},
    ).fetchall()
    return len(rows)


# -- name: claim_holders --
# Who holds the running rows: per claimed_by, how many rows and the oldest heartbeat's age (s).
CLAIM_HOLDERS_SQL = text("""
SELECT claimed_by, count(*) AS n, extract(epoch FROM now() - min(heartbeat_at)) AS silent_seconds
FROM processing_state WHERE status = 'running' GROUP BY claimed_by ORDER BY count(*) DESC
""")


@dataclass(frozen=True)
class ClaimHolder:
    """A worker holding running rows: ``worker`` (``claimed_by``), ``rows``, ``silent_seconds``
    (age of its oldest heartbeat)."""

    worker: str | None
    rows: int
    silent_seconds: float


def claim_holders(conn: Connection) -> list[ClaimHolder]:
    """Every worker holding running rows, most rows first."""
    return [ClaimHolder(r.claimed_by, int(r.n), float(r.silent_seconds or 0.0))
            for r in conn.execute(CLAIM_HOLDERS_SQL)]
