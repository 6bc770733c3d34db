"""Replaying parked relation intents when their target file classifies.

Spec: insertion-pipeline.md "Classify" ("replays any relation intents other files had parked
against this one") and "Relate" ("Decisions whose target file has no matter assignment yet are
parked as RelationIntent rows and replayed when that file classifies"). An intent whose source
changed since (another content hash) or lost its assignment is dropped: that file relates again.
"""

from __future__ import annotations

import random
import time

from sqlalchemy.engine import Connection

from ki.core.errors import Contended
from ki.domain.context import PipelineContext
from ki.domain.relate.documents import ensure_row, lock_documents, reorder
from ki.domain.relate.materialize import MAX_CONTENDED_ROUNDS, lock_files
from ki.domain.relate.schema import RELATION_TYPES
from ki.store.documents import documents_of, fold, set_duplicate_of, set_redline_against
from ki.store.relations import (
    add_replayed_relation,
    assignments_of,
    drop_intent,
    intent_row,
    intents_for,
    live_content_hash,
)


def replay_intents(ctx: PipelineContext, target_oid: int) -> int:
    """Apply every intent parked against ``target_oid``; returns how many were applied."""
    with ctx.db.engine.connect() as conn:
        ids = intents_for(conn, target_oid)
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
    row = intent_row(conn, intent_id)
    if row is None:
        return 0  # applied or replaced meanwhile
    src, dst = row.from_object_id, row.to_object_id
    lock_files(conn, {src, dst})
    current = live_content_hash(conn, src)
    assigned = assignments_of(conn, {src, dst})
    if current != row.from_content_hash or src not in assigned:
        drop_intent(conn, intent_id)
        return 0
    if dst not in assigned:
        return 0  # still unassigned (the target's assignment was rolled back): keep parked
    if row.kind in RELATION_TYPES:
        add_replayed_relation(conn, src, dst, row.kind)
    else:
        docs = documents_of(conn, {src, dst})
        lock_documents(conn, set(docs.values()))
        if documents_of(conn, {src, dst}) != docs:
            raise Contended("a document changed between reading and locking")
        survivor = docs.get(dst) or ensure_row(conn, dst, matter_id=assigned[dst])
        abandoned = docs.get(src) or ensure_row(conn, src, matter_id=assigned[src])
        fold(conn, abandoned, survivor)
        if row.kind == "duplicate_of":
            set_duplicate_of(conn, src, dst)
        elif row.kind == "redline_against":
            set_redline_against(conn, src, dst)
        reorder(conn, survivor)
    drop_intent(conn, intent_id)
    return 1
