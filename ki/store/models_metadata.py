"""SQLAlchemy models of the metadata, entity and decision tables (migration ``0006_metadata``).

Spec: insertion-pipeline.md "Extract metadata" (doc_type, doc_type_ancestors, the ontology
fingerprint, language, doc_date, title, parties and identifiers; one Extraction provenance row per
document; entities resolved by rule with a uniqueness constraint on the identity key) and "Extract
decisions" (one DecisionRecord per document and target version). DESIGN.md "Decisions".

These rows are keyed by ``source_object_id`` and content hash so the stages work whether or not
Relate has created Document/DocumentVersion rows yet; ``document_version_id`` columns reference a
version only as a nullable id, filled when one is known (no foreign key: the version table belongs to
another migration branch).
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import BigInteger, Date, DateTime, ForeignKey, Index, Integer, String, Text, UniqueConstraint, func
from sqlalchemy import text as sa_text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from ki.store.base import Base

TZ = DateTime(timezone=True)


class Entity(Base):
    """One real company, law firm, court or person, across every matter it appears on.

    ``identity_key`` is the normalised name (``rheintal|ag``), or for a homonym kept apart by a
    contradicting register identifier the name plus that identifier (``rheintal|ag#register_number:
    HRB154873@leipzig``); unique per project. ``provenance`` holds how it was created, including
    ``resolution.same_name_candidates``.
    """

    __tablename__ = "entity"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("project.id"))
    kind: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text)
    identity_key: Mapped[str] = mapped_column(Text)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=sa_text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (UniqueConstraint("project_id", "identity_key", name="uq_entity_project_identity"),)


class EntityAlias(Base):
    """The alias ledger: every spelling an entity was written in (``alias_key`` normalised)."""

    __tablename__ = "entity_alias"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    entity_id: Mapped[int] = mapped_column(ForeignKey("entity.id", ondelete="CASCADE"))
    alias: Mapped[str] = mapped_column(Text)
    alias_key: Mapped[str] = mapped_column(Text)
    tokens: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=sa_text("'{}'::text[]"))
    source_object_id: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (
        UniqueConstraint("entity_id", "alias", name="uq_entity_alias_entity_alias"),
        Index("ix_entity_alias_key", "alias_key"),
        Index("ix_entity_alias_tokens", "tokens", postgresql_using="gin"),
        Index("ix_entity_alias_first_token", sa_text("(tokens[1])")),
    )


class EntityIdentifier(Base):
    """A typed identifier of an entity (register number with issuer, VAT id, LEI)."""

    __tablename__ = "entity_identifier"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    entity_id: Mapped[int] = mapped_column(ForeignKey("entity.id", ondelete="CASCADE"))
    type: Mapped[str] = mapped_column(Text)
    value: Mapped[str] = mapped_column(Text)
    value_key: Mapped[str] = mapped_column(Text)
    issuer: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (
        UniqueConstraint("entity_id", "type", "value_key", name="uq_entity_identifier_entity_type_value"),
        Index("ix_entity_identifier_lookup", "type", "value_key"),
    )


class MatterParty(Base):
    """An entity's role on a matter (``matter_key``: ``matter:<id>`` once classified, else a fallback).

    ``basis`` says why (see :data:`ki.domain.entities.roles.RANKS`); ``rank`` is its strength. A stronger
    claim replaces the role, an equal or weaker one keeps it.
    """

    __tablename__ = "matter_party"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    matter_key: Mapped[str] = mapped_column(Text)
    matter_id: Mapped[int | None] = mapped_column(BigInteger)
    entity_id: Mapped[int] = mapped_column(ForeignKey("entity.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(Text)
    basis: Mapped[str] = mapped_column(Text)
    rank: Mapped[int] = mapped_column(Integer)
    source_object_id: Mapped[int | None] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (
        UniqueConstraint("matter_key", "entity_id", name="uq_matter_party_matter_entity"),
        Index("ix_matter_party_entity", "entity_id"),
    )


class DocumentMetadata(Base):
    """What extract_metadata concluded about one source object's content.

    ``doc_type`` NULL means untyped, judged under ``ontology_fingerprint``.
    """

    __tablename__ = "document_metadata"
    source_object_id: Mapped[int] = mapped_column(ForeignKey("source_object.id", ondelete="CASCADE"),
                                                  primary_key=True)
    content_hash: Mapped[str] = mapped_column(String(64))
    document_version_id: Mapped[int | None] = mapped_column(BigInteger)
    matter_key: Mapped[str | None] = mapped_column(Text)
    doc_type: Mapped[str | None] = mapped_column(Text)
    doc_type_ancestors: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=sa_text("'{}'::text[]"))
    ontology_version: Mapped[str] = mapped_column(Text)
    ontology_fingerprint: Mapped[str] = mapped_column(Text)
    language: Mapped[str | None] = mapped_column(Text)
    doc_date: Mapped[date | None] = mapped_column(Date)
    doc_date_source: Mapped[str | None] = mapped_column(Text)
    title: Mapped[str | None] = mapped_column(Text)
    identifiers: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default=sa_text("'[]'::jsonb"))
    facts: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=sa_text("'{}'::jsonb"))
    producer_version: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (
        Index("ix_document_metadata_doc_type", "doc_type"),
        Index("ix_document_metadata_fingerprint", "ontology_fingerprint", postgresql_where=sa_text("doc_type IS NULL")),
    )


class DocumentParty(Base):
    """A party named on one source object: the entity, the name as written, its role on the matter."""

    __tablename__ = "document_party"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    source_object_id: Mapped[int] = mapped_column(ForeignKey("source_object.id", ondelete="CASCADE"))
    entity_id: Mapped[int] = mapped_column(ForeignKey("entity.id", ondelete="CASCADE"))
    ordinal: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(Text)
    role: Mapped[str] = mapped_column(Text)
    role_basis: Mapped[str] = mapped_column(Text)
    matter_key: Mapped[str | None] = mapped_column(Text)
    identifiers: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default=sa_text("'[]'::jsonb"))
    resolution: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=sa_text("'{}'::jsonb"))
    __table_args__ = (
        UniqueConstraint("source_object_id", "entity_id", name="uq_document_party_object_entity"),
        Index("ix_document_party_matter_entity", "matter_key", "entity_id"),
        Index("ix_document_party_entity", "entity_id"),
    )


class Extraction(Base):
    """Provenance of one stage's extraction for one source object (model or rules, trace, tool calls)."""

    __tablename__ = "extraction"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    source_object_id: Mapped[int] = mapped_column(ForeignKey("source_object.id", ondelete="CASCADE"))
    stage: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    producer_version: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)
    trace_id: Mapped[str | None] = mapped_column(Text)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=sa_text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (UniqueConstraint("source_object_id", "stage", name="uq_extraction_object_stage"),)


