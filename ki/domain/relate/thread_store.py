"""CommunicationThread membership (called inside a materialization transaction).

Spec: insertion-pipeline.md "Relate" (email threads from Message-ID / In-Reply-To / References);
case R01 (one thread of three messages whatever their ids look like). A message joins the thread
of any member whose Message-ID it names (or that names its own Message-ID as parent, or that is a
copy of it), plus the thread of the message its ``responds_to`` decision names (the subject /
quoted-header fallback for replies that lost their headers); threads a message connects are merged
into the oldest. Thread writes are serialised per project by one transaction-level advisory lock,
always taken last, so it cannot take part in a deadlock.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy.engine import Connection

from ki.domain.relate.threads import parent_ids, subject_key
from ki.store.threads import (
    create_thread,
    lock_threads,
    merge_threads,
    name_thread,
    put_member,
    thread_of,
    threads_naming,
    threads_of_parent,
)


def attach_message(conn: Connection, *, oid: int, project_id: int, matter_id: int | None,
                   mail: dict[str, Any], parent_oid: int | None) -> int:
    """Put message ``oid`` into its thread; returns the thread id.

    Args:
        mail: the message's headers (``message_id``, ``in_reply_to``, ``references``, ``subject``, ``date``).
        parent_oid: the object this message responds to (from the relate decision), or None.
    """
    lock_threads(conn, project_id)
    own = mail.get("message_id") or f"object:{oid}"
    parents = parent_ids(mail)
    names = [own, *parents]
    found = threads_naming(conn, oid, names, own)
    if parent_oid is not None:
        found |= threads_of_parent(conn, parent_oid)
    current = thread_of(conn, oid)
    if current is not None:
        found.add(current)
    if found:
        keep = min(found)
        others = sorted(found - {keep})
        if others:
            merge_threads(conn, keep, others)
    else:
        keep = create_thread(conn, matter_id, mail.get("subject"))
    sent = None
    if mail.get("date"):
        try:
            sent = dt.datetime.fromisoformat(str(mail["date"]))
        except ValueError:
            sent = None
    put_member(conn, thread_id=keep, oid=oid, message_id=own, parent_message_id=parents[0] if parents else None,
               parent_oid=parent_oid, subject_key=subject_key(mail.get("subject")), sent_at=sent)
    name_thread(conn, keep)
    return keep
