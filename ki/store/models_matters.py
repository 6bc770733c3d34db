"""SQLAlchemy models of matters, assignments, documents, relations and threads (migration ``0004_matters``).

Spec: insertion-pipeline.md "Classify (classify_matter)" and "Relate (relate)". Written by
:mod:`ki.store.matters` (Classify) and :mod:`ki.domain.relate.materialize` (Relate); read by
:mod:`ki.app.export`.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy import text as sa_text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from ki.store.base import Base

TZ = DateTime(timezone=True)
_OBJ = "source_object.id"


class Matter(Base):
    """A client matter: ``reference`` is unique per project (``2024-0153``, ``HARB-2023-017``,
    or a placeholder ``UNASSIGNED-<slug>`` with ``placeholder`` set).

    ``imported``: from practice management (its practice area and kind stay authoritative), with
    ``client_name``, ``client_number``, ``opened``, ``closed``, ``responsible`` and ``aliases`` (other
    spellings of the reference; migration ``0009_matter_import``).
    ``folder``: the matter's folder when a path names it. ``identifiers``: court case numbers and
    other references seen on its documents.
    """

    __tablename__ = "matter"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("project.id"))
    reference: Mapped[str] = mapped_column(Text)
    title: Mapped[str] = mapped_column(Text, server_default=sa_text("''"))
    practice_area: Mapped[str | None] = mapped_column(Text)
    kind: Mapped[str | None] = mapped_column(Text)
    imported: Mapped[bool] = mapped_column(Boolean, server_default=sa_text("false"))
    placeholder: Mapped[bool] = mapped_column(Boolean, server_default=sa_text("false"))
    folder: Mapped[str | None] = mapped_column(Text)
    identifiers: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=sa_text("'{}'::text[]"))
    client_name: Mapped[str | None] = mapped_column(Text)
    client_number: Mapped[str | None] = mapped_column(Text)
    opened: Mapped[date | None] = mapped_column(Date)
    closed: Mapped[date | None] = mapped_column(Date)
    responsible: Mapped[str | None] = mapped_column(Text)
    aliases: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=sa_text("'{}'::text[]"))
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (UniqueConstraint("project_id", "reference", name="uq_matter_project_reference"),
                      Index("ix_matter_aliases", "aliases", postgresql_using="gin"),
                      Index("ix_matter_client_number", "project_id", "client_number",
                            postgresql_where=sa_text("client_number IS NOT NULL")))


class MatterAssignment(Base):
    """Which matter a source object belongs to; ``content_hash`` is the content it was classified on.

    ``method``: ``model``, ``rules``, ``reference_scan`` or ``placeholder``; ``provenance`` holds the
    trace id, the model, the evidence and any fallback taken.
    """

    __tablename__ = "matter_assignment"
    source_object_id: Mapped[int] = mapped_column(ForeignKey(_OBJ, ondelete="CASCADE"), primary_key=True)
    matter_id: Mapped[int] = mapped_column(ForeignKey("matter.id"))
    content_hash: Mapped[str | None] = mapped_column(String(64))
    method: Mapped[str] = mapped_column(Text)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=sa_text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (Index("ix_matter_assignment_matter", "matter_id"),)


class Document(Base):
    """One document of a matter: every version, rendition and copy of it points here."""

    __tablename__ = "document"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    matter_id: Mapped[int | None] = mapped_column(ForeignKey("matter.id"))
    title: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (Index("ix_document_matter", "matter_id"),)


class DocumentVersion(Base):
    """A source object's place in its document.

    ``version_order``: 1 for the first version; renditions of one version (clean, redline) share it;
    an exact duplicate carries its original's. ``duplicate_of``: the byte-identical original.
    ``supersedes``: a file of the previous version. ``redline_against``: the version the tracked
    changes were made against. ``is_final``: the last version.
    """

    __tablename__ = "document_version"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("document.id", ondelete="CASCADE"))
    source_object_id: Mapped[int] = mapped_column(ForeignKey(_OBJ, ondelete="CASCADE"))
    content_hash: Mapped[str | None] = mapped_column(String(64))
    version_order: Mapped[int | None] = mapped_column(Integer)
    version_key: Mapped[str | None] = mapped_column(Text)
    version_label: Mapped[str | None] = mapped_column(Text)
    rendition: Mapped[str | None] = mapped_column(Text)
    duplicate_of: Mapped[int | None] = mapped_column(ForeignKey(_OBJ, ondelete="SET NULL"))
    supersedes: Mapped[int | None] = mapped_column(ForeignKey(_OBJ, ondelete="SET NULL"))
    redline_against: Mapped[int | None] = mapped_column(ForeignKey(_OBJ, ondelete="SET NULL"))
    is_final: Mapped[bool] = mapped_column(Boolean, server_default=sa_text("false"))
    provenance: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=sa_text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (
        UniqueConstraint("source_object_id", name="uq_document_version_object"),
        Index("ix_document_version_document", "document_id"),
        Index("ix_document_version_hash", "content_hash"),
    )


class Relation(Base):
    """``from_object`` *is* ``type`` ``to_object``: annex_of, responds_to, references, amends."""

    __tablename__ = "relation"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    from_object_id: Mapped[int] = mapped_column(ForeignKey(_OBJ, ondelete="CASCADE"))
    to_object_id: Mapped[int] = mapped_column(ForeignKey(_OBJ, ondelete="CASCADE"))
    type: Mapped[str] = mapped_column(Text)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=sa_text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (
        UniqueConstraint("from_object_id", "to_object_id", "type", name="uq_relation"),
        CheckConstraint("type IN ('annex_of', 'responds_to', 'references', 'amends')", name="ck_relation_type"),
        Index("ix_relation_to", "to_object_id"),
    )


class CommunicationThread(Base):
    """An e-mail thread."""

    __tablename__ = "communication_thread"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    matter_id: Mapped[int | None] = mapped_column(ForeignKey("matter.id"))
    subject: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())


class CommunicationThreadMember(Base):
    """A message in a thread: its Message-ID, the message it replies to, normalised subject, Date."""

    __tablename__ = "communication_thread_member"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    thread_id: Mapped[int] = mapped_column(ForeignKey("communication_thread.id", ondelete="CASCADE"))
    source_object_id: Mapped[int] = mapped_column(ForeignKey(_OBJ, ondelete="CASCADE"))
    message_id: Mapped[str | None] = mapped_column(Text)
    parent_message_id: Mapped[str | None] = mapped_column(Text)
    parent_object_id: Mapped[int | None] = mapped_column(ForeignKey(_OBJ, ondelete="SET NULL"))
    subject_key: Mapped[str | None] = mapped_column(Text)
    sent_at: Mapped[datetime | None] = mapped_column(TZ)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (
        UniqueConstraint("source_object_id", name="uq_thread_member_object"),
        Index("ix_thread_member_thread", "thread_id"),
        Index("ix_thread_member_message", "message_id"),
        Index("ix_thread_member_parent", "parent_message_id"),
        # Migration 0030_flat_stage_cost: the threads naming a message read the parent object through an index too.
        Index("ix_thread_member_parent_object", "parent_object_id",
              postgresql_where=sa_text("parent_object_id IS NOT NULL")),
    )


class RelationIntent(Base):
    """A relate decision parked because its target has no matter assignment yet; replayed by Classify.

    ``kind``: a relation type, or ``version_of`` / ``duplicate_of`` / ``redline_against``.
    ``from_content_hash``: the source's content when decided (a changed source drops the intent).
    """

    __tablename__ = "relation_intent"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    from_object_id: Mapped[int] = mapped_column(ForeignKey(_OBJ, ondelete="CASCADE"))
    to_object_id: Mapped[int] = mapped_column(ForeignKey(_OBJ, ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(Text)
    from_content_hash: Mapped[str | None] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=sa_text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (
        UniqueConstraint("from_object_id", "to_object_id", "kind", name="uq_relation_intent"),
        Index("ix_relation_intent_to", "to_object_id"),
    )


class RelateEpoch(Base):
    """Per matter, a counter bumped by every classification into it (:mod:`ki.domain.relate.basis`)."""

    __tablename__ = "relate_epoch"
    matter_id: Mapped[int] = mapped_column(ForeignKey("matter.id", ondelete="CASCADE"), primary_key=True)
    epoch: Mapped[int] = mapped_column(BigInteger, server_default=sa_text("0"))


class RelateBasis(Base):
    """The matter and epoch a file's latest relate started at, and what its decision reads (``wants``)."""

    __tablename__ = "relate_basis"
    source_object_id: Mapped[int] = mapped_column(ForeignKey(_OBJ, ondelete="CASCADE"), primary_key=True)
    matter_id: Mapped[int] = mapped_column(ForeignKey("matter.id", ondelete="CASCADE"))
    epoch: Mapped[int] = mapped_column(BigInteger)
    wants: Mapped[dict[str, Any]] = mapped_column(JSONB)
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (Index("ix_relate_basis_matter", "matter_id", "epoch"),)