class DecisionRecord(Base):
    """The negotiation decisions of one document version (tracked changes against its predecessor).

    One per (document, target version): ``source_object_id`` + ``content_hash`` always; the version
    ids when Relate has made them (``redline_against_*`` may be NULL when the revisions live inside
    one file).
    """

    __tablename__ = "decision_record"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    source_object_id: Mapped[int] = mapped_column(ForeignKey("source_object.id", ondelete="CASCADE"))
    content_hash: Mapped[str] = mapped_column(String(64))
    document_version_id: Mapped[int | None] = mapped_column(BigInteger)
    redline_against_version_id: Mapped[int | None] = mapped_column(BigInteger)
    redline_against_source_object_id: Mapped[int | None] = mapped_column(BigInteger)
    summary: Mapped[str | None] = mapped_column(Text)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=sa_text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (
        UniqueConstraint("source_object_id", "content_hash", name="uq_decision_record_object_hash"),
        Index("uq_decision_record_version", "document_version_id", unique=True,
              postgresql_where=sa_text("document_version_id IS NOT NULL")),
    )


class DecisionEntry(Base):
    """One changed point of a DecisionRecord."""

    __tablename__ = "decision_entry"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    decision_record_id: Mapped[int] = mapped_column(ForeignKey("decision_record.id", ondelete="CASCADE"))
    ordinal: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(Text)
    locus: Mapped[str | None] = mapped_column(Text)
    before_text: Mapped[str | None] = mapped_column(Text)
    after_text: Mapped[str | None] = mapped_column(Text)
    change_summary: Mapped[str] = mapped_column(Text)
    rationale_category: Mapped[str] = mapped_column(Text)
    rationale_text: Mapped[str | None] = mapped_column(Text)
    generalizability: Mapped[str] = mapped_column(Text)
    author: Mapped[str | None] = mapped_column(Text)
    changed_at: Mapped[datetime | None] = mapped_column(TZ)
    __table_args__ = (UniqueConstraint("decision_record_id", "ordinal", name="uq_decision_entry_record_ordinal"),)
