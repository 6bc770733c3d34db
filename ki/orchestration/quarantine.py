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

from ki.core.taxonomies import PIPELINE_STAGE_ORDER
from ki.domain.context import PipelineContext
from ki.store.audit import record_audit
from ki.store.requeue import release_quarantined
from ki.store.status import object_rows, quarantine_page


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
    note: str | None = None


class NoSuchObject(LookupError):
    """A quarantine retry named a source object id that does not exist."""

    def __init__(self, source_object_id: int):
        super().__init__(f"no such object: {source_object_id} (`ki quarantine list` shows the quarantined "
                         "files and their ids)")
        self.source_object_id = source_object_id


def released_instead(source_object_id: int, requested: str, released: str, requested_bucket: str | None) -> str:
    """One line: why the retry released ``released`` when ``requested`` was asked for (spec: the retry
    releases the earliest quarantined stage; a later stage would run on an input that is still missing)."""
    order = PIPELINE_STAGE_ORDER
    if order.index(requested) > order.index(released):
        why = (f"{released} is the earliest quarantined stage of object {source_object_id}; {requested} needs its "
               "output and runs after it")
    else:
        why = (f"{requested} of object {source_object_id} is {requested_bucket or 'not there'}, not quarantined; "
               f"{released} is its quarantined stage")
    return f"released {released} instead of {requested}: {why}"


def list_quarantine(ctx: PipelineContext, *, limit: int = 1000) -> list[QuarantineEntry]:
    """Quarantined rows, newest first, without tracebacks (they are on the row)."""
    return quarantine_entries(ctx, limit=limit)[0]


def quarantine_entries(ctx: PipelineContext, *, limit: int = 1000, source_id: int | None = None,
                       run_id: int | None = None) -> tuple[list[QuarantineEntry], int]:
    """``(newest quarantined rows up to limit, how many match)``, of one source (``source_id``) and
    one run (``run_id``: rows its claims quarantined) when given; no tracebacks (they are on the row)."""
    with ctx.db.engine.connect() as conn:
        rows, total = quarantine_page(conn, limit=limit, source_id=source_id, run_id=run_id)
    return [QuarantineEntry(source_object_id=r.source_object_id, path=r.path, stage=r.stage, attempts=r.attempts,
                            error=r.error, updated_at=r.updated_at.isoformat())
            for r in rows], total


def retry_quarantined(ctx: PipelineContext, source_object_id: int, *, stage: str | None = None,
                      actor: str = "cli") -> RetryResponse:
    """Release the earliest quarantined stage of an object (see module doc).

    ``stage`` names the stage the caller wanted released; when another one is released the response's
    ``note`` says which and why (:func:`released_instead`).

    Raises:
        NoSuchObject: no source object has this id (nothing is written).
        LookupError: the object has no quarantined stage (nothing is written).
        ValueError: ``stage`` is not a pipeline stage.
    """
    if stage is not None and stage not in PIPELINE_STAGE_ORDER:
        raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(PIPELINE_STAGE_ORDER)}")
    with ctx.db.engine.begin() as conn:
        path, rows = object_rows(conn, source_object_id)
        if path is None:
            raise NoSuchObject(source_object_id)
        released = release_quarantined(conn, source_object_id, actor=actor)
        if released is None:
            raise LookupError(f"source object {source_object_id} has no quarantined stage")
        previous = released.previous_error
        buckets = {r.stage: r.bucket for r in rows}
        response = RetryResponse(
            source_object_id=source_object_id,
            released_stage=released.stage,
            requested_stage=stage,
            invalidated_stages=released.invalidated_stages,
            max_attempts=ctx.config.pipeline.stage(released.stage).max_attempts,
            previous_error={k: v for k, v in previous.items() if k != "traceback"},
            deterministic=bool(previous.get("deterministic")),
            note=None if stage in (None, released.stage) else
            released_instead(source_object_id, stage, released.stage, buckets.get(stage)),
        )
        reset_provider_cooldowns([previous])
        record_audit(conn, actor=actor, action="quarantine_retry", source_object_id=source_object_id,
                     details={**response.model_dump(), "overruled_error": previous})
    return response


def reset_provider_cooldowns(previous_errors: list[dict[str, Any]]) -> None:
    """After a retry released rows that failed on ``provider_permanent``: the operator says the account
    is fixed, so the gateway and Docling stop failing fast on the old verdict (their cooldowns end)."""
    if any(e.get("reason") == "provider_permanent" for e in previous_errors):
        from ki.adapters.agents.gateway import reset_cooldowns
        from ki.adapters.convert.docling import reset_cooldown

        reset_cooldowns()
        reset_cooldown()
