"""SQLAlchemy 2.0 typed models of ki's tables.

The schema itself is created by the Alembic migrations in
``ki/store/migrations`` (explicit DDL); ``tests/integration/test_migrations.py``
checks that these models and the migrated schema agree.

Spec: insertion-pipeline.md "Processing states and console buckets",
"Orchestration" (pipeline_runs, uq_pipeline_runs_active_sync) and DESIGN.md.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import VECTOR
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Computed,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy import (
    text as sa_text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR, UUID
from sqlalchemy.orm import Mapped, mapped_column

from ki.store.base import TZ, Base


class Project(Base):
    """A group of sources and matters; a fresh install has one, ``default``."""

    __tablename__ = "project"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(Text, unique=True)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())


class Source(Base):
    """A connector instance: for ``local`` a folder root."""

    __tablename__ = "source"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("project.id"))
    kind: Mapped[str] = mapped_column(Text)
    root: Mapped[str] = mapped_column(Text)
    config: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=sa_text("'{}'::jsonb"))
    last_scan_at: Mapped[datetime | None] = mapped_column(TZ)
    last_scan_count: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    # Migration 0013_source_removed: set by ``ki source remove`` (the rows stay; see ki.store.sources).
    removed_at: Mapped[datetime | None] = mapped_column(TZ)
    __table_args__ = (UniqueConstraint("kind", "root", name="uq_source_kind_root"),)


class SourceObject(Base):
    """One file (or message) of a source; its stage rows live in processing_state."""

    __tablename__ = "source_object"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    source_id: Mapped[int] = mapped_column(ForeignKey("source.id"))
    external_id: Mapped[str] = mapped_column(Text)
    # the relative path's bytes when it is not valid UTF-8 (external_id is then its display form)
    external_id_raw: Mapped[bytes | None] = mapped_column(LargeBinary)
    path: Mapped[str] = mapped_column(Text)
    size: Mapped[int | None] = mapped_column(BigInteger)
    mtime_ns: Mapped[int | None] = mapped_column(BigInteger)
    content_hash: Mapped[str | None] = mapped_column(String(64))
    scanned_hash: Mapped[str | None] = mapped_column(String(64))
    missing_scans: Mapped[int] = mapped_column(Integer, server_default=sa_text("0"))
    #: when a scan first found the (live) file missing; None while it is listed (search hits say so)
    missing_since: Mapped[datetime | None] = mapped_column(TZ)
    deleted_at: Mapped[datetime | None] = mapped_column(TZ)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    # Embedded objects (mail attachments, mbox messages): the container and the position in it.
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("source_object.id", ondelete="CASCADE"))
    embedded_index: Mapped[int | None] = mapped_column(Integer)
    __table_args__ = (
        UniqueConstraint("source_id", "external_id", name="uq_source_object_external"),
        Index("ix_source_object_parent", "parent_id", postgresql_where=sa_text("parent_id IS NOT NULL")),
        Index("ix_source_object_path_prefix", "path", postgresql_ops={"path": "text_pattern_ops"}),
        # Migration 0030_flat_stage_cost: identical copies by content, a folder's files within a source.
        Index("ix_source_object_content_hash", "content_hash"),
        Index("ix_source_object_source_external", "source_id", "external_id",
              postgresql_ops={"external_id": "text_pattern_ops"}),
    )


class Blob(Base):
    """Content-addressed bytes (SHA-256 hex), stored on disk under the data directory."""

    __tablename__ = "blob"
    content_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())


class Artifact(Base):
    """A derived artifact keyed by (content hash, kind), e.g. ``structured_json``."""

    __tablename__ = "artifact"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    content_hash: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(Text)
    producer: Mapped[str] = mapped_column(Text)
    producer_version: Mapped[str] = mapped_column(Text)
    body: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (
        UniqueConstraint("content_hash", "kind", name="uq_artifact_hash_kind"),
        # Migration 0030_flat_stage_cost: "files whose text contains X" reads the trigram candidates only.
        Index("ix_artifact_text_trgm", sa_text("lower(left(body ->> 'text', 2000000)) gin_trgm_ops"),
              postgresql_using="gin", postgresql_where=sa_text("kind = 'structured_json'")),
        # … and the messages linked to a set of Message-IDs (each arm of the OR has its index).
        Index("ix_artifact_mail_message_id", sa_text("((body -> 'mail') ->> 'message_id')"),
              postgresql_where=sa_text("kind = 'structured_json'")),
        Index("ix_artifact_mail_in_reply_to", sa_text("((body -> 'mail') ->> 'in_reply_to')"),
              postgresql_where=sa_text("kind = 'structured_json'")),
        Index("ix_artifact_mail_references", sa_text("((body -> 'mail') -> 'references')"), postgresql_using="gin",
              postgresql_where=sa_text("kind = 'structured_json'")),
    )


class ProcessingState(Base):
    """One row per (source object, stage): the source of truth of the pipeline.

    ``reason`` is a stored generated column (``last_error->>'reason'``) so the
    bucket CASE expression and its index read one column.
    """

    __tablename__ = "processing_state"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    source_object_id: Mapped[int] = mapped_column(ForeignKey("source_object.id", ondelete="CASCADE"))
    stage: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, server_default=sa_text("0"))
    claim_token: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    claimed_by: Mapped[str | None] = mapped_column(Text)
    claimed_at: Mapped[datetime | None] = mapped_column(TZ)
    heartbeat_at: Mapped[datetime | None] = mapped_column(TZ)
    next_retry_at: Mapped[datetime | None] = mapped_column(TZ)
    producer_version: Mapped[str | None] = mapped_column(Text)
    last_error: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    reason: Mapped[str | None] = mapped_column(Text, Computed("last_error->>'reason'", persisted=True))
    completions: Mapped[int] = mapped_column(Integer, server_default=sa_text("0"))
    run_id: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    # Migration 0012_work_items: the row's public id (``work_item:<uuid>``), never changed.
    work_item_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), server_default=sa_text("gen_random_uuid()"))
    # Migration 0016_work_item_signature: the failure's signature (``last_error->>'signature'``), stored.
    signature: Mapped[str | None] = mapped_column(Text, Computed("last_error->>'signature'", persisted=True))
    # Migration 0020_lanes: why the row is owed (ki.core.taxonomies.CLAIM_LANES).
    lane: Mapped[str] = mapped_column(Text, server_default=sa_text("'backfill'"))
    __table_args__ = (
        UniqueConstraint("source_object_id", "stage", name="uq_processing_state_object_stage"),
        Index("uq_processing_state_work_item", "work_item_id", unique=True),
        Index("ix_processing_state_signature", "stage", "signature", "id",
              postgresql_include=["source_object_id", "updated_at"],
              postgresql_where=sa_text("status IN ('failed', 'quarantined')")),
        Index(
            "ix_processing_state_claimable",
            "updated_at",
            postgresql_where=sa_text("status IN ('pending', 'failed')"),
        ),
        Index("ix_processing_state_running", "heartbeat_at", postgresql_where=sa_text("status = 'running'")),
        Index("ix_processing_state_stage_status", "stage", "status", "reason"),
        # Migration 0024_depth_first_claims: the claim's (lane, stage) probe.
        Index("ix_processing_state_lane_stage", "lane", "stage", "updated_at",
              postgresql_where=sa_text("status IN ('pending', 'failed')")),
        CheckConstraint("lane IN ('live', 'retry', 'rerun', 'backfill')", name="ck_processing_state_lane"),
    )


class PipelineRun(Base):
    """The ledger row of one run (insertion, sync, access refresh)."""

    __tablename__ = "pipeline_runs"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    kind: Mapped[str] = mapped_column(Text)
    label: Mapped[str] = mapped_column(Text)
    provider: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    source_id: Mapped[int | None] = mapped_column(ForeignKey("source.id"))
    trigger: Mapped[str] = mapped_column(Text, server_default=sa_text("'cli'"))
    workflow_run_id: Mapped[str | None] = mapped_column(Text)
    # the process running a local run (``host:pid:start``, ki.core.liveness); its heartbeat is updated_at
    worker: Mapped[str | None] = mapped_column(Text)
    insertion_run_id: Mapped[int | None] = mapped_column(ForeignKey("pipeline_runs.id", ondelete="SET NULL"))
    #: the document workflow of a Hatchet batch and its window (migration 0018_conveyor)
    workflow_name: Mapped[str | None] = mapped_column(Text)
    document_window: Mapped[int | None] = mapped_column(Integer)
    #: engine back-pressure (migration 0028_trigger_pushback; ki.store.pushback): the configured window, the
    #: smallest it shrank to, and the engine's refusals of this run's triggers
    window_limit: Mapped[int | None] = mapped_column(Integer)
    window_min: Mapped[int | None] = mapped_column(Integer)
    trigger_refusals: Mapped[int] = mapped_column(Integer, server_default=sa_text("0"))
    last_refusal_at: Mapped[datetime | None] = mapped_column(TZ)
    last_refusal: Mapped[str | None] = mapped_column(Text)
    processed: Mapped[int] = mapped_column(Integer, server_default=sa_text("0"))
    done: Mapped[int] = mapped_column(Integer, server_default=sa_text("0"))
    skipped: Mapped[int] = mapped_column(Integer, server_default=sa_text("0"))
    retried: Mapped[int] = mapped_column(Integer, server_default=sa_text("0"))
    quarantined: Mapped[int] = mapped_column(Integer, server_default=sa_text("0"))
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    finished_at: Mapped[datetime | None] = mapped_column(TZ)
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    #: migration 0023_run_cancel: a cancellation asked for (when, by whom; ki.store.cancel)
    cancel_requested_at: Mapped[datetime | None] = mapped_column(TZ)
    cancelled_by: Mapped[str | None] = mapped_column(Text)
    __table_args__ = (
        Index(
            "uq_pipeline_runs_active_sync",
            "source_id",
            unique=True,
            postgresql_where=sa_text("kind = 'sync' AND status IN ('queued', 'running')"),
        ),
    )


class AuditLog(Base):
    """Who did what to which object, with the overruled evidence."""

    __tablename__ = "audit_log"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    actor: Mapped[str] = mapped_column(Text)
    action: Mapped[str] = mapped_column(Text)
    source_object_id: Mapped[int | None] = mapped_column(BigInteger)
    details: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=sa_text("'{}'::jsonb"))
    __table_args__ = (Index("ix_audit_log_at", sa_text("at DESC")),)


class Chunk(Base):
    """One indexed row of a source object: a passage of one of its textual parts, or its profile row.

    ``kind``: the part (``body``, ``comment``, ``footnote``, ``deleted`` …; ``profile`` at ordinal −1);
    ``meta``: the part's key, a comment's anchor/author, the profile row's document ``fields`` (migration
    0014). ``tsv`` is generated from the text with the German and English configurations (``<``/``>`` read as
    spaces).
    """

    __tablename__ = "chunk"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    source_object_id: Mapped[int] = mapped_column(ForeignKey("source_object.id", ondelete="CASCADE"))
    content_hash: Mapped[str] = mapped_column(String(64))
    ordinal: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    title: Mapped[str | None] = mapped_column(Text)
    tsv: Mapped[Any] = mapped_column(
        TSVECTOR,
        Computed(
            "setweight(to_tsvector('simple'::regconfig, coalesce(title, '')), 'A') || "
            "to_tsvector('german'::regconfig, translate(text, '<>', '  ')) || "
            "to_tsvector('english'::regconfig, translate(text, '<>', '  '))",
            persisted=True,
        ),
    )
    allowed_principals: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=sa_text("'{}'::text[]"))
    denied_principals: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=sa_text("'{}'::text[]"))
    access_version: Mapped[int] = mapped_column(Integer, server_default=sa_text("0"))
    is_deleted: Mapped[bool] = mapped_column(Boolean, server_default=sa_text("false"))
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    kind: Mapped[str] = mapped_column(Text, server_default=sa_text("'body'"))
    meta: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # Migration 0005_search: the chunk's vector (dimension per index, see ki.store.models_search.IndexMeta).
    embedding: Mapped[Any | None] = mapped_column(VECTOR())
    __table_args__ = (
        UniqueConstraint("source_object_id", "ordinal", name="uq_chunk_object_ordinal"),
        Index("ix_chunk_tsv", "tsv", postgresql_using="gin"),
        Index("ix_chunk_allowed_principals", "allowed_principals", postgresql_using="gin"),
        # migration 0022: the "also at" lookup reads profile rows only
        Index("ix_chunk_first_content_hash", "content_hash", postgresql_where=sa_text("ordinal = 0")),
    )


# Tables defined in their own modules register on the same metadata (``Base.metadata`` from here is complete).
import ki.store.models_api  # noqa: E402, F401
import ki.store.models_archive  # noqa: E402, F401
import ki.store.models_batches  # noqa: E402, F401
import ki.store.models_matters  # noqa: E402, F401
import ki.store.models_metadata  # noqa: E402, F401
import ki.store.models_search  # noqa: E402, F401
import ki.store.models_usage  # noqa: E402, F401
import ki.store.models_watch  # noqa: E402, F401
import ki.store.models_work_items  # noqa: E402, F401
