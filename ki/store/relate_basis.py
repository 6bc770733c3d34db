"""The basis of a relate decision: the matter's relate lock and epoch, what each relate read, and the file a
classification adds to the matter.

Spec: insertion-pipeline.md "Relate" (a decision about a file that has no matter yet is parked and replayed when
that file classifies) and order independence (the result must not depend on the order files classify in). The
protocol — which lock mode when, and which bases a new file makes stale — is :mod:`ki.domain.relate.basis`'s.
Every function takes a connection inside a transaction the caller owns; none commits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.engine import Connection

from ki.store.locks import xact_lock
from ki.store.objects import REL_PATH


def lock_relate_matter(conn: Connection, matter_id: int, *, shared: bool) -> None:
    """Take the matter's transaction-level relate lock (``relate-matter``), shared or exclusive; blocking, held
    until the caller commits."""
    xact_lock(conn, "relate-matter", str(matter_id), shared=shared)


def relate_epoch(conn: Connection, matter_id: int) -> int:
    """The matter's relate epoch (0 before its first classification)."""
    return int(conn.execute(text("SELECT epoch FROM relate_epoch WHERE matter_id = :m"), {"m": matter_id}).scalar()
               or 0)


def record_basis(conn: Connection, *, source_object_id: int, matter_id: int, epoch: int, wants: Any) -> None:
    """Record (or replace) the basis of the object's relate: its matter, the epoch it saw and ``wants`` (the
    JSON-able description of what the decision reads)."""
    conn.execute(text("""
        INSERT INTO relate_basis (source_object_id, matter_id, epoch, wants, updated_at)
        VALUES (:o, :m, :e, CAST(:w AS jsonb), now())
        ON CONFLICT (source_object_id) DO UPDATE
        SET matter_id = EXCLUDED.matter_id, epoch = EXCLUDED.epoch, wants = EXCLUDED.wants, updated_at = now()"""),
        {"o": source_object_id, "m": matter_id, "e": epoch, "w": json.dumps(wants, ensure_ascii=False)})


def bump_epoch(conn: Connection, matter_id: int) -> int:
    """Increment the matter's relate epoch (creating it at 1); returns the new epoch."""
    return int(conn.execute(text("""
        INSERT INTO relate_epoch (matter_id, epoch) VALUES (:m, 1)
        ON CONFLICT (matter_id) DO UPDATE SET epoch = relate_epoch.epoch + 1 RETURNING epoch"""),
        {"m": matter_id}).scalar_one())


_NEW_FILE_SQL = text(f"""
SELECT {REL_PATH} AS rel, so.content_hash, a.body->>'title' AS title, a.body->>'format' AS format,
       a.body->>'text' AS text, a.body->'mail'->>'message_id' AS message_id
FROM source_object so JOIN source s ON s.id = so.source_id
JOIN artifact a ON a.content_hash = so.content_hash AND a.kind = 'structured_json'
WHERE so.id = :o AND so.deleted_at IS NULL
""")


def classified_file(conn: Connection, source_object_id: int) -> Row | None:
    """``rel``, ``content_hash``, ``title``, ``format``, ``text``, ``message_id`` of a live converted object
    (None: deleted or not converted)."""
    return conn.execute(_NEW_FILE_SQL, {"o": source_object_id}).first()


def older_bases(conn: Connection, matter_id: int, epoch: int, source_object_id: int) -> Sequence[Row]:
    """``source_object_id``, ``wants`` of the bases of the matter's other live objects recorded before ``epoch``."""
    return conn.execute(text("""
            SELECT b.source_object_id, b.wants FROM relate_basis b
            JOIN source_object so ON so.id = b.source_object_id AND so.deleted_at IS NULL
            WHERE b.matter_id = :m AND b.epoch < :e AND b.source_object_id <> :o"""),
            {"m": matter_id, "e": epoch, "o": source_object_id}).fetchall()
