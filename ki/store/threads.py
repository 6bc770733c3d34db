"""CommunicationThread rows and their members: the per-project thread lock, finding, merging and naming threads.

Spec: insertion-pipeline.md "Relate" (email threads from Message-ID / In-Reply-To / References); case R01 (one
thread of three messages whatever their ids look like). Which threads a message joins is
:mod:`ki.domain.relate.thread_store`'s rule; these are its statements. Every function takes a connection inside
the materialization's transaction; none commits.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.store.locks import xact_lock


def lock_threads(conn: Connection, project_id: int) -> None:
    """Take the project's transaction-level thread lock (``relate-threads``); blocking, held until the caller
    commits. Always the last lock a materialization takes, so it cannot take part in a deadlock."""
    xact_lock(conn, "relate-threads", str(project_id))


def threads_naming(conn: Connection, oid: int, names: Sequence[str], own: str) -> set[int]:
    """Threads with another member whose Message-ID is one of ``names``, whose parent Message-ID is ``own``, or
    whose parent object is ``oid``."""
    return {r.thread_id for r in conn.execute(text("""
        SELECT thread_id FROM communication_thread_member
        WHERE source_object_id <> :o
          AND (message_id = ANY(:names) OR parent_message_id = :own OR parent_object_id = :o)"""),
        {"o": oid, "names": list(names), "own": own})}


def threads_of_parent(conn: Connection, parent_oid: int) -> set[int]:
    """The thread(s) the object ``parent_oid`` is a member of."""
    return {r.thread_id for r in conn.execute(text(
        "SELECT thread_id FROM communication_thread_member WHERE source_object_id = :p"), {"p": parent_oid})}


def thread_of(conn: Connection, oid: int) -> int | None:
    """The thread the object is a member of (None: none yet)."""
    return conn.execute(text("SELECT thread_id FROM communication_thread_member WHERE source_object_id = :o"),
                        {"o": oid}).scalar()


def merge_threads(conn: Connection, keep: int, others: Sequence[int]) -> None:
    """Move every member of ``others`` into thread ``keep`` and delete those threads."""
    conn.execute(text("UPDATE communication_thread_member SET thread_id = :k WHERE thread_id = ANY(:o)"),
                 {"k": keep, "o": list(others)})
    conn.execute(text("DELETE FROM communication_thread WHERE id = ANY(:o)"), {"o": list(others)})


def create_thread(conn: Connection, matter_id: int | None, subject: str | None) -> int:
    """A new thread of the matter; returns its id."""
    return int(conn.execute(text("INSERT INTO communication_thread (matter_id, subject) VALUES (:m, :s) "
                                 "RETURNING id"), {"m": matter_id, "s": subject}).scalar_one())


def put_member(conn: Connection, *, thread_id: int, oid: int, message_id: str, parent_message_id: str | None,
               parent_oid: int | None, subject_key: str | None, sent_at: dt.datetime | None) -> None:
    """Make the object a member of the thread (its one membership row, replaced) with its message headers."""
    conn.execute(text("""
        INSERT INTO communication_thread_member (thread_id, source_object_id, message_id, parent_message_id,
                                                 parent_object_id, subject_key, sent_at)
        VALUES (:t, :o, :m, :p, :po, :s, :d)
        ON CONFLICT (source_object_id) DO UPDATE
        SET thread_id = EXCLUDED.thread_id, message_id = EXCLUDED.message_id,
            parent_message_id = EXCLUDED.parent_message_id, parent_object_id = EXCLUDED.parent_object_id,
            subject_key = EXCLUDED.subject_key, sent_at = EXCLUDED.sent_at"""),
        {"t": thread_id, "o": oid, "m": message_id, "p": parent_message_id, "po": parent_oid, "s": subject_key,
         "d": sent_at})


# A thread is named by its first message (earliest Date, then path) and belongs to that message's
# matter, whichever message happened to start the thread row.
_THREAD_HEAD_SQL = text("""
UPDATE communication_thread t SET subject = h.subject, matter_id = coalesce(h.matter_id, t.matter_id),
       updated_at = now()
FROM (SELECT a.body->'mail'->>'subject' AS subject, ma.matter_id
      FROM communication_thread_member m JOIN source_object so ON so.id = m.source_object_id
      LEFT JOIN artifact a ON a.content_hash = so.content_hash AND a.kind = 'structured_json'
      LEFT JOIN matter_assignment ma ON ma.source_object_id = so.id
      WHERE m.thread_id = :t ORDER BY m.sent_at NULLS LAST, so.path LIMIT 1) h
WHERE t.id = :t AND (t.subject, t.matter_id) IS DISTINCT FROM (h.subject, coalesce(h.matter_id, t.matter_id))
""")


def name_thread(conn: Connection, thread_id: int) -> None:
    """Give the thread the subject and matter of its first message (earliest Date, then path), where different."""
    conn.execute(_THREAD_HEAD_SQL, {"t": thread_id})
