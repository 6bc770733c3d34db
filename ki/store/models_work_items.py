"""SQLAlchemy model of the attempt history (``work_item_attempt``, migration ``0012_work_items``).

DESIGN.md "Work items". Written by :mod:`ki.store.attempts` (in the same statement
as each outcome), read by :mod:`ki.store.work_items`. Append-only (a trigger refuses updates).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Float, Index, Integer, Text, func
from sqlalchemy import text as sa_text
from sqlalchemy.orm import Mapped, mapped_column

from ki.store.base import TZ, Base


class WorkItemAttempt(Base):
    """One finished attempt of a (document, stage), or one operator action on it.

    Attributes:
        processing_state_id / source_object_id / stage: the work item.
        attempt: the row's attempt count when the entry was written.
        outcome: ``done``, ``skipped``, ``failed`` (a retry is due), ``quarantined``, ``stale``
            (claim silent, worker presumed dead) — or ``retried`` / ``cancelled`` (operator).
        started_at / finished_at / duration_seconds: the claim time, the outcome time, seconds between.
        worker / run_id / actor: who ran it (the claiming worker and run) or who acted (token name).
        error_class / reason / message / infrastructure / signature: the failure (see
            :func:`ki.store.signatures.error_signature`); None for a success.
        producer_version: the version a completion recorded.
    """

    __tablename__ = "work_item_attempt"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    processing_state_id: Mapped[int] = mapped_column(BigInteger)
    source_object_id: Mapped[int] = mapped_column(BigInteger)
    stage: Mapped[str] = mapped_column(Text)
    attempt: Mapped[int] = mapped_column(Integer)
    outcome: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime | None] = mapped_column(TZ)
    finished_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    worker: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[int | None] = mapped_column(BigInteger)
    actor: Mapped[str | None] = mapped_column(Text)
    error_class: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    message: Mapped[str | None] = mapped_column(Text)
    infrastructure: Mapped[str | None] = mapped_column(Text)
    signature: Mapped[str | None] = mapped_column(Text)
    duration_seconds: Mapped[float | None] = mapped_column(Float)
    producer_version: Mapped[str | None] = mapped_column(Text)
    __table_args__ = (
        Index("ix_work_item_attempt_row", "processing_state_id", "id"),
        Index("ix_work_item_attempt_signature", "stage", "signature", "finished_at",
              postgresql_where=sa_text("signature IS NOT NULL")),
    )
