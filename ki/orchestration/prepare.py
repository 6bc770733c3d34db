"""Prepare steps run at the start of every run, before anything is claimed.

Spec: insertion-pipeline.md "In-process provider" (prepare steps
requeue_outdated_stages, requeue_newly_enabled_stages, recover_stale_claims) and
DESIGN.md "Quarantine reasons" (capability quarantines are released when
configuration adds the capability).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ki.core.errors import CAPABILITY_REASONS
from ki.core.liveness import dead_here
from ki.core.taxonomies import PIPELINE_STAGE_ORDER
from ki.domain.context import PipelineContext
from ki.domain.ontology.requeue import requeue_ontology_outdated
from ki.store import requeue, stale_claims

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrepareReport:
    """Counts of what the prepare steps changed."""

    outdated_requeued: int = 0
    outdated_parked: int = 0
    enabled_requeued: int = 0
    enabled_parked: int = 0
    stale_recovered: int = 0
    capability_released: int = 0
    ontology_requeued: int = 0


def dead_claim_holders(ctx: PipelineContext) -> list[str]:
    """The ``claimed_by`` of running rows whose process is known dead: on this host, gone or its pid
    reused (``ki.core.liveness``). Other hosts' claims wait for the timeout."""
    with ctx.db.engine.connect() as conn:
        holders = stale_claims.claim_holders(conn)
    return [h.worker for h in holders if h.worker is not None and dead_here(h.worker)]


def recover_stale_claims(ctx: PipelineContext) -> int:
    """Fail (StaleClaim, due now) every running row silent for ``claim_timeout_seconds``, and at once
    every running row held by a dead process of this host (:func:`dead_claim_holders`)."""
    limits = {s: ctx.config.pipeline.stage(s).max_attempts for s in PIPELINE_STAGE_ORDER}
    dead = dead_claim_holders(ctx)
    with ctx.db.engine.begin() as conn:
        n = stale_claims.recover_stale_claims(
            conn, timeout_seconds=ctx.config.pipeline.claim_timeout_seconds, max_attempts=limits, dead_workers=dead
        )
    if n:
        log.warning("recovered %d stale claim(s) (silent > %s s%s)", n, ctx.config.pipeline.claim_timeout_seconds,
                    f", or held by ended process(es) {', '.join(dead)}" if dead else "")
    return n


def requeue_outdated_stages(ctx: PipelineContext) -> tuple[int, int]:
    """Requeue each object's earliest outdated stage and park its downstream. Returns (requeued, parked)."""
    versions = {s: ctx.config.pipeline.producer_version(s) for s in PIPELINE_STAGE_ORDER}
    with ctx.db.engine.begin() as conn:
        return requeue.requeue_outdated_stages(conn, versions)


def requeue_newly_enabled_stages(ctx: PipelineContext) -> tuple[int, int]:
    """Turn ``disabled_by_configuration`` rows of enabled stages back to pending. Returns (requeued, parked)."""
    enabled = [s for s in PIPELINE_STAGE_ORDER if ctx.config.pipeline.stage(s).enabled]
    with ctx.db.engine.begin() as conn:
        return requeue.requeue_newly_enabled_stages(conn, enabled)


def release_capability_quarantines(ctx: PipelineContext) -> int:
    """Release ``needs_ocr`` / ``needs_converter`` / ``unsupported_format`` quarantines whose converter set has grown.

    A row is released when the capabilities recorded at quarantine time do not
    include every capability available now, and now some converter handles that
    reason. Returns rows released (fresh attempt budget, pending). Without any capability quarantine
    nothing is probed (finding out whether OCR works imports onnxruntime: ~0.3 s of every restart).
    """
    from ki.adapters.convert.router import capabilities, handles_reason

    with ctx.db.engine.connect() as conn:
        if not requeue.capability_quarantines_exist(conn, sorted(CAPABILITY_REASONS)):
            return 0
    current = sorted(capabilities(ctx.config))
    reasons = [r for r in CAPABILITY_REASONS if handles_reason(ctx.config, r)]
    if not reasons:
        return 0
    with ctx.db.engine.begin() as conn:
        n = requeue.release_capability_quarantines(conn, reasons=reasons, current=current)
    if n:
        log.info("released %d quarantined row(s): a converter for them is now configured", n)
    return n


def run_prepare_steps(ctx: PipelineContext) -> PrepareReport:
    """All prepare steps in the spec's order; returns what they changed."""
    outdated = requeue_outdated_stages(ctx)
    enabled = requeue_newly_enabled_stages(ctx)
    stale = recover_stale_claims(ctx)
    released = release_capability_quarantines(ctx)
    ontology = requeue_ontology_outdated(ctx)
    return PrepareReport(outdated[0], outdated[1], enabled[0], enabled[1], stale, released, ontology[0])
