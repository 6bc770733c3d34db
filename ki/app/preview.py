"""The "Re-run all files" preview of a stage: how many files, which stages follow, spend, estimates.

Spec: insertion-pipeline.md "The console page" (the dialog states how many files re-run, which
downstream stages re-run too, and the stage's realized model spend so far) and "What save re-runs
and what it does not" (the count covers rows in the done, skipped and disabled buckets; waiting rows
have not been reached). A bumped ``rerun_token`` requeues the stage and parks every later stage
(``requeue_outdated_stages``), so each enabled later stage runs again for the same files.

Estimates: cost = per stage, billable executions × the ledger's tokens per document ×
the price of the model the stage is assigned now (:mod:`ki.app.catalog`); work whose result is
cached by content hash whatever the version (:data:`CONTENT_CACHED`) costs nothing. Duration =
stage executions ÷ the stage-execution rate of recent completed runs.
"""

from __future__ import annotations

from decimal import Decimal

from ki.app.catalog import gateway_models, stage_entry
from ki.app.views import RerunPreview, StageEstimate
from ki.config.settings import KiConfig
from ki.core.taxonomies import MODEL_STAGES, PIPELINE_STAGE_ORDER, STAGE_CONSOLE_NAMES
from ki.domain.context import PipelineContext
from ki.orchestration.budget import estimate_against_budget, remaining_for_a_run
from ki.store.runs import recent_rate
from ki.store.status import bucket_counts, rerun_counts
from ki.store.usage import SpendRow, spend_by

#: Stages whose paid work is keyed by content hash, not by version: a re-run finds it done.
CONTENT_CACHED: dict[str, str] = {
    "convert": "the structured_json artifact of each content is reused (Docling is not called again)",
    "index": "embeddings are cached per chunk content (nothing is embedded again)",
}


_NO_MODEL = {"rules": "offline rules: no model call", "local": "local model: no cost", "none": "no embeddings"}


def _estimate(stage: str, executions: int, spend: SpendRow | None, config: KiConfig, models) -> StageEstimate:
    hits = executions if stage in CONTENT_CACHED else 0
    billable = executions - hits
    entry = stage_entry(config, stage, models) if stage in MODEL_STAGES or stage == "index" else None
    calls_model = entry is not None and entry.kind == "gateway"
    if not calls_model:
        fallback = _NO_MODEL.get(entry.kind, entry.reason or "") if entry else "no model call"
        basis = CONTENT_CACHED.get(stage) or fallback
        return StageEstimate(stage=stage, executions=executions, cache_hits=hits, tokens_per_document=None,
                             cost_usd=0.0, basis=basis)
    if billable == 0:
        return StageEstimate(stage=stage, executions=executions, cache_hits=hits, tokens_per_document=None,
                             cost_usd=0.0, basis=CONTENT_CACHED.get(stage, "nothing to bill"))
    if spend is None or spend.documents == 0:
        return StageEstimate(stage=stage, executions=executions, cache_hits=hits, tokens_per_document=None,
                             cost_usd=None, basis="no usage recorded for this stage yet: tokens per document unknown")
    docs = Decimal(spend.documents)
    prompt, completion = Decimal(spend.prompt_tokens) / docs, Decimal(spend.completion_tokens) / docs
    per_doc_tokens = float(prompt + completion)
    if entry.input_usd_per_million is None:
        return StageEstimate(stage=stage, executions=executions, cache_hits=hits, tokens_per_document=per_doc_tokens,
                             cost_usd=None, basis=entry.reason or f"no price for {entry.alias}")
    price_in = Decimal(str(entry.input_usd_per_million))
    price_out = Decimal(str(entry.output_usd_per_million or 0))
    cost = (prompt * price_in + completion * price_out) / Decimal(1_000_000) * billable
    model = entry.resolved or entry.alias
    return StageEstimate(stage=stage, executions=executions, cache_hits=hits, tokens_per_document=per_doc_tokens,
                         cost_usd=float(cost), basis=f"{per_doc_tokens:,.0f} tokens per document so far "
                                                     f"× {model} at ${price_in}/${price_out} per million")


def rerun_preview(ctx: PipelineContext, config: KiConfig, stage: str) -> RerunPreview:
    """The preview of "Re-run all files" for ``stage`` (see module doc). Raises KeyError for an unknown stage."""
    index = PIPELINE_STAGE_ORDER.index(stage)
    downstream = [s for s in PIPELINE_STAGE_ORDER[index + 1:] if config.pipeline.stage(s).enabled]
    with ctx.db.engine.connect() as conn:
        files, _contents = rerun_counts(conn, stage)
        buckets = bucket_counts(conn)[stage]
        spend = {r.key: r for r in spend_by(conn, "stage")}
        rate = recent_rate(conn)
        remaining = remaining_for_a_run(conn, config)
    models = gateway_models()
    per_stage = [_estimate(s, files, spend.get(s), config, models) for s in [stage, *downstream]]
    costs = [e.cost_usd for e in per_stage]
    executions = sum(e.executions for e in per_stage)
    notes = []
    if rate is None:
        notes.append("no completed run yet: the duration cannot be estimated")
    if any(c is None for c in costs):
        notes.append("the cost is unknown for " + ", ".join(STAGE_CONSOLE_NAMES[e.stage] for e in per_stage
                                                            if e.cost_usd is None))
    own = spend.get(stage)
    estimate = None if any(c is None for c in costs) else float(sum(c for c in costs if c is not None))
    return RerunPreview(
        stage=stage, name=STAGE_CONSOLE_NAMES[stage], files=files,
        buckets={b: buckets[b] for b in ("done", "skipped", "disabled")}, downstream_stages=downstream,
        spent_usd=float(own.cost_usd) if own else 0.0, spent_calls=own.calls if own else 0,
        estimate_usd=estimate, budget_remaining_usd=remaining,
        budget_note=estimate_against_budget(estimate, remaining),
        estimate_seconds=executions / rate if rate and executions else (0.0 if not executions else None),
        per_stage=per_stage, notes=notes)
