"""SQLAlchemy model of the usage ledger (``model_usage``, migration ``0002_usage``).

One row per model-gateway call: stage, model, the document and trace it served,
token counts, latency (ms) and the cost in USD when the model's price is known
(NULL otherwise). Written by :func:`ki.adapters.agents.usage.record_usage`; read by the
per-stage spend (spec: insertion-pipeline.md "The console page", GET /api/costs).
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy import BigInteger, DateTime, Index, Integer, Numeric, Text, func
from sqlalchemy import text as sa_text
from sqlalchemy.orm import Mapped, mapped_column

from ki.store.base import Base


class ModelUsage(Base):
    """One gateway call's usage.

    Attributes:
        at: when the call finished (UTC).
        stage: the pipeline stage (or another caller label) the call served.
        model: the gateway model name as requested.
        source_object_id: the document, when the call was for one (no FK: spend survives deletion).
        trace_id: the agent loop's trace id (uuid4 hex), shared by every call of one attempt.
        prompt_tokens / completion_tokens / total_tokens: as the gateway reported them (0 if absent).
        cost_usd: computed from :data:`ki.adapters.agents.usage.PRICES_PER_MILLION`; NULL for unknown models.
        latency_ms: wall time of the HTTP call in milliseconds.
    """

    __tablename__ = "model_usage"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    stage: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)
    source_object_id: Mapped[int | None] = mapped_column(BigInteger)
    trace_id: Mapped[str | None] = mapped_column(Text)
    prompt_tokens: Mapped[int] = mapped_column(Integer, server_default=sa_text("0"))
    completion_tokens: Mapped[int] = mapped_column(Integer, server_default=sa_text("0"))
    total_tokens: Mapped[int] = mapped_column(Integer, server_default=sa_text("0"))
    cost_usd: Mapped[Decimal | None] = mapped_column(Numeric(18, 8))
    latency_ms: Mapped[int | None] = mapped_column(Integer)
    __table_args__ = (
        Index("ix_model_usage_stage_at", "stage", "at"),
        Index("ix_model_usage_source_object", "source_object_id"),
        Index("ix_model_usage_trace", "trace_id"),
    )
