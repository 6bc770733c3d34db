"""What a source object holds: the ``blob`` row of its bytes and the hash its ``source_object`` row points at.

Spec: insertion-pipeline.md "Fetch" (a Blob row keyed by content hash; ``source_object.content_hash`` set) and
"Parse (convert)" (an embedded object's bytes are stored when its container is converted). The bytes themselves
are :class:`ki.store.blobs.BlobStore`'s; these statements only record them. Every function takes a connection
the caller owns (one transaction per fetch).
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

RECORD_BLOB_SQL = text("INSERT INTO blob (content_hash, size) VALUES (:h, :s) ON CONFLICT (content_hash) DO NOTHING")
SET_CONTENT_SQL = text("UPDATE source_object SET content_hash = :h, size = :s, updated_at = now() WHERE id = :id")


def record_blob(conn: Connection, content_hash: str, size: int) -> None:
    """Record stored bytes (``content_hash``: SHA-256 hex, ``size``: bytes); a known hash is left as it is."""
    conn.execute(RECORD_BLOB_SQL, {"h": content_hash, "s": size})


def set_content(conn: Connection, source_object_id: int, content_hash: str, size: int) -> None:
    """Point the object at the bytes its fetch stored (``content_hash`` must be recorded: :func:`record_blob`)."""
    conn.execute(SET_CONTENT_SQL, {"h": content_hash, "s": size, "id": source_object_id})
