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

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.domain.relate.threads import parent_ids, subject_key
from ki.store.locks import lock_key


def attach_message(conn: Connection, *, oid: int, project_id: int, matter_id: int | None,
                   mail: dict[str, Any], parent_oid: int | None) -> int:
    """Put message ``oid`` into its thread; returns the thread id.

    Args:
        mail: the message's headers (``message_id``, ``in_reply_to``, ``references``, ``subject``, ``date``).
        parent_oid: the object this message responds to (from the relate decision), or None.
    """
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": lock_key("relate-threads", str(project_id))})
    own = mail.get("message_id") or f"object:{oid}"
    parents = parent_ids(mail)
    names = [own, *parents]
    found = {r.thread_id for r in conn.execute(text("""
        SELECT thread_id FROM communication_thread_member
        WHERE source_object_id <> :o
          AND (message_id = ANY(:names) OR parent_message_id = :own OR parent_object_id = :o)"""),
        {"o": oid, "names": names, "own": own})}
    if parent_oid is not None:
        found |= {r.thread_id for r in conn.execute(text(
            "SELECT thread_id FROM communication_thread_member WHERE source_object_id = :p"), {"p": parent_oid})}
    current = conn.execute(text("SELECT thread_id FROM communication_thread_member WHERE source_object_id = :o"),
                           {"o": oid}).scalar()
    if current is not None:
        found.add(current)
    if found:
        keep = min(found)
        others = sorted(found - {keep})
        if others:
            conn.execute(text("UPDATE communication_thread_member SET thread_id = :k WHERE thread_id = ANY(:o)"),
                         {"k": keep, "o": others})
            conn.execute(text("DELETE FROM communication_thread WHERE id = ANY(:o)"), {"o": others})
    else:
        keep = int(conn.execute(text("INSERT INTO communication_thread (matter_id, subject) VALUES (:m, :s) "
                                     "RETURNING id"), {"m": matter_id, "s": mail.get("subject")}).scalar_one())
    sent = None
    if mail.get("date"):
        try:
            sent = dt.datetime.fromisoformat(str(mail["date"]))
        except ValueError:
            sent = None
    conn.execute(text("""
        INSERT INTO communication_thread_member (thread_id, source_object_id, message_id, parent_message_id,
                                                 parent_object_id, subject_key, sent_at)
        VALUES (:t, :o, :m, :p, :po, :s, :d)
        ON CONFLICT (source_object_id) DO UPDATE
        SET thread_id = EXCLUDED.thread_id, message_id = EXCLUDED.message_id,
            parent_message_id = EXCLUDED.parent_message_id, parent_object_id = EXCLUDED.parent_object_id,
            subject_key = EXCLUDED.subject_key, sent_at = EXCLUDED.sent_at"""),
        {"t": keep, "o": oid, "m": own, "p": parents[0] if parents else None, "po": parent_oid,
         "s": subject_key(mail.get("subject")), "d": sent})
    conn.execute(_THREAD_HEAD_SQL, {"t": keep})
    return keep


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
