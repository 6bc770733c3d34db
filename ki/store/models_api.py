"""SQLAlchemy model of ``ki serve``'s API tokens (``api_token``, migration ``0008_api_tokens``).

DESIGN.md "The operator surface is one app". Written and read by :mod:`ki.store.tokens`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CHAR, BigInteger, DateTime, ForeignKey, Index, Text, UniqueConstraint, func
from sqlalchemy import text as sa_text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from ki.store.base import Base


class ApiToken(Base):
    """One bearer token of the API.

    Attributes:
        name: who holds it; the actor the audit log records (unique among live tokens).
        token_hash: SHA-256 hex of the token (the token itself is never stored).
        prefix: the token's first characters, to tell tokens apart in a listing.
        scopes: granted scopes (:data:`ki.app.scopes.SCOPES`).
        principal: the principal permission-filtered search runs as (None: none).
        created_by: ``cli`` or the name of the admin token that made it.
        last_used_at: the last authenticated request (refreshed at most once a minute).
        revoked_at: when it was revoked (None: live).
    """

    __tablename__ = "api_token"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    token_hash: Mapped[str] = mapped_column(CHAR(64))
    prefix: Mapped[str] = mapped_column(Text)
    scopes: Mapped[list[str]] = mapped_column(ARRAY(Text))
    principal: Mapped[str | None] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(Text, server_default=sa_text("'cli'"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    __table_args__ = (
        UniqueConstraint("token_hash", name="uq_api_token_hash"),
        Index("uq_api_token_live_name", "name", unique=True, postgresql_where=sa_text("revoked_at IS NULL")),
    )


class ConsoleSession(Base):
    """One signed-in console page (migration ``0026_console_sessions``; :mod:`ki.store.sessions`).

    Attributes:
        session_hash: SHA-256 hex of the session id the cookie carries (the id itself is never stored).
        token_id: the token it signed in with: the session dies when the token is revoked.
        expires_at: when it ends at the latest; revoked_at: sign-out (None: live).
    """

    __tablename__ = "console_session"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    session_hash: Mapped[str] = mapped_column(CHAR(64))
    token_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("api_token.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    __table_args__ = (UniqueConstraint("session_hash", name="uq_console_session_hash"),
                      Index("ix_console_session_token", "token_id"))
