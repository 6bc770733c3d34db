"""Stage ``relate`` (console: Relate): identity, versions, redlines, typed relations and threads of a file.

Spec: insertion-pipeline.md "Relate (relate)" and "Relate: what the model is given". Requires a
matter assignment (RetryableStageError until Classify has run); reads a huge text only within its
bounded window (``pipeline.text_window``, recorded as ``text_window`` in the document version's
provenance); builds the payload (the matter's references and title, the file's path and text, its
tracked-changes digest, e-mail headers, a complete folder listing one level above and below);
decides with the model or the rules policy (same tools: list_folder, search_documents, open_file;
same validators) while holding no transaction or lock; then
:func:`ki.domain.relate.materialize.materialize` re-validates and writes.
"""

from __future__ import annotations

import json
from typing import Any

from ki.core.errors import RetryableStageError
from ki.domain.context import StageContext, StageOutcome
from ki.domain.matters.neighbourhood import neighbourhood
from ki.domain.relate import basis
from ki.domain.relate.facts import FileFacts
from ki.domain.relate.materialize import RelatePlan, materialize
from ki.domain.relate.policy import RelateRulesPolicy
from ki.domain.relate.schema import RelateResult, make_validators
from ki.domain.relate.threads import parent_ids
from ki.domain.relate.tools import RelateTools, mail_headers, oid_of, ref_of, tracked_changes_digest
from ki.domain.relate.wants import Wants
from ki.stages.agentic import run_agent
from ki.store.matters import get_matter, read_assignment
from ki.store.objects import attachments_of, identical_files, messages_of_matter, relative_path
from ki.store.sources import project_of_source

TEXT_CHARS = 60_000

SYSTEM = """You establish a law-firm document's identity and its links to other files of the estate.
Decide: is it a new document, another version or rendition (draft, redline, clean, final, signed, filed) of a \
document already there, or a byte-identical duplicate of another file? If it has tracked changes, which file \
holds the version they were made against? Which files is it an annex of (Anlage K1, Schedule 4, Exhibit A), \
which does it respond to (a reply, a Klageerwiderung answering a Klageschrift), reference (a document cited \
by its date or number, an attachment), or amend (Nachtrag, amendment)?
Use list_folder, search_documents and open_file to look; open every file you cite. Refs in your answer must \
be refs that open_file returned — never paths. E-mail threads are built from the headers; you do not need to \
submit them. Finish by calling submit_result."""


def _related_paths(ctx: StageContext, mail: dict[str, Any] | None,
                   matter_id: int) -> tuple[dict[str, list[str]], set[str]]:
    """Identical-bytes files, messages the headers name (and copies of this one), and own attachments;
    and the content hashes of those files."""
    ids = [i for i in [*(parent_ids(mail) if mail else []), (mail or {}).get("message_id")] if i]
    with ctx.pipeline.db.engine.connect() as conn:
        same = identical_files(conn, ctx.obj.id, ctx.obj.content_hash, ctx.obj.source_id)
        # messages of the same matter (a thread's copies elsewhere are found by their identical bytes)
        messages = messages_of_matter(conn, ctx.obj.id, matter_id, ids) if ids else []
        children = attachments_of(conn, ctx.obj.id)
    hashes = {r.content_hash for r in [*same, *messages, *children] if r.content_hash}
    return {"identical_files": [r.rel for r in same], "messages_named_in_headers": [r.rel for r in messages],
            "attachments": [r.rel for r in children]}, hashes


def handle(ctx: StageContext) -> StageOutcome:
    """Relate the object and materialize the decision.

    Raises:
        RetryableStageError: no structured_json yet; no matter assignment (Classify has not run) or one
            made on older content; drift detected at materialization.
        ModelOutputInvalid / gateway errors: from the model path.
    """
    db = ctx.pipeline.db
    content_hash = ctx.obj.content_hash
    body = ctx.structured_json()
    with db.engine.connect() as conn:
        assignment = read_assignment(conn, ctx.obj.id)
        project_id = project_of_source(conn, ctx.obj.source_id)
        rel_path = relative_path(conn, ctx.obj.id)
        matter = get_matter(conn, assignment.matter_id) if assignment else None
    if assignment is None or matter is None:
        raise RetryableStageError("matter assignment missing: classify_matter has not run for this file yet")
    if assignment.content_hash and assignment.content_hash != content_hash:
        raise RetryableStageError("the matter assignment was made on older content: classify_matter must run again")

    bound = ctx.config.pipeline.text_window
    me = FileFacts.from_artifact(ref=ref_of(ctx.obj.id), path=rel_path, body=body, mtime_ns=ctx.obj.mtime_ns,
                                 content_hash=content_hash, embedded=ctx.obj.parent_id is not None,
                                 matter=matter.reference,
                                 reference_patterns=tuple(ctx.config.firm.matter_reference_patterns),
                                 head_chars=bound.head_chars, tail_chars=bound.tail_chars)
    related, related_hashes = _related_paths(ctx, body.get("mail"), matter.id)
    wants = Wants.of(me, hashes=related_hashes)
    with db.engine.begin() as conn:  # before the matter is listed: a file classified later re-relates this one
        basis.begin(conn, source_object_id=ctx.obj.id, matter_id=matter.id, wants=wants)

    def payload() -> str:
        hood = neighbourhood(db, ctx.obj.source_id, rel_path, up=1, down=1)
        full = body.get("text") or ""
        return json.dumps({
            "matter": {"references": [matter.reference], "title": matter.title}, "path": rel_path, "ref": me.ref,
            "text": full[:TEXT_CHARS], "text_truncated": len(full) > TEXT_CHARS,
            "tracked_changes": tracked_changes_digest(body.get("revisions") or []),
            "email_headers": mail_headers(body.get("mail")),
            "folder_listing": {k: hood[k] for k in ("above", "own", "below")}, **related,
        }, ensure_ascii=False, default=str)

    toolbox = RelateTools(ctx.pipeline, ctx.obj.source_id, project_id, ensure_ready=ctx.ensure_ready)
    extra = [p for group in related.values() for p in group]
    policy = RelateRulesPolicy(me=me, matter=matter.reference, extra_paths=extra, wants=wants)
    result = run_agent(ctx, system=SYSTEM, user=payload,
                       tools=toolbox.tools(), result_model=RelateResult,
                       validators=make_validators(me.ref, content_hash), policy=policy, max_turns=16)
    answer: RelateResult = result.result  # type: ignore[assignment]
    plan = RelatePlan(
        oid=ctx.obj.id, content_hash=content_hash, matter_id=matter.id, project_id=project_id,
        identity=answer.identity, same_as=oid_of(answer.same_as_ref) if answer.same_as_ref else None,
        redline_against=oid_of(answer.redline_against_ref) if answer.redline_against_ref else None,
        relations=[(r.type, oid_of(r.target_ref), r.evidence) for r in answer.relations], facts=me,
        provenance={**result.provenance, "reasoning": answer.reasoning[:500], "text_window": me.window})
    summary = materialize(ctx.pipeline, ctx.claim, plan)
    if answer.relations_omitted:  # beyond the schema's limit: recorded, never the file's fault
        summary = {**summary, "relations_omitted": answer.relations_omitted}
    return StageOutcome(status="done", details=summary)
