"""SQLAlchemy models of the search tables (migration ``0005_search``).

Spec: insertion-pipeline.md "Index" (model name and dimension recorded on the index; permission
projection compiled from source, project and document grants); DESIGN.md "Duplicates and
permissions" (identical bytes embedded once per blob). Written and read by :mod:`ki.adapters.search`.
The chunk's own vector column is ``Chunk.embedding`` in :mod:`ki.store.models`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import VECTOR
from sqlalchemy import UUID, BigInteger, CheckConstraint, DateTime, ForeignKey, Index, Integer, String, Text, func
from sqlalchemy import text as sa_text
from sqlalchemy.orm import Mapped, mapped_column

from ki.store.base import Base

TZ = DateTime(timezone=True)


class IndexMeta(Base):
    """The embedder whose vectors a search index holds: ``embedder`` name and ``dimension``.

    One row per index (the embedded backend has one, ``default``). Written when the first
    vectors are stored; writing vectors of another embedder or dimension is refused
    (:class:`ki.adapters.search.backend.EmbedderMismatch`).
    """

    __tablename__ = "index_meta"
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    embedder: Mapped[str] = mapped_column(Text)
    dimension: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (CheckConstraint("dimension > 0", name="index_meta_dimension_check"),)


class EmbeddingCache(Base):
    """Vectors by (embedder, content hash, ordinal, input SHA-256): identical bytes are embedded once.

    ``input_sha256`` is the SHA-256 (hex) of the exact text that was embedded (with its context
    header); a vector is reused only for the same input. Chunk inputs depend on the bytes alone (the
    header names title and type), so every copy of a blob shares them; the profile row also names
    the matter, so a copy filed under another matter gets its own profile vector.
    """

    __tablename__ = "embedding_cache"
    embedder: Mapped[str] = mapped_column(Text, primary_key=True)
    content_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    ordinal: Mapped[int] = mapped_column(Integer, primary_key=True)
    input_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    embedding: Mapped[Any] = mapped_column(VECTOR())
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())


class AccessGrant(Base):
    """A grant at project, source or document level: ``effect`` (allow / deny) for ``principal``.

    Exactly one of ``project_id``, ``source_id``, ``source_object_id`` is set. Compiled with the
    source configuration and the connector's ACL into each chunk's ``allowed_principals`` /
    ``denied_principals`` (:mod:`ki.domain.access`).
    """

    __tablename__ = "access_grant"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    project_id: Mapped[int | None] = mapped_column(ForeignKey("project.id", ondelete="CASCADE"))
    source_id: Mapped[int | None] = mapped_column(ForeignKey("source.id", ondelete="CASCADE"))
    source_object_id: Mapped[int | None] = mapped_column(ForeignKey("source_object.id", ondelete="CASCADE"))
    principal: Mapped[str] = mapped_column(Text)
    effect: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (
        CheckConstraint("principal <> ''", name="access_grant_principal_check"),
        CheckConstraint("effect IN ('allow', 'deny')", name="access_grant_effect_check"),
        CheckConstraint("num_nonnulls(project_id, source_id, source_object_id) = 1", name="ck_access_grant_one_scope"),
        Index("ix_access_grant_project", "project_id", postgresql_where=sa_text("project_id IS NOT NULL")),
        Index("ix_access_grant_source", "source_id", postgresql_where=sa_text("source_id IS NOT NULL")),
        Index("ix_access_grant_object", "source_object_id",
              postgresql_where=sa_text("source_object_id IS NOT NULL")),
    )


class IndexChange(Base):
    """The change log of the search record: one row per object whose rows changed, ``seq`` bumped by every
    write (migration 0014; :mod:`ki.store.index_record`). Projections (the embedded lexical index) apply the
    objects changed after the last ``seq`` they applied."""

    __tablename__ = "index_change"
    source_object_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger)
    changed_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    __table_args__ = (Index("ix_index_change_seq", "seq"),)


class SearchEpoch(Base):
    """One UUID per database (migration 0014): a projection built for another epoch is rebuilt."""

    __tablename__ = "search_epoch"
    epoch: Mapped[Any] = mapped_column(UUID, primary_key=True, server_default=sa_text("gen_random_uuid()"))
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
