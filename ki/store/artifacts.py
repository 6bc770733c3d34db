"""Artifacts keyed by (content hash, kind): read, and write once.

Spec: insertion-pipeline.md "Parse" (one structured_json per content hash; an
existing artifact makes the stage a no-op).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

STRUCTURED_JSON = "structured_json"


def get_artifact(conn: Connection, content_hash: str, kind: str) -> dict[str, Any] | None:
    """The body of the (content_hash, kind) artifact, or None."""
    row = conn.execute(
        text("SELECT body FROM artifact WHERE content_hash = :h AND kind = :k"), {"h": content_hash, "k": kind}
    ).first()
    return row.body if row else None


def put_artifact(conn: Connection, content_hash: str, kind: str, *, producer: str, producer_version: str,
                 body: dict[str, Any]) -> bool:
    """Insert the artifact unless one exists (a concurrent writer wins). True when this call wrote it."""
    row = conn.execute(
        text("""
        INSERT INTO artifact (content_hash, kind, producer, producer_version, body)
        VALUES (:h, :k, :p, :v, CAST(:b AS jsonb))
        ON CONFLICT (content_hash, kind) DO NOTHING RETURNING id
        """),
        {"h": content_hash, "k": kind, "p": producer, "v": producer_version, "b": json.dumps(body)},
    ).first()
    return row is not None
