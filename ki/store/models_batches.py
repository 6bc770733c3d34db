"""SQLAlchemy model of batch membership (``pipeline_run_object``, migration ``0007_batches``).

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider, batch reservation, sweeper).
Written through :mod:`ki.store.batches` by the trigger (reservation, workflow run ids) and the
document workflow's final task (``finished_at``/``outcome``); read by the sweeper.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, ForeignKey, Index, Integer, Text, func
from sqlalchemy import text as sa_text
from sqlalchemy.orm import Mapped, mapped_column

from ki.store.base import Base


class PipelineRunObject(Base):
    """One document reserved by one orchestrated batch.

    Attributes:
        run_id: the pipeline_runs row (the batch).
        source_object_id: the reserved document.
        workflow_run_id: Hatchet's id of this document's workflow run (None until triggered).
        outcome: how the document's DAG ended (``done``, ``quarantined``, ``skipped``,
            ``orchestration_failed``...), None while it runs.
        finished_at: when the DAG's final task (or failure hook) recorded the end.
        released_at / released_by: when the batch's conveyor released the member (its DAG is then
            triggered) and by which member's end (None: the first window, or the sweeper); migration
            ``0018_conveyor``, :mod:`ki.store.conveyor`.
        reopens: how often the member was put back on the conveyor after its DAG ended, because a
            later classification re-opened one of its rows (migration ``0021_member_reopens``,
            :func:`ki.store.conveyor.reopen_finished`); part of its next DAG's idempotency key.
        acknowledged_at / verified_at: when the engine acknowledged the recorded workflow run (the member
            counts as released from then on), and when the sweeper's early check found the engine knows it
            (migration ``0028_trigger_pushback``, :mod:`ki.store.pushback`).
    """

    __tablename__ = "pipeline_run_object"
    run_id: Mapped[int] = mapped_column(ForeignKey("pipeline_runs.id", ondelete="CASCADE"), primary_key=True)
    source_object_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("source_object.id", ondelete="CASCADE"), primary_key=True
    )
    workflow_run_id: Mapped[str | None] = mapped_column(Text)
    outcome: Mapped[str | None] = mapped_column(Text)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    released_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    released_by: Mapped[int | None] = mapped_column(BigInteger)
    reopens: Mapped[int] = mapped_column(Integer, nullable=False, server_default=sa_text("0"))
    acknowledged_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    verified_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    __table_args__ = (
        Index("ix_pipeline_run_object_object", "source_object_id"),
        Index("ix_pipeline_run_object_unfinished", "run_id", postgresql_where=sa_text("finished_at IS NULL")),
        Index("ix_pipeline_run_object_unreleased", "run_id", "source_object_id",
              postgresql_where=sa_text("released_at IS NULL AND finished_at IS NULL")),
        Index("ix_pipeline_run_object_in_flight", "run_id",
              postgresql_where=sa_text("released_at IS NOT NULL AND finished_at IS NULL")),
    )
