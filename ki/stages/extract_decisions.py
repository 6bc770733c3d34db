"""Stage ``extract_decisions`` (console: Extract decisions): tracked changes → one DecisionRecord.

Spec: insertion-pipeline.md "Extract decisions": reads the structured_json artifact's revisions and
comments; no revision evidence → skipped ``no_revision_evidence``; evidence but no extractable decision
(formatting only, or the model finds none) → skipped ``no_decision_evidence``; otherwise one structured
call (the model via ``chat_agent`` without tools when ``KI_LLM_BASE_URL`` is set, else the rules
policy) gives the entries, validated against the shipped taxonomy, and one DecisionRecord is written,
linked to the version pair when Relate has made one. An existing record for the same document and
target version makes the stage a no-op. DESIGN.md "Decisions".
"""

from __future__ import annotations

import json

from ki.domain.context import StageContext, StageOutcome
from ki.domain.decisions.changes import CONTENT_KINDS
from ki.domain.decisions.policy import DecisionRulesPolicy
from ki.domain.decisions.schema import DecisionResult, make_validators
from ki.domain.decisions.taxonomy import rationale_taxonomy
from ki.stages.agentic import run_agent
from ki.store.decisions import existing_record, version_pair, write_record

NO_REVISION_EVIDENCE = "no_revision_evidence"
NO_DECISION_EVIDENCE = "no_decision_evidence"
MAX_PROMPT_REVISIONS = 200

SYSTEM = (
    "You record the negotiation decisions a redlined legal document shows. Each tracked change that moves a "
    "point is one entry: kind (a deletion directly followed by an insertion of the same author is a "
    "replacement), locus (the enclosing clause heading), before/after (quote the deleted/inserted text exactly), "
    "a one-line change summary, the rationale category and generalizability (ids from the taxonomy only), and "
    "the rationale text where a comment gives one (else null). Formatting changes are not decisions. Submit "
    "the answer with submit_result; an empty entries list means the changes decide nothing."
)


def _prompt(ctx: StageContext, body: dict) -> str:
    revisions = [{k: r.get(k) for k in ("kind", "text", "author", "date", "paragraph", "container")}
                 for r in (body.get("revisions") or [])[:MAX_PROMPT_REVISIONS]]
    comments = [{k: c.get(k) for k in ("author", "text", "anchor_text")} for c in (body.get("comments") or [])]
    return json.dumps({"path": ctx.obj.path, "text": (body.get("text") or "")[:20_000], "revisions": revisions,
                       "revision_count": len(body.get("revisions") or []), "comments": comments,
                       "taxonomy": rationale_taxonomy().menu()}, ensure_ascii=False, default=str)


def handle(ctx: StageContext) -> StageOutcome:
    """Extract the decisions of one version, or skip with the reason.

    Raises:
        RetryableStageError: no structured_json artifact yet (convert has not completed).
        ModelOutputInvalid / gateway errors: from the model path (classified by the executor).
    """
    db = ctx.pipeline.db
    content_hash = ctx.obj.content_hash
    body = ctx.structured_json()
    revisions = body.get("revisions") or []
    if not revisions:
        return StageOutcome(status="skipped", reason=NO_REVISION_EVIDENCE)
    with db.engine.connect() as conn:
        pair = version_pair(conn, ctx.obj.id)
        existing = existing_record(conn, ctx.obj.id, content_hash, pair)
    if existing is not None:
        return StageOutcome(status="done", details={"decision_record": existing, "existing": True})
    content = [r for r in revisions if r.get("kind") in CONTENT_KINDS and (r.get("text") or "").strip()]
    if not content:
        return StageOutcome(status="skipped", reason=NO_DECISION_EVIDENCE, details={"revisions": len(revisions)})
    validators = make_validators([r["text"] for r in content if r["kind"] in ("del", "moveFrom")],
                                 [r["text"] for r in content if r["kind"] in ("ins", "moveTo")])
    agent = run_agent(ctx, system=SYSTEM, user=_prompt(ctx, body), tools=[], result_model=DecisionResult,
                      validators=validators, policy=DecisionRulesPolicy(body), max_turns=2)
    result = agent.result
    assert isinstance(result, DecisionResult)
    if not result.entries:
        return StageOutcome(status="skipped", reason=NO_DECISION_EVIDENCE, details={"revisions": len(revisions)})
    provenance = {**agent.provenance, "stage": ctx.stage, "taxonomy": rationale_taxonomy().version,
                  "producer_version": ctx.config.pipeline.producer_version(ctx.stage)}
    with db.engine.begin() as conn:
        record_id, created = write_record(conn, source_object_id=ctx.obj.id, content_hash=content_hash, pair=pair,
                                          result=result, provenance=provenance)
    details = {"decision_record": record_id, "entries": len(result.entries), "created": created}
    if result.entries_omitted:  # beyond the schema's limit: recorded, never the file's fault
        details["entries_omitted"] = result.entries_omitted
    return StageOutcome(status="done", details=details)