class ClassifyEpoch(Base):
    """Per project, a counter bumped by every classification (:mod:`ki.domain.matters.basis`)."""

    __tablename__ = "classify_epoch"
    project_id: Mapped[int] = mapped_column(ForeignKey("project.id", ondelete="CASCADE"), primary_key=True)
    epoch: Mapped[int] = mapped_column(BigInteger, server_default=sa_text("0"))


class ClassifyBasis(Base):
    """The epoch a file classified at, the corpus queries its decision made and the files they returned."""

    __tablename__ = "classify_basis"
    source_object_id: Mapped[int] = mapped_column(ForeignKey(_OBJ, ondelete="CASCADE"), primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("project.id", ondelete="CASCADE"))
    classified_epoch: Mapped[int] = mapped_column(BigInteger)
    has_reference: Mapped[bool] = mapped_column(Boolean, server_default=sa_text("false"))
    queries: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=sa_text("'{}'::jsonb"))
    seen: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=sa_text("'{}'::text[]"))
    folders: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=sa_text("'{}'::text[]"))
    ids: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=sa_text("'{}'::text[]"))
    needle_words: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=sa_text("'{}'::text[]"))
    __table_args__ = (
        Index("ix_classify_basis_epoch", "project_id", "classified_epoch"),
        Index("ix_classify_basis_folders", "folders", postgresql_using="gin"),
        Index("ix_classify_basis_ids", "ids", postgresql_using="gin"),
        Index("ix_classify_basis_words", "needle_words", postgresql_using="gin"),
    )
