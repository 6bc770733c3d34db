"""SQLAlchemy tables of the cold history (migration ``0025_cold_history``), written by :mod:`ki.store.archive`.

Each ``<table>_archive`` has the columns of its live table (``CREATE TABLE … (LIKE …)``: same names, types and
NOT NULLs; no defaults, generated columns as plain ones) plus a primary key and the lookups the restore and the
history reads need; they are derived here from the live models so the two cannot drift.
``archive_bucket_counts`` keeps the console buckets of the archived state rows; ``archive_log`` one row per
archival pass. Spec: work-queue.md "Indexed queue and historical work".
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, DateTime, Index, Integer, Table, Text, func
from sqlalchemy import text as sa_text
from sqlalchemy.dialects.postgresql import JSONB

from ki.store.base import Base
from ki.store.models_batches import PipelineRunObject
from ki.store.models_work_items import WorkItemAttempt


def _archive_of(live: Table | str, *extra: Index) -> Table:
    """The archive table of ``live`` (a table, or the name of one ``ki.store.models`` registered before importing
    this module): its columns without defaults or generation, its primary key, ``extra``."""
    live = Base.metadata.tables[live] if isinstance(live, str) else live
    columns = [Column(c.name, c.type, nullable=c.nullable, primary_key=c.primary_key, autoincrement=False)
               for c in live.columns]
    return Table(f"{live.name}_archive", Base.metadata, *columns, *extra)


pipeline_runs_archive = _archive_of("pipeline_runs")
pipeline_run_object_archive = _archive_of(
    PipelineRunObject.__table__, Index("ix_pipeline_run_object_archive_object", "source_object_id"))
work_item_attempt_archive = _archive_of(
    WorkItemAttempt.__table__, Index("ix_work_item_attempt_archive_row", "processing_state_id", "id"))
audit_log_archive = _archive_of("audit_log")
processing_state_archive = _archive_of(
    "processing_state", Index("uq_processing_state_archive_work_item", "work_item_id", unique=True),
    Index("ix_processing_state_archive_object", "source_object_id"))

archive_bucket_counts = Table(
    "archive_bucket_counts", Base.metadata,
    Column("stage", Text, primary_key=True), Column("bucket", Text, primary_key=True),
    Column("n", BigInteger, nullable=False, server_default=sa_text("0")))

archive_log = Table(
    "archive_log", Base.metadata,
    Column("id", BigInteger, primary_key=True),
    Column("started_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("finished_at", DateTime(timezone=True)),
    Column("older_than_days", Integer, nullable=False),
    Column("moved", JSONB, nullable=False, server_default=sa_text("'{}'::jsonb")),
    Column("trigger", Text, nullable=False))
