"""Advisory-lock helpers (PostgreSQL ``pg_advisory_*``).

Keys are 64-bit integers derived from a namespace and a string with a stable hash,
so every process computes the same key for the same thing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.store.db import Database


def lock_key(namespace: str, value: str) -> int:
    """A signed 64-bit advisory-lock key for (namespace, value)."""
    digest = hashlib.blake2b(f"{namespace}\x00{value}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@contextmanager
def session_advisory_lock(db: Database, namespace: str, value: str) -> Iterator[None]:
    """Hold a session-level advisory lock on (namespace, value) on a dedicated connection.

    No transaction stays open while the lock is held (the lock outlives the
    short transaction that took it). Blocks until the lock is free.
    """
    key = lock_key(namespace, value)
    with db.engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
        conn.commit()
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
            conn.commit()


def lock_keys_in_order(conn: Connection, keys: list[int]) -> None:
    """Take the transaction-level advisory locks ``keys`` in ascending order, in one statement (two
    transactions that need some of the same keys never deadlock). Held until the caller commits."""
    conn.execute(text("SELECT count(pg_advisory_xact_lock(k)) FROM (SELECT unnest(CAST(:keys AS bigint[])) AS k "
                      "ORDER BY 1) AS ordered"), {"keys": sorted(keys)})


def xact_lock(conn: Connection, namespace: str, value: str, *, shared: bool = False) -> None:
    """Take the transaction-level advisory lock of :func:`lock_key` (``namespace``, ``value``), exclusive or
    ``shared``; blocking, held until the caller's transaction ends."""
    fn = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    conn.execute(text(f"SELECT {fn}(:k)"), {"k": lock_key(namespace, value)})
