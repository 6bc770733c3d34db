"""Helpers of the state-machine tests (tests/integration/state_machine/): objects, rows, faults.

Faults are injected into our own stages by replacing a handler in ``ki.stages.STAGE_HANDLERS``
(monkeypatch.setitem); the store is never mocked.
"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.config.loader import set_config_value
from ki.core.taxonomies import MODEL_STAGES, PIPELINE_STAGE_ORDER, stage_bucket
from ki.domain.context import PipelineContext, StageContext, StageOutcome
from ki.orchestration.execute import run_stage_for_object
from ki.store import claims as q

AFTER_FETCH = PIPELINE_STAGE_ORDER[1:]
MODEL_STAGE_LIST = [s for s in PIPELINE_STAGE_ORDER if s in MODEL_STAGES]


def make_source(ctx: PipelineContext, root: Path, n: int, *, prefix: str = "doc") -> list[int]:
    """Write ``n`` small distinct .txt files under ``root``, register and scan; return object ids in order."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"{prefix}{i:03d}.txt").write_text(
            f"Schreiben Nr. {i} an die Mandantschaft.\nVertrag über Lieferung von {i} Einheiten.\n",
            encoding="utf-8",
        )
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    return object_ids(ctx, sid, prefix)


def object_ids(ctx: PipelineContext, source_id: int, prefix: str = "") -> list[int]:
    with ctx.db.engine.connect() as conn:
        return [r.id for r in conn.execute(
            text("SELECT id FROM source_object WHERE source_id = :s AND external_id LIKE :p ORDER BY external_id"),
            {"s": source_id, "p": prefix + "%"},
        )]


def rows(ctx: PipelineContext, oid: int) -> dict[str, dict]:
    """stage → the processing_state row (as a dict) of one object."""
    with ctx.db.engine.connect() as conn:
        result = conn.execute(
            text("SELECT * FROM processing_state WHERE source_object_id = :id"), {"id": oid}
        ).mappings().all()
    return {r["stage"]: dict(r) for r in result}


def all_rows(ctx: PipelineContext) -> list[dict]:
    with ctx.db.engine.connect() as conn:
        return [dict(r) for r in conn.execute(text("SELECT * FROM processing_state")).mappings()]


def buckets(ctx: PipelineContext, oid: int) -> dict[str, str]:
    return {s: stage_bucket(r["status"], r["reason"]) for s, r in rows(ctx, oid).items()}


def configure(ctx: PipelineContext, **values) -> None:
    """Save ``pipeline.*`` edits (``stages__fetch__max_attempts=2`` style keys) and reload."""
    for key, value in values.items():
        set_config_value(ctx.settings.data_dir, "pipeline." + key.replace("__", "."), value)
    ctx.reload_config()


def sql(ctx: PipelineContext, statement: str, **params) -> None:
    with ctx.db.engine.begin() as conn:
        conn.execute(text(statement), params)


def run_all(ctx: PipelineContext, oid: int) -> dict[str, str]:
    """Run every stage of one object in order with run_stage_for_object; stage → result kind."""
    return {s: run_stage_for_object(ctx, s, oid).kind for s in PIPELINE_STAGE_ORDER}


def run_when_due(ctx: PipelineContext, stage: str, oid: int, *, timeout: float = 5.0):
    """Call run_stage_for_object until the row is claimable (its retry fell due)."""
    deadline = time.monotonic() + timeout
    while True:
        result = run_stage_for_object(ctx, stage, oid)
        if result.kind != "not_claimed" or time.monotonic() > deadline:
            return result
        time.sleep(0.01)


def complete_fenced(ctx: PipelineContext, oid: int, stage: str, plan: q.UnlockPlan) -> q.Completion | None:
    """Claim the (object, stage) row and record it done with ``plan`` (q.complete_claim), as the executor does."""
    with ctx.db.engine.begin() as conn:
        claim = q.claim_row(conn, oid, stage, worker=ctx.worker_id, run_id=None)
    assert claim is not None
    with ctx.db.engine.begin() as conn:
        return q.complete_claim(
            conn, claim, status="done", producer_version=ctx.config.pipeline.producer_version(stage),
            last_error=None, unlock=plan,
        )


def raising(exc_factory, *, only: set[int] | None = None, times: int | None = None, then=None):
    """A stage handler that raises ``exc_factory()`` (for objects in ``only``, the first ``times`` calls),
    else delegates to ``then``."""
    calls = itertools.count()
    lock = threading.Lock()

    def handler(sctx: StageContext) -> StageOutcome:
        if only is None or sctx.obj.id in only:
            with lock:
                n = next(calls)
            if times is None or n < times:
                raise exc_factory()
        if then is None:
            return StageOutcome(status="done")
        return then(sctx)

    return handler


def expected_done_buckets() -> dict[str, str]:
    """A document that went all the way in this release: model stages disabled, the rest done."""
    return {s: ("disabled" if s in MODEL_STAGES else "done") for s in PIPELINE_STAGE_ORDER}
