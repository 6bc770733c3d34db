"""Listing quarantined rows and the explicit retry that releases them.

Spec: insertion-pipeline.md "Retry from quarantine": the retry releases the
earliest quarantined stage (a later requested stage would re-run downstream work
on an input that is still missing), resets its attempts (a fresh budget),
invalidates every downstream stage back to waiting, writes the audit log with
the overruled error, and the caller launches a run at once.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ki.context import PipelineContext
from ki.store.audit import record_audit
from ki.store.requeue import release_quarantined
from ki.store.status import quarantine_page
from ki.taxonomies import PIPELINE_STAGE_ORDER


class QuarantineEntry(BaseModel):
    """One quarantined row (GET /api/quarantine shape): path, stage, attempts, error object."""

    source_object_id: int
    path: str
    stage: str
    attempts: int
    error: dict[str, Any]
    updated_at: str


class RetryResponse(BaseModel):
    """What a quarantine retry did (spec: released stage, invalidated stages, max_attempts,
    previous error, whether the original failure was deterministic)."""

    source_object_id: int
    released_stage: str
    requested_stage: str | None
    invalidated_stages: list[str]
    max_attempts: int
    previous_error: dict[str, Any]
    deterministic: bool


def list_quarantine(ctx: PipelineContext, *, limit: int = 1000) -> list[QuarantineEntry]:
    """Quarantined rows, newest first, without tracebacks (they are on the row)."""
    with ctx.db.engine.connect() as conn:
        rows, _ = quarantine_page(conn, limit=limit)
    return [QuarantineEntry(source_object_id=r.source_object_id, path=r.path, stage=r.stage, attempts=r.attempts,
                            error=r.error, updated_at=r.updated_at.isoformat())
            for r in rows]


def retry_quarantined(ctx: PipelineContext, source_object_id: int, *, stage: str | None = None,
                      actor: str = "cli") -> RetryResponse:
    """Release the earliest quarantined stage of an object (see module doc).

    Raises:
        LookupError: the object has no quarantined stage.
        ValueError: ``stage`` is not a pipeline stage.
    """
    if stage is not None and stage not in PIPELINE_STAGE_ORDER:
        raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(PIPELINE_STAGE_ORDER)}")
    with ctx.db.engine.begin() as conn:
        released = release_quarantined(conn, source_object_id, actor=actor)
        if released is None:
            raise LookupError(f"source object {source_object_id} has no quarantined stage")
        previous = released.previous_error
        response = RetryResponse(
            source_object_id=source_object_id,
            released_stage=released.stage,
            requested_stage=stage,
            invalidated_stages=released.invalidated_stages,
            max_attempts=ctx.config.pipeline.stage(released.stage).max_attempts,
            previous_error={k: v for k, v in previous.items() if k != "traceback"},
            deterministic=bool(previous.get("deterministic")),
        )
        reset_provider_cooldowns([previous])
        record_audit(conn, actor=actor, action="quarantine_retry", source_object_id=source_object_id,
                     details={**response.model_dump(), "overruled_error": previous})
    return response


def reset_provider_cooldowns(previous_errors: list[dict[str, Any]]) -> None:
    """After a retry released rows that failed on ``provider_permanent``: the operator says the account
    is fixed, so the gateway and Docling stop failing fast on the old verdict (their cooldowns end)."""
    if any(e.get("reason") == "provider_permanent" for e in previous_errors):
        from ki.agents.gateway import reset_cooldowns
        from ki.convert.docling import reset_cooldown

        reset_cooldowns()
        reset_cooldown()
