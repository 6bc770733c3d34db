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

from sqlalchemy.engine import Connection

from ki.domain.relate.facts import FileFacts
from ki.domain.relate.wants import Wants
from ki.store.downstream import request_rerun
from ki.store.relate_basis import (
    bump_epoch,
    classified_file,
    lock_relate_matter,
    older_bases,
    record_basis,
    relate_epoch,
)

STAGE = "relate"


def hold(conn: Connection, matter_id: int) -> None:
    """Take the matter's lock shared for the rest of the transaction (materialization)."""
    lock_relate_matter(conn, matter_id, shared=True)


def begin(conn: Connection, *, source_object_id: int, matter_id: int, wants: Wants) -> int:
    """Record the basis of the relate of ``source_object_id`` on ``matter_id``; returns the epoch it saw.

    Run in its own short transaction before the decision lists the matter's files.
    """
    lock_relate_matter(conn, matter_id, shared=True)
    epoch = relate_epoch(conn, matter_id)
    record_basis(conn, source_object_id=source_object_id, matter_id=matter_id, epoch=epoch, wants=wants.as_json())
    return epoch


def on_classified(conn: Connection, *, source_object_id: int, matter_id: int) -> int:
    """Requeue the relates of ``matter_id`` that would read the newly classified file (see module doc).

    Run inside the transaction that writes the file's matter assignment. Returns how many relate rows
    were requeued.
    """
    lock_relate_matter(conn, matter_id, shared=False)
    epoch = bump_epoch(conn, matter_id)
    row = classified_file(conn, source_object_id)
    if row is None:
        return 0
    new = FileFacts(ref="", path=row.rel, format=row.format or "", title=row.title or "", text="",
                    content_hash=row.content_hash or "")
    stale = []
    for basis in older_bases(conn, matter_id, epoch, source_object_id):
        if Wants.from_json(basis.wants).reads(new, text=row.text or "", message_id=row.message_id):
            stale.append(int(basis.source_object_id))
    return request_rerun(conn, stale, STAGE) if stale else 0
