"""The source's sync lock: a session advisory lock a process holds while it runs a local sync of the source.

Spec: insertion-pipeline.md "Orchestration" (``uq_pipeline_runs_active_sync``: one unfinished sync run per
source). The unique index
refuses a second sync run, but a process that dies mid-sync (killed, or its database stopped) leaves its
run ``running`` for ever; the lock tells a live owner from a dead one, because PostgreSQL drops a
session's advisory locks with its connection (``ki.app.launch.launch_sync``).
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

#: First half of the two-int session advisory lock a process holds on a source while its local sync runs
#: (released when the sync run is finished, or with the process's connection when it dies).
SYNC_LOCK_NS = 0x6B69_0013
ORPHANED_SYNC_SQL = text("""
UPDATE pipeline_runs SET status = 'failed', error = :e, finished_at = now(), updated_at = now()
WHERE kind = 'sync' AND source_id = :sid AND provider = 'local' AND status IN ('queued', 'running')
RETURNING id
""")


def try_lock_sync(conn: Connection, source_id: int) -> bool:
    """Take the source's sync lock on ``conn``'s session (not its transaction) without waiting; True when
    taken. Held by the process running a local sync of the source; a dead process's lock is gone with
    its connection."""
    return bool(conn.execute(text("SELECT pg_try_advisory_lock(:ns, :sid)"),
                             {"ns": SYNC_LOCK_NS, "sid": source_id}).scalar())


def unlock_sync(conn: Connection, source_id: int) -> None:
    """Release the source's sync lock taken by :func:`try_lock_sync` on this session."""
    conn.execute(text("SELECT pg_advisory_unlock(:ns, :sid)"), {"ns": SYNC_LOCK_NS, "sid": source_id})


def fail_orphaned_syncs(conn: Connection, source_id: int, error: str) -> list[int]:
    """With the source's sync lock held: fail its unfinished ``local`` sync runs (their process ended
    without finishing them: nobody else can hold the lock). Returns their ids."""
    return [int(r[0]) for r in conn.execute(ORPHANED_SYNC_SQL, {"sid": source_id, "e": error[:2000]})]


ACTIVE_SYNC_SQL = text("""
SELECT id FROM pipeline_runs WHERE kind = 'sync' AND source_id = :sid AND status IN ('queued', 'running')
""")


def active_sync(conn: Connection, source_id: int) -> int | None:
    """The id of the source's unfinished sync run (``uq_pipeline_runs_active_sync`` allows one), or None."""
    return conn.execute(ACTIVE_SYNC_SQL, {"sid": source_id}).scalar()
