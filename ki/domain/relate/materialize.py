"""Writing a relate decision: sorted file locks, re-validation, documents, relations, threads, parked intents.

Spec: insertion-pipeline.md "Relate": "The model call runs with no database transaction or lock
open; afterwards the stage takes sorted per-file advisory locks on every file it will write,
re-validates that the claim, content hash, and matter assignment are unchanged (any drift raises a
retryable error), and materializes the result: Document and DocumentVersion rows, supersedes
edges, redline_against pointers, Relation rows, and CommunicationThread membership. Decisions whose
target file has no matter assignment yet are parked as RelationIntent rows". "Failure modes": a
file whose content changes mid-relate is retried against the new state.

Lock order, so two files that reference each other cannot deadlock: file locks first (blocking,
sorted by object id), then the matter's relate lock shared (:func:`ki.domain.relate.basis.hold`), then
document locks (try-locks; a held one rolls the transaction back and the materialization retries),
then the per-project thread lock (blocking, always last).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

from ki.core.errors import Contended, RetryableStageError
from ki.domain.context import PipelineContext
from ki.domain.relate import basis
from ki.domain.relate.documents import ensure_row, lock_documents, reorder, version_facts
from ki.domain.relate.facts import FileFacts
from ki.domain.relate.thread_store import attach_message
from ki.store.claims import Claim, claim_held
from ki.store.documents import (
    clear_duplicate_of,
    create_document,
    documents_of,
    drop_if_empty,
    duplicate_root,
    fold,
    other_versions,
    recorded_identity,
    upsert_version,
)
from ki.store.relations import (
    add_relation,
    assignment_row,
    assignments_of,
    clear_decision,
    lock_relate_file,
    object_state,
    park,
)

MAX_CONTENDED_ROUNDS = 40


@dataclass
class RelatePlan:
    """A validated relate decision in object ids.

    Attributes:
        oid / content_hash / matter_id / project_id: the file as it was when the agent started.
        identity: ``new``, ``version`` or ``duplicate``; ``same_as``: the other file (or None).
        redline_against: the base version's object, or None.
        relations: ``(type, target object id, evidence)``.
        facts: the file's facts (version key, label, rendition, mail headers).
        provenance: trace id, model, turns, reasoning.
    """

    oid: int
    content_hash: str
    matter_id: int
    project_id: int
    identity: str
    same_as: int | None
    redline_against: int | None
    relations: list[tuple[str, int, str]]
    facts: FileFacts
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def targets(self) -> set[int]:
        """Every other object the decision names."""
        out = {t for _, t, _ in self.relations}
        out |= {o for o in (self.same_as, self.redline_against) if o is not None}
        out.discard(self.oid)
        return out


def lock_files(conn: Connection, oids: set[int]) -> None:
    """Transaction-level advisory locks on the files, in ascending id order (blocking)."""
    for oid in sorted(oids):
        lock_relate_file(conn, oid)


def _revalidate(conn: Connection, claim: Claim | None, plan: RelatePlan) -> None:
    if claim is not None:
        if not claim_held(conn, claim):
            raise RetryableStageError("the relate claim was lost while the agent ran; nothing was written")
    row = object_state(conn, plan.oid)
    if row is None or row.deleted_at is not None:
        raise RetryableStageError("the file was deleted while relate ran")
    if row.content_hash != plan.content_hash:
        raise RetryableStageError(f"the file's content changed while relate ran ({plan.content_hash[:12]} → "
                                  f"{(row.content_hash or '')[:12]}); relating again against the new content")
    ma = assignment_row(conn, plan.oid)
    if ma is None or ma.matter_id != plan.matter_id or (ma.content_hash and ma.content_hash != plan.content_hash):
        raise RetryableStageError("the file's matter assignment changed while relate ran; relating again")


def materialize(ctx: PipelineContext, claim: Claim | None, plan: RelatePlan) -> dict[str, Any]:
    """Write ``plan`` in one transaction under the locks described in the module docstring.

    Returns: a summary ``{document_id, relations, parked, thread_id}``.
    Raises: RetryableStageError on drift (claim, content hash, matter assignment) or when documents
        stay contended for :data:`MAX_CONTENDED_ROUNDS` rounds.
    """
    for round_no in range(MAX_CONTENDED_ROUNDS):
        try:
            with ctx.db.engine.begin() as conn:
                return _apply(conn, claim, plan)
        except Contended:
            time.sleep(random.uniform(0.005, 0.03) * (1 + round_no))
    raise RetryableStageError("the documents this file belongs to stayed locked by other workers; retrying later")


def _apply(conn: Connection, claim: Claim | None, plan: RelatePlan) -> dict[str, Any]:
    lock_files(conn, {plan.oid} | plan.targets)
    basis.hold(conn, plan.matter_id)  # a classification into the matter waits, or has requeued this relate
    _revalidate(conn, claim, plan)
    assigned = assignments_of(conn, plan.targets)
    original = plan.same_as
    if plan.identity == "duplicate" and original in assigned:
        root = duplicate_root(conn, original)
        if root is not None and root != plan.oid:
            original = root
    involved = {plan.oid} | set(assigned) | ({original} if original else set())
    docs = documents_of(conn, involved)
    lock_documents(conn, set(docs.values()))
    if documents_of(conn, involved) != docs:
        raise Contended("a document changed between reading and locking")

    clear_decision(conn, plan.oid)
    parked: list[tuple[str, int]] = []
    cur_doc = docs.get(plan.oid)
    target_doc = None
    duplicate_of = None
    if plan.identity in ("version", "duplicate") and plan.same_as is not None:
        if plan.same_as in assigned:
            target_doc = docs.get(original) or ensure_row(conn, original, matter_id=assigned.get(original))
            if plan.identity == "duplicate":
                duplicate_of = original
                clear_duplicate_of(conn, original, plan.oid)
        else:
            parked.append(("duplicate_of" if plan.identity == "duplicate" else "version_of", plan.same_as))
    if target_doc is None and cur_doc is not None and plan.identity == "new" and not parked:
        before = recorded_identity(conn, plan.oid)
        others = other_versions(conn, cur_doc, plan.oid)
        if before in ("version", "duplicate") and others:
            cur_doc = None  # it joined that document by its own earlier decision, which it now withdraws
    doc = target_doc or cur_doc or create_document(conn, matter_id=plan.matter_id, title=plan.facts.title or None)
    if cur_doc is not None and cur_doc != doc:
        fold(conn, cur_doc, doc)
    redline = None
    if plan.redline_against is not None:
        if plan.redline_against in assigned:
            redline = plan.redline_against
            r_doc = docs.get(redline) or ensure_row(conn, redline, matter_id=assigned[redline])
            if r_doc != doc:
                fold(conn, r_doc, doc)
        else:
            parked.append(("redline_against", plan.redline_against))
    upsert_version(conn, oid=plan.oid, document_id=doc, content_hash=plan.content_hash,
                   facts=version_facts(plan.facts), duplicate_of=duplicate_of, redline_against=redline,
                   provenance={**plan.provenance, "identity": plan.identity})
    reorder(conn, doc)
    written = 0
    responds_to = None
    for kind, target, evidence in plan.relations:
        if target == plan.oid:
            continue
        if target not in assigned:
            parked.append((kind, target))
            continue
        add_relation(conn, plan.oid, target, kind, {**plan.provenance, "evidence": evidence[:500]})
        written += 1
        if kind == "responds_to":
            responds_to = target
    for kind, target in parked:
        park(conn, from_oid=plan.oid, to_oid=target, kind=kind, content_hash=plan.content_hash,
             payload={"trace_id": plan.provenance.get("trace_id")})
    for old in {d for d in docs.values() if d != doc}:
        drop_if_empty(conn, old)
        reorder(conn, old)
    thread_id = None
    if plan.facts.mail is not None:
        thread_id = attach_message(conn, oid=plan.oid, project_id=plan.project_id, matter_id=plan.matter_id,
                                   mail=plan.facts.mail, parent_oid=responds_to)
    return {"document_id": doc, "identity": plan.identity, "relations": written, "parked": len(parked),
            "thread_id": thread_id}
