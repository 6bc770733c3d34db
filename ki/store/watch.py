"""The folder watcher's health per source (``source_watch``): written by the watcher, read by ``ki status``.

A watcher's health: mode, state (watching / paused / stopped), why paused, last event, last full
scan, files seen / queued / ignored (with reasons), observers restarted, and a heartbeat (a watcher that
died leaves a row whose heartbeat ages: :func:`watch_health` reports it ``stale``). Every function takes a
connection the caller owns.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.engine import Connection

#: A heartbeat older than this (s) means the watcher is gone (it beats every few seconds).
STALE_SECONDS = 60.0

UPSERT_SQL = text("""
INSERT INTO source_watch (source_id, mode, state, paused_reason, watcher, last_event_at, last_full_scan_at,
                          files_seen, files_queued, files_ignored, ignored_reasons, restarts, heartbeat_at, updated_at)
VALUES (:sid, :mode, :state, :reason, :watcher, :last_event, :last_scan, :seen, :queued, :ignored,
        CAST(:reasons AS jsonb), :restarts, now(), now())
ON CONFLICT (source_id) DO UPDATE SET
    mode = EXCLUDED.mode, state = EXCLUDED.state, paused_reason = EXCLUDED.paused_reason,
    watcher = EXCLUDED.watcher, last_event_at = EXCLUDED.last_event_at,
    last_full_scan_at = EXCLUDED.last_full_scan_at, files_seen = EXCLUDED.files_seen,
    files_queued = EXCLUDED.files_queued, files_ignored = EXCLUDED.files_ignored,
    ignored_reasons = EXCLUDED.ignored_reasons, restarts = EXCLUDED.restarts, heartbeat_at = now(),
    updated_at = now()
""")


class WatchHealth(BaseModel):
    """One source's watcher health as ``ki status`` and the console show it (times UTC).

    ``state``: ``watching``, ``paused`` (``paused_reason`` says why), ``stopped`` (the watcher ended), or
    ``stale`` (its heartbeat is older than :data:`STALE_SECONDS`: the watcher process is gone)."""

    source_id: int
    root: str
    mode: str
    state: str
    paused_reason: str | None
    watcher: str | None
    last_event_at: datetime | None
    last_full_scan_at: datetime | None
    files_seen: int
    files_queued: int
    files_ignored: int
    ignored_reasons: dict[str, int]
    restarts: int
    heartbeat_at: datetime


def write_health(conn: Connection, *, source_id: int, mode: str, state: str, paused_reason: str | None,
                 watcher: str, last_event_at: datetime | None, last_full_scan_at: datetime | None,
                 files_seen: int, files_queued: int, files_ignored: int, ignored_reasons: dict[str, int],
                 restarts: int) -> None:
    """Record a source's watcher health (and its heartbeat, now)."""
    conn.execute(UPSERT_SQL, {"sid": source_id, "mode": mode, "state": state, "reason": paused_reason,
                              "watcher": watcher, "last_event": last_event_at, "last_scan": last_full_scan_at,
                              "seen": files_seen, "queued": files_queued, "ignored": files_ignored,
                              "reasons": json.dumps(ignored_reasons), "restarts": restarts})


HEALTH_SQL = text(f"""
SELECT w.source_id, s.root, w.mode,
       CASE WHEN w.state <> 'stopped' AND w.heartbeat_at < now() - interval '{STALE_SECONDS:g} seconds'
            THEN 'stale' ELSE w.state END AS state,
       w.paused_reason, w.watcher, w.last_event_at, w.last_full_scan_at, w.files_seen, w.files_queued,
       w.files_ignored, w.ignored_reasons, w.restarts, w.heartbeat_at
FROM source_watch w JOIN source s ON s.id = w.source_id ORDER BY w.source_id
""")


def watch_health(conn: Connection) -> list[WatchHealth]:
    """Every watched source's health, by source id (empty when nothing was ever watched)."""
    out: list[WatchHealth] = []
    for r in conn.execute(HEALTH_SQL):
        row: dict[str, Any] = dict(r._mapping)
        row["ignored_reasons"] = dict(row["ignored_reasons"] or {})
        out.append(WatchHealth.model_validate(row))
    return out


def source_configs(conn: Connection, source_ids: Sequence[int]) -> list[tuple[int, str, dict]]:
    """``(id, root, config)`` of the given local-folder sources, by id (what the watcher needs of them)."""
    rows = conn.execute(text("SELECT id, root, config FROM source WHERE id = ANY(CAST(:ids AS int[])) "
                             "AND kind = 'local' ORDER BY id"), {"ids": list(source_ids)})
    return [(int(r.id), r.root, dict(r.config or {})) for r in rows]


def watcher_summaries(conn: Connection, source_ids: Sequence[int]) -> dict[int, str]:
    """One line of watcher state per watched source among ``source_ids`` (the ``ki source list`` hook):
    ``watching (native) since 10:02``, ``paused: <reason>``, ``stopped``, ``stale (last seen …)``."""
    wanted = set(source_ids)
    out: dict[int, str] = {}
    for w in watch_health(conn):
        if w.source_id not in wanted:
            continue
        if w.state == "watching":
            line = f"watching ({w.mode})" + (f", last event {w.last_event_at:%H:%M:%S}" if w.last_event_at else "")
        elif w.state == "paused":
            line = f"paused: {w.paused_reason}"
        elif w.state == "stale":
            line = f"stale (last seen {w.heartbeat_at:%Y-%m-%d %H:%M})"
        else:
            line = w.state
        out[w.source_id] = line
    return out
