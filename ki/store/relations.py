"""Relation rows, parked relation intents, and what relate locks and re-reads per file before it writes.

Spec: insertion-pipeline.md "Relate" ("afterwards the stage takes sorted per-file advisory locks on every file it
will write, re-validates that the claim, content hash, and matter assignment are unchanged ... Decisions whose
target file has no matter assignment yet are parked as RelationIntent rows") and "Classify" ("replays any
relation intents other files had parked against this one"). The lock order and the replay rules are
:mod:`ki.domain.relate.materialize`'s and :mod:`ki.domain.relate.intents`'. Every function takes a connection
the caller owns; none commits.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.engine import Connection

from ki.store.locks import xact_lock


def lock_relate_file(conn: Connection, oid: int) -> None:
    """Take the object's transaction-level relate lock (``relate-file``); blocking, held until the caller
    commits. Callers take several in ascending id order."""
    xact_lock(conn, "relate-file", str(oid))


def assignments_of(conn: Connection, oids: set[int]) -> dict[int, int]:
    """object id → matter id, for live objects that have a matter assignment."""
    if not oids:
        return {}
    rows = conn.execute(text("""SELECT ma.source_object_id, ma.matter_id FROM matter_assignment ma
                                JOIN source_object so ON so.id = ma.source_object_id AND so.deleted_at IS NULL
                                WHERE ma.source_object_id = ANY(:o)"""), {"o": sorted(oids)})
    return {r.source_object_id: r.matter_id for r in rows}


def park(conn: Connection, *, from_oid: int, to_oid: int, kind: str, content_hash: str, payload: dict) -> None:
    """Park a decision whose target has no matter yet (replayed when the target classifies); ``payload`` is
    stored as JSON (a value JSON cannot hold is written as its ``str``)."""
    conn.execute(text("""INSERT INTO relation_intent (from_object_id, to_object_id, kind, from_content_hash, payload)
                         VALUES (:f, :t, :k, :h, CAST(:p AS jsonb))
                         ON CONFLICT (from_object_id, to_object_id, kind) DO UPDATE
                         SET from_content_hash = EXCLUDED.from_content_hash, payload = EXCLUDED.payload"""),
                 {"f": from_oid, "t": to_oid, "k": kind, "h": content_hash, "p": json.dumps(payload, default=str)})


def object_state(conn: Connection, oid: int) -> Row | None:
    """``content_hash``, ``deleted_at`` of the object (None: unknown)."""
    return conn.execute(text("SELECT content_hash, deleted_at FROM source_object WHERE id = :o"), {"o": oid}).first()


def assignment_row(conn: Connection, oid: int) -> Row | None:
    """``matter_id``, ``content_hash`` of the object's matter assignment (None: not assigned)."""
    return conn.execute(text("SELECT matter_id, content_hash FROM matter_assignment WHERE source_object_id = :o"),
                        {"o": oid}).first()


def clear_decision(conn: Connection, oid: int) -> None:
    """Delete the intents the object parked and the relations it wrote (its decision is written anew)."""
    conn.execute(text("DELETE FROM relation_intent WHERE from_object_id = :o"), {"o": oid})
    conn.execute(text("DELETE FROM relation WHERE from_object_id = :o"), {"o": oid})


def add_relation(conn: Connection, from_oid: int, to_oid: int, kind: str, provenance: dict[str, Any]) -> None:
    """Record a relation (idempotent: an existing one is kept); ``provenance`` as JSON (``str`` of the rest)."""
    conn.execute(text("""INSERT INTO relation (from_object_id, to_object_id, type, provenance)
                         VALUES (:f, :t, :k, CAST(:p AS jsonb)) ON CONFLICT DO NOTHING"""),
                 {"f": from_oid, "t": to_oid, "k": kind, "p": json.dumps(provenance, default=str)})


def intents_for(conn: Connection, target_oid: int) -> list[int]:
    """Ids of the intents parked against ``target_oid``, oldest first."""
    return [r.id for r in conn.execute(text("SELECT id FROM relation_intent WHERE to_object_id = :t ORDER BY id"),
                                       {"t": target_oid})]


def intent_row(conn: Connection, intent_id: int) -> Row | None:
    """``from_object_id``, ``to_object_id``, ``kind``, ``from_content_hash`` of an intent (None: gone)."""
    return conn.execute(text("SELECT from_object_id, to_object_id, kind, from_content_hash FROM relation_intent "
                             "WHERE id = :i"), {"i": intent_id}).first()


def live_content_hash(conn: Connection, oid: int) -> str | None:
    """The content hash of a live object (None: tombstoned, unknown or not fetched)."""
    return conn.execute(text("SELECT content_hash FROM source_object WHERE id = :o AND deleted_at IS NULL"),
                        {"o": oid}).scalar()


def drop_intent(conn: Connection, intent_id: int) -> None:
    """Delete an intent (applied, or its source changed)."""
    conn.execute(text("DELETE FROM relation_intent WHERE id = :i"), {"i": intent_id})


def add_replayed_relation(conn: Connection, from_oid: int, to_oid: int, kind: str) -> None:
    """Record a relation a parked intent named (provenance ``{"replayed": true}``; an existing one is kept)."""
    conn.execute(text("""INSERT INTO relation (from_object_id, to_object_id, type, provenance)
                         VALUES (:f, :t, :k, '{"replayed": true}'::jsonb) ON CONFLICT DO NOTHING"""),
                 {"f": from_oid, "t": to_oid, "k": kind})

