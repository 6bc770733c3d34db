"""The basis of a relate decision, and relating again when a file it would have read classifies later.

Spec: insertion-pipeline.md "Relate" (relate decides over the files of the file's matter; a
decision about a file that has no matter yet is parked and replayed when that file classifies)
and order independence: the result must not depend on the order files classify in. A relate that
ran before a file of its matter classified did not see that file; when the file classifies, every
earlier decision of the matter that would have read it (:meth:`ki.domain.relate.wants.Wants.reads`) is
taken again (its relate row goes back to pending), so the final relations, versions and threads
are those of the whole matter.

Protocol, on one advisory lock per matter (``relate-matter``):

* :func:`begin` — when a relate starts, under the lock *shared*: record the matter's epoch and what
  the decision reads (``relate_basis``).
* :func:`hold` — the materialization takes the lock *shared* before it re-validates its claim.
* :func:`on_classified` — inside Classify's commit transaction, under the lock *exclusive*: bump the
  matter's epoch; every basis of the matter from an older epoch whose wants read the new file gets
  its relate row requeued (a running claim is revoked, so its late completion is refused).

A relate that began before the classification committed has an older epoch and is requeued when it
would read the file; one that began after sees the file. A requeue may be redundant (the relate
happened to see the file); it is never missed.
"""

from __future__ import annotations

import json

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.domain.relate.facts import FileFacts
from ki.domain.relate.wants import Wants
from ki.store.corpus import REL_PATH
from ki.store.downstream import request_rerun
from ki.store.locks import lock_key

STAGE = "relate"


def _lock(conn: Connection, matter_id: int, *, shared: bool) -> None:
    fn = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    conn.execute(text(f"SELECT {fn}(:k)"), {"k": lock_key("relate-matter", str(matter_id))})


def hold(conn: Connection, matter_id: int) -> None:
    """Take the matter's lock shared for the rest of the transaction (materialization)."""
    _lock(conn, matter_id, shared=True)


def begin(conn: Connection, *, source_object_id: int, matter_id: int, wants: Wants) -> int:
    """Record the basis of the relate of ``source_object_id`` on ``matter_id``; returns the epoch it saw.

    Run in its own short transaction before the decision lists the matter's files.
    """
    _lock(conn, matter_id, shared=True)
    epoch = conn.execute(text("SELECT epoch FROM relate_epoch WHERE matter_id = :m"), {"m": matter_id}).scalar() or 0
    conn.execute(text("""
        INSERT INTO relate_basis (source_object_id, matter_id, epoch, wants, updated_at)
        VALUES (:o, :m, :e, CAST(:w AS jsonb), now())
        ON CONFLICT (source_object_id) DO UPDATE
        SET matter_id = EXCLUDED.matter_id, epoch = EXCLUDED.epoch, wants = EXCLUDED.wants, updated_at = now()"""),
        {"o": source_object_id, "m": matter_id, "e": epoch, "w": json.dumps(wants.as_json(), ensure_ascii=False)})
    return int(epoch)


_NEW_FILE_SQL = text(f"""
SELECT {REL_PATH} AS rel, so.content_hash, a.body->>'title' AS title, a.body->>'format' AS format,
       a.body->>'text' AS text, a.body->'mail'->>'message_id' AS message_id
FROM source_object so JOIN source s ON s.id = so.source_id
JOIN artifact a ON a.content_hash = so.content_hash AND a.kind = 'structured_json'
WHERE so.id = :o AND so.deleted_at IS NULL
""")


def on_classified(conn: Connection, *, source_object_id: int, matter_id: int) -> int:
    """Requeue the relates of ``matter_id`` that would read the newly classified file (see module doc).

    Run inside the transaction that writes the file's matter assignment. Returns how many relate rows
    were requeued.
    """
    _lock(conn, matter_id, shared=False)
    epoch = int(conn.execute(text("""
        INSERT INTO relate_epoch (matter_id, epoch) VALUES (:m, 1)
        ON CONFLICT (matter_id) DO UPDATE SET epoch = relate_epoch.epoch + 1 RETURNING epoch"""),
        {"m": matter_id}).scalar_one())
    row = conn.execute(_NEW_FILE_SQL, {"o": source_object_id}).first()
    if row is None:
        return 0
    new = FileFacts(ref="", path=row.rel, format=row.format or "", title=row.title or "", text="",
                    content_hash=row.content_hash or "")
    stale = []
    for basis in conn.execute(text("""
            SELECT b.source_object_id, b.wants FROM relate_basis b
            JOIN source_object so ON so.id = b.source_object_id AND so.deleted_at IS NULL
            WHERE b.matter_id = :m AND b.epoch < :e AND b.source_object_id <> :o"""),
            {"m": matter_id, "e": epoch, "o": source_object_id}):
        if Wants.from_json(basis.wants).reads(new, text=row.text or "", message_id=row.message_id):
            stale.append(int(basis.source_object_id))
    return request_rerun(conn, stale, STAGE) if stale else 0
