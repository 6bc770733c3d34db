"""Reads of the ``chunk`` rows (the search record) that the index stage decides by.

Spec: insertion-pipeline.md "Index" (re-index diffs by ordinal; an access-only update when only permissions
changed). The rows themselves are written by :class:`ki.index.postgres.PostgresBackend`. Every function takes
a connection the caller owns.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

INDEXED_HASHES_SQL = text("SELECT DISTINCT content_hash FROM chunk WHERE source_object_id = :o")


def indexed_hashes(conn: Connection, source_object_id: int) -> set[str]:
    """The content hashes the object's chunk rows were made from (empty: not indexed)."""
    return set(conn.execute(INDEXED_HASHES_SQL, {"o": source_object_id}).scalars())
