"""Every statement on ``audit_log``: who did what, with the evidence it overruled.

DESIGN.md "The operator surface is one app" (writes are audited with the token's name as actor);
spec: insertion-pipeline.md "Retry from quarantine" (each retry is written with the overruled
error).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.engine import Connection


class AuditEntry(BaseModel):
    """One audit row: ``at`` (UTC), ``actor`` (token name or ``cli``), ``action``, object, details."""

    id: int
    at: datetime
    actor: str
    action: str
    source_object_id: int | None
    details: dict[str, Any]


INSERT_SQL = text("""
INSERT INTO audit_log (actor, action, source_object_id, details)
VALUES (:actor, :action, :oid, CAST(:details AS jsonb)) RETURNING id
""")


def record_audit(conn: Connection, *, actor: str, action: str, details: dict[str, Any] | None = None,
                 source_object_id: int | None = None) -> int:
    """Append one audit row in the caller's transaction (so it commits with the write it records)."""
    return int(conn.execute(INSERT_SQL, {"actor": actor, "action": action, "oid": source_object_id,
                                         "details": json.dumps(details or {}, default=str)}).scalar_one())


def recent_audit(conn: Connection, *, limit: int = 50, offset: int = 0, action: str | None = None
                 ) -> tuple[list[AuditEntry], int]:
    """Audit rows newest first (optionally one ``action``), paged; returns (rows, total)."""
    where = "WHERE action = :action" if action else ""
    params = {"action": action, "limit": limit, "offset": offset}
    total = int(conn.execute(text(f"SELECT count(*) FROM audit_log {where}"), params).scalar_one())
    rows = conn.execute(text(f"""SELECT id, at, actor, action, source_object_id, details FROM audit_log {where}
                                 ORDER BY at DESC, id DESC LIMIT :limit OFFSET :offset"""), params).fetchall()
    return [AuditEntry.model_validate(dict(r._mapping)) for r in rows], total


def has_entry(conn: Connection, *, action: str, edit_id: str) -> bool:
    """Whether an ``action`` row whose details carry ``edit_id`` exists (a replayed write-ahead record)."""
    return conn.execute(text("SELECT 1 FROM audit_log WHERE action = :action AND details->>'edit_id' = :edit_id "
                             "LIMIT 1"), {"action": action, "edit_id": edit_id}).first() is not None
