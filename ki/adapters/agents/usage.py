"""The usage ledger: one ``model_usage`` row per gateway call, with its cost when the price is known.

Spec: insertion-pipeline.md "The console page" (GET /api/costs: realized spend per
stage from the usage ledger; the re-run dialog shows a stage's spend so far).
DESIGN.md: nothing blocks on a model call while holding a transaction — so the
ledger row is written *after* the call, in its own short transaction on its own
connection, never inside a caller's transaction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine

from ki.adapters.agents.gateway_results import UsageRecord, UsageSink
from ki.adapters.observability.metrics import count_usage
from ki.store.usage import insert_usage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Price:
    """USD per 1,000,000 tokens: ``input`` (prompt) and ``output`` (completion)."""

    input: Decimal
    output: Decimal


def _p(inp: str, out: str = "0") -> Price:
    return Price(Decimal(inp), Decimal(out))


#: Model → list price per 1M tokens (USD; public list prices, 2025). A model not listed
#: gets a NULL cost: unknown is recorded as unknown, never as free.
PRICES_PER_MILLION: dict[str, Price] = {
    "gpt-4o": _p("2.50", "10.00"),
    "gpt-4o-mini": _p("0.15", "0.60"),
    "gpt-4.1": _p("2.00", "8.00"),
    "gpt-4.1-mini": _p("0.40", "1.60"),
    "gpt-4.1-nano": _p("0.10", "0.40"),
    "o4-mini": _p("1.10", "4.40"),
    "text-embedding-3-small": _p("0.02"),
    "text-embedding-3-large": _p("0.13"),
}


def price_of(model: str, catalog: dict[str, Price] | None = None) -> Price | None:
    """The catalog price of ``model``, also under a provider prefix (``openai/gpt-4o-mini``); None if unknown."""
    catalog = PRICES_PER_MILLION if catalog is None else catalog
    if model in catalog:
        return catalog[model]
    bare = model.rsplit("/", 1)[-1]
    return catalog.get(bare)


def cost_usd(model: str, prompt_tokens: int, completion_tokens: int,
             catalog: dict[str, Price] | None = None) -> Decimal | None:
    """Cost in USD of one call (Decimal, 8 decimal places); None when the model has no price."""
    price = price_of(model, catalog)
    if price is None:
        return None
    cost = (price.input * prompt_tokens + price.output * completion_tokens) / Decimal(1_000_000)
    return cost.quantize(Decimal("0.00000001"))


def _engine(db: Any) -> Engine:
    return db if isinstance(db, Engine) else db.engine


def record_usage(
    db: Any,
    *,
    stage: str,
    model: str,
    source_object_id: int | None = None,
    trace_id: str | None = None,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    total_tokens: int | None = None,
    latency_ms: int | None = None,
    at: datetime | None = None,
) -> int:
    """Insert one ``model_usage`` row in its own short transaction; returns its id.

    Args:
        db: a :class:`ki.store.db.Database` (or an SQLAlchemy Engine). A fresh pooled
            connection is used: the row commits on its own and never joins a caller's transaction.
        stage: the stage (or caller label) the call served.
        model: the requested model name (cost looked up in :data:`PRICES_PER_MILLION`).
        source_object_id / trace_id: which document and agent trace the call served.
        prompt_tokens / completion_tokens / total_tokens: token counts (total defaults to the sum).
        latency_ms: wall time of the call (ms).
        at: when the call finished (default: the database's now()).
    Raises: SQLAlchemy errors when the database fails (callers on the hot path use :func:`ledger_sink`).
    """
    total = prompt_tokens + completion_tokens if total_tokens is None else total_tokens
    cost = cost_usd(model, prompt_tokens, completion_tokens)
    count_usage(stage, model, prompt_tokens, completion_tokens, cost)
    with _engine(db).begin() as conn:
        return insert_usage(conn, at=at, stage=stage, model=model, source_object_id=source_object_id,
                            trace_id=trace_id, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                            total_tokens=total, cost=cost, latency_ms=latency_ms)


def _object_id(doc_id: str | None) -> int | None:
    if doc_id is None:
        return None
    try:
        return int(doc_id)
    except ValueError:
        return None


def ledger_sink(db: Any, *, default_stage: str = "unattributed") -> UsageSink:
    """A ``GatewayClient(usage_sink=...)`` callback that writes each call's usage to the ledger.

    ``doc_id`` is stored as ``source_object_id`` when it is an integer; a call without a stage is
    booked under ``default_stage``. A failing insert is logged and swallowed (the model answer
    was paid for; losing it over the ledger would cost twice).
    """

    def sink(record: UsageRecord) -> None:
        try:
            record_usage(db, stage=record.stage or default_stage, model=record.model,
                         source_object_id=_object_id(record.doc_id), trace_id=record.trace_id,
                         prompt_tokens=record.prompt_tokens, completion_tokens=record.completion_tokens,
                         total_tokens=record.total_tokens, latency_ms=record.latency_ms, at=record.at)
        except Exception:  # noqa: BLE001 - see docstring
            log.warning("usage ledger insert failed (model %s, trace %s)", record.model, record.trace_id,
                        exc_info=True)

    return sink
