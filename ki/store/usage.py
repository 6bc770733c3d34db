"""The usage ledger (``model_usage``): one row per model call, and realized spend per stage, model and matter.

Spec: insertion-pipeline.md "The console page" (GET /api/costs: realized spend per stage from
the usage ledger; the re-run dialog shows a stage's spend so far). Rows are written by
:func:`insert_usage` (through :func:`ki.adapters.agents.usage.record_usage`). Costs are USD (``cost_usd`` is NULL for a
model without a price: such calls are counted in ``unpriced_calls``, never as free).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy import text
from sqlalchemy.engine import Connection


@dataclass(frozen=True)
class SpendRow:
    """Spend of one group: ``key`` (stage, model or matter reference), calls, tokens, USD."""

    key: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost_usd: Decimal
    unpriced_calls: int
    documents: int


_AGG = """count(*) AS calls, coalesce(sum(u.prompt_tokens), 0) AS pt, coalesce(sum(u.completion_tokens), 0) AS ct,
coalesce(sum(u.total_tokens), 0) AS tt, coalesce(sum(u.cost_usd), 0) AS cost,
count(*) FILTER (WHERE u.cost_usd IS NULL) AS unpriced, count(DISTINCT u.source_object_id) AS docs"""

_GROUPS = {
    "stage": ("u.stage", ""),
    "model": ("u.model", ""),
    "matter": ("m.reference", """JOIN matter_assignment ma ON ma.source_object_id = u.source_object_id
                                 JOIN matter m ON m.id = ma.matter_id"""),
}


def spend_by(conn: Connection, group: str, *, since: datetime | None = None, until: datetime | None = None,
             stage: str | None = None) -> list[SpendRow]:
    """Spend grouped by ``stage``, ``model`` or ``matter`` (only calls for an assigned document), in
    ``[since, until)``, optionally for one ``stage``; biggest spend first.

    Raises: KeyError for an unknown ``group``.
    """
    column, join = _GROUPS[group]
    rows = conn.execute(text(f"""
        SELECT {column} AS key, {_AGG} FROM model_usage u {join}
        WHERE (CAST(:since AS timestamptz) IS NULL OR u.at >= :since)
          AND (CAST(:until AS timestamptz) IS NULL OR u.at < :until)
          AND (CAST(:stage AS text) IS NULL OR u.stage = :stage)
        GROUP BY 1 ORDER BY cost DESC, calls DESC, key"""), {"since": since, "until": until, "stage": stage})
    return [SpendRow(r.key, int(r.calls), int(r.pt), int(r.ct), int(r.tt), Decimal(r.cost), int(r.unpriced),
                     int(r.docs)) for r in rows]


SPENT_SINCE_SQL = text("SELECT coalesce(sum(cost_usd), 0) FROM model_usage WHERE at >= :since")


def spent_since(conn: Connection, since: datetime) -> Decimal:
    """USD the ledger recorded from ``since`` (inclusive) on; unpriced calls count 0 (spec: "Costs")."""
    return Decimal(conn.execute(SPENT_SINCE_SQL, {"since": since}).scalar_one())


INSERT_USAGE_SQL = text("""INSERT INTO model_usage (at, stage, model, source_object_id, trace_id, prompt_tokens,
                                             completion_tokens, total_tokens, cost_usd, latency_ms)
                    VALUES (coalesce(CAST(:at AS timestamptz), now()), :stage, :model, :oid, :trace,
                            :pt, :ct, :tt, :cost, :lat)
                    RETURNING id""")


def insert_usage(conn: Connection, *, at: datetime | None, stage: str | None, model: str,
                 source_object_id: int | None, trace_id: str | None, prompt_tokens: int, completion_tokens: int,
                 total_tokens: int, cost: Decimal | None, latency_ms: int | None) -> int:
    """Append one call to the ledger (``at`` None: the database's now(); ``cost`` USD or None: unpriced).
    Returns the row's id."""
    return int(conn.execute(INSERT_USAGE_SQL, {
        "at": at, "stage": stage, "model": model, "oid": source_object_id, "trace": trace_id,
        "pt": prompt_tokens, "ct": completion_tokens, "tt": total_tokens, "cost": cost, "lat": latency_ms,
    }).scalar_one())
