"""Replaying parked relation intents when their target file classifies.

Spec: insertion-pipeline.md "Classify" ("replays any relation intents other files had parked
against this one") and "Relate" ("Decisions whose target file has no matter assignment yet are
parked as RelationIntent rows and replayed when that file classifies"). An intent whose source
changed since (another content hash) or lost its assignment is dropped: that file relates again.
"""

from __future__ import annotations

import random
import time

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.core.errors import Contended
from ki.domain.context import PipelineContext
from ki.domain.relate.documents import documents_of, ensure_row, fold, lock_documents, reorder
from ki.domain.relate.materialize import MAX_CONTENDED_ROUNDS, assignments_of, lock_files
from ki.domain.relate.schema import RELATION_TYPES


def replay_intents(ctx: PipelineContext, target_oid: int) -> int:
    """Apply every intent parked against ``target_oid``; returns how many were applied."""
    with ctx.db.engine.connect() as conn:
        ids = [r.id for r in conn.execute(text("SELECT id FROM relation_intent WHERE to_object_id = :t ORDER BY id"),
                                          {"t": target_oid})]
    applied = 0
    for intent_id in ids:
        for round_no in range(MAX_CONTENDED_ROUNDS):
            try:
                with ctx.db.engine.begin() as conn:
                    applied += _apply_one(conn, intent_id)
                break
            except Contended:
                time.sleep(random.uniform(0.005, 0.03) * (1 + round_no))
    return applied


def _apply_one(conn: Connection, intent_id: int) -> int:
    row = conn.execute(text("SELECT from_object_id, to_object_id, kind, from_content_hash FROM relation_intent "
                            "WHERE id = :i"), {"i": intent_id}).first()
    if row is None:
        return 0  # applied or replaced meanwhile
    src, dst = row.from_object_id, row.to_object_id
    lock_files(conn, {src, dst})
    current = conn.execute(text("SELECT content_hash FROM source_object WHERE id = :o AND deleted_at IS NULL"),
                           {"o": src}).scalar()
    assigned = assignments_of(conn, {src, dst})
    if current != row.from_content_hash or src not in assigned:
        conn.execute(text("DELETE FROM relation_intent WHERE id = :i"), {"i": intent_id})
        return 0
    if dst not in assigned:
        return 0  # still unassigned (the target's assignment was rolled back): keep parked
    if row.kind in RELATION_TYPES:
        conn.execute(text("""INSERT INTO relation (from_object_id, to_object_id, type, provenance)
                             VALUES (:f, :t, :k, '{"replayed": true}'::jsonb) ON CONFLICT DO NOTHING"""),
                     {"f": src, "t": dst, "k": row.kind})
    else:
        docs = documents_of(conn, {src, dst})
        lock_documents(conn, set(docs.values()))
        if documents_of(conn, {src, dst}) != docs:
            raise Contended("a document changed between reading and locking")
        survivor = docs.get(dst) or ensure_row(conn, dst, matter_id=assigned[dst])
        abandoned = docs.get(src) or ensure_row(conn, src, matter_id=assigned[src])
        fold(conn, abandoned, survivor)
        if row.kind == "duplicate_of":
            conn.execute(text("UPDATE document_version SET duplicate_of = :t WHERE source_object_id = :o"),
                         {"t": dst, "o": src})
        elif row.kind == "redline_against":
            conn.execute(text("UPDATE document_version SET redline_against = :t WHERE source_object_id = :o"),
                         {"t": dst, "o": src})
        reorder(conn, survivor)
    conn.execute(text("DELETE FROM relation_intent WHERE id = :i"), {"i": intent_id})
    return 1
