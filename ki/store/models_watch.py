"""SQLAlchemy models of the health tables: the folder watcher per source (``source_watch``, migration
``0017_watch``) and the open circuit breakers (``dependency_pause``, ``0019_dependency_pause``).

Written through :mod:`ki.store.watch` by ``ki watch`` / ``ki serve --watch``
(:mod:`ki.adapters.sources.watch`), read by ``ki status`` and the console's status.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Integer, Text, func
from sqlalchemy import text as sa_text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from ki.store.base import TZ, Base


class SourceWatch(Base):
    """One watched source's health.

    Attributes:
        mode: ``native`` (inotify events) or ``poll`` (stat polling, network file systems).
        state: ``watching``, ``paused`` (root vanished or unreadable) or ``stopped``.
        paused_reason: why watching is paused (None while watching).
        watcher: who watches (``host:pid``).
        last_event_at / last_full_scan_at: UTC.
        files_seen / files_queued / files_ignored: counters since the watcher started
            (events' files, candidates handed to a sync, names never documents).
        ignored_reasons: ``{reason: count}`` of the ignored files.
        restarts: observers found dead and restarted.
        heartbeat_at: the watcher's last sign of life (a state older than a minute is stale).
    """

    __tablename__ = "source_watch"
    source_id: Mapped[int] = mapped_column(ForeignKey("source.id", ondelete="CASCADE"), primary_key=True)
    mode: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(Text)
    paused_reason: Mapped[str | None] = mapped_column(Text)
    watcher: Mapped[str | None] = mapped_column(Text)
    last_event_at: Mapped[datetime | None] = mapped_column(TZ)
    last_full_scan_at: Mapped[datetime | None] = mapped_column(TZ)
    files_seen: Mapped[int] = mapped_column(BigInteger, server_default=sa_text("0"))
    files_queued: Mapped[int] = mapped_column(BigInteger, server_default=sa_text("0"))
    files_ignored: Mapped[int] = mapped_column(BigInteger, server_default=sa_text("0"))
    ignored_reasons: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=sa_text("'{}'::jsonb"))
    restarts: Mapped[int] = mapped_column(Integer, server_default=sa_text("0"))
    heartbeat_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())


class DependencyPause(Base):
    """An open circuit breaker (``dependency_pause``, migration ``0019_dependency_pause``; :mod:`ki.adapters.breaker`).

    Attributes:
        dependency: ``gateway``, ``docling``, ``opensearch`` or ``source``.
        since: when the breaker opened (UTC); reason: the fault that opened it.
        next_probe_at: when the next probe may run (UTC); probes: probes that failed so far.
        paused_by: the process (``host:pid:start``) that last recorded it.
    """

    __tablename__ = "dependency_pause"
    dependency: Mapped[str] = mapped_column(Text, primary_key=True)
    since: Mapped[datetime] = mapped_column(TZ)
    reason: Mapped[str] = mapped_column(Text, server_default=sa_text("''"))
    next_probe_at: Mapped[datetime] = mapped_column(TZ)
    probes: Mapped[int] = mapped_column(Integer, server_default=sa_text("0"))
    paused_by: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
