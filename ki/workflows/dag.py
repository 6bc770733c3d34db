"""ki's Hatchet workflows, declared in one place: the per-document DAG, the access refresh, the sync.

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider; concurrency variables).

The document DAG (workflow ``ki-insertion``), one visible task per stage, derived from
``PIPELINE_STAGE_ORDER`` (every task after ``convert`` also names ``fetch`` as a parent: see
"skipped stages" below)::

    fetch → convert → classify_matter → relate → extract_metadata → extract_decisions → index
                                          │                                              │
                          task concurrency 'relate' ≤ KI_RELATE_MODEL_CONCURRENCY        └ final task:
                                                                                           finishes the
    workflow concurrency: key input.batch_id, ≤ KI_HATCHET_DOCUMENT_CONCURRENCY DAGs        document in
    per batch, GROUP_ROUND_ROBIN between batches                                            its batch
    (a DAG the sweeper re-triggers for a stalled document: key batch_id + attempt)
    idempotency: key input.batch_id + ':' + input.doc_id + ':' + input.attempt (status based)
    every task: 6 retries, backoff factor 5 capped at 60 s, 6 h schedule and execution timeouts
    on failure: the document is recorded as orchestration_failed in its batch

Skipped stages: ``fetch`` (the root task) outputs which stages the configuration switches off,
and the engine skips those stage tasks (``skip_if`` on that output; never the final task), so a
switched-off stage costs no worker round trip. A skip waits for the task's predecessor to end
(completed or itself skipped: a second skip condition on it), so the DAG keeps its stage order;
measured on v0.105.0, a lone condition on the root skips the task the moment the root completes,
and the final task then ran beside ``convert``. Its rows are not left behind: the next task that
runs drives every unfinished earlier row of its document first (``task.drive_stage``), which
records them ``disabled_by_configuration`` exactly as the local runner does.

The access refresh (workflow ``ki-access-refresh``, run ledger label "Access refresh"): one task,
``index``, for a batch whose only outstanding rows are ``access_only_reindex`` index rows; the
index handler then rewrites only the permission fields.

The stable idempotency key matters because the SDK splits a bulk trigger into several
non-atomic RPCs that tenacity may resend: a resent item collides on its key instead of starting
a second DAG (``create_bulk_run_item(key=…)`` never reaches the engine at SDK 1.43.1). The row
claim stays the real idempotency boundary.

The sync workflow (``ki-sync``): one task, ``scan`` (:func:`ki.workflows.sync.run_sync`), with a
constant concurrency key ``'sync'`` capped at ``KI_HATCHET_SYNC_CONCURRENCY``.

Nothing here runs at import: :func:`build_workflows` declares the workflows on a client, so both
``ki worker`` (which registers them) and the trigger get the same shapes (:func:`ki_workflows` caches
them per client). The task bodies are :mod:`ki.workflows.task` and :mod:`ki.workflows.sync`.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ki.taxonomies import PIPELINE_STAGE_ORDER
from ki.workflows.inputs import DocumentInput, SyncInput

if TYPE_CHECKING:
    from hatchet_sdk import Hatchet

    from ki.config.loader import ProcessSettings

DOCUMENT_WORKFLOW = "ki-insertion"
ACCESS_REFRESH_WORKFLOW = "ki-access-refresh"
FINAL_STAGE = PIPELINE_STAGE_ORDER[-1]

TASK_RETRIES = 6
TASK_BACKOFF_FACTOR = 5.0
TASK_BACKOFF_MAX_SECONDS = 60
TASK_TIMEOUT = timedelta(hours=6)
#: Keys stay reserved this long after their run ended (status-based idempotency falls back to it).
IDEMPOTENCY_FALLBACK_TTL = timedelta(hours=7)
IDEMPOTENCY_KEY_EXPRESSION = "input.batch_id + ':' + input.doc_id + ':' + input.attempt"
#: The DAG concurrency group: the batch (a superseding replacement gets a group of its own, see
#: ``trigger.supersede_stalled``, so slots an engine restart leaked cannot hold it back).
BATCH_KEY_EXPRESSION = "input.batch_id + input.attempt"
RELATE_KEY_EXPRESSION = "'relate'"
SYNC_WORKFLOW = "ki-sync"
SYNC_KEY_EXPRESSION = "'sync'"

#: The DAG as (stage, parent) pairs: each stage waits for the one before it.
DAG: tuple[tuple[str, str | None], ...] = tuple(
    (stage, PIPELINE_STAGE_ORDER[i - 1] if i else None) for i, stage in enumerate(PIPELINE_STAGE_ORDER)
)


@dataclass(frozen=True)
class KiWorkflows:
    """The declared workflows (SDK ``Workflow`` objects) of one client."""

    document: Any
    access_refresh: Any
    sync: Any

    def all(self) -> list[Any]:
        return [self.document, self.access_refresh, self.sync]


def _task_options() -> dict[str, Any]:
    return {"retries": TASK_RETRIES, "backoff_factor": TASK_BACKOFF_FACTOR,
            "backoff_max_seconds": TASK_BACKOFF_MAX_SECONDS, "schedule_timeout": TASK_TIMEOUT,
            "execution_timeout": TASK_TIMEOUT}


def _stage_fn(stage: str, *, final: bool, skippable: tuple[str, ...] = ()):
    def run(inp: DocumentInput, ctx) -> dict[str, Any]:
        from hatchet_sdk import NonRetryableException

        from ki.errors import RunAborted
        from ki.workflows.task import stage_task, worker_runtime

        try:
            out = stage_task(stage, inp.run_id, inp.source_object_id, final=final,
                             cancelled=lambda: ctx.exit_flag)
        except RunAborted as exc:  # ki's own configuration is wrong: retrying the task cannot help
            raise NonRetryableException(str(exc)) from exc
        if skippable:  # the root task tells the engine which stage tasks it may skip
            out["skip"] = worker_runtime().skipped_stages(skippable)
        return out

    run.__name__ = f"ki_{stage}"
    return run


def _failure_fn(inp: DocumentInput, ctx) -> dict[str, Any]:
    from ki.workflows.task import failure_hook

    try:
        errors = dict(ctx.task_run_errors)
    except Exception:  # noqa: BLE001 - the hook must record the end even without the error text
        errors = {}
    return failure_hook(inp.run_id, inp.source_object_id, errors, workflow_run_id=ctx.workflow_run_id)


def _document_workflow(hatchet: Hatchet, name: str, settings: ProcessSettings, stages: tuple[str, ...]) -> Any:
    from hatchet_sdk import (
        ConcurrencyExpression,
        ConcurrencyLimitStrategy,
        StatusBasedIdempotencyConfig,
        TaskDefaults,
    )

    wf = hatchet.workflow(
        name=name,
        input_validator=DocumentInput,
        concurrency=ConcurrencyExpression(expression=BATCH_KEY_EXPRESSION,
                                          max_runs=settings.hatchet_document_concurrency,
                                          limit_strategy=ConcurrencyLimitStrategy.GROUP_ROUND_ROBIN),
        task_defaults=TaskDefaults(**_task_options()),
        idempotency=StatusBasedIdempotencyConfig(key_expression=IDEMPOTENCY_KEY_EXPRESSION,
                                                 fallback_ttl=IDEMPOTENCY_FALLBACK_TTL),
    )
    from hatchet_sdk import ParentCondition

    skippable = stages[1:-1]  # never the root (it decides) nor the final task (it finishes the document)
    root = parent = None
    for stage in stages:
        concurrency = None
        if stage == "relate":
            concurrency = [ConcurrencyExpression(expression=RELATE_KEY_EXPRESSION,
                                                 max_runs=settings.relate_model_concurrency,
                                                 limit_strategy=ConcurrencyLimitStrategy.GROUP_ROUND_ROBIN)]
        parents = [] if parent is None else [parent] if parent is root else [parent, root]
        skip_if = None
        if stage in skippable:
            # Separate conditions are AND-ed by the engine (one or-group each). Without the second
            # one the engine skips the task as soon as the root completes, before its predecessor
            # ran, and a later task (e.g. the final one) would then start beside that predecessor.
            skip_if = [ParentCondition(parent=root, expression=f"output.skip.{stage}")]
            if parent is not root:
                skip_if.append(ParentCondition(parent=parent, expression="true"))
        fn = _stage_fn(stage, final=stage == stages[-1], skippable=skippable if root is None else ())
        parent = wf.task(name=stage, parents=parents or None, concurrency=concurrency, skip_if=skip_if,
                         **_task_options())(fn)
        root = root or parent
    wf.on_failure_task(name="record_failure", retries=TASK_RETRIES, backoff_factor=TASK_BACKOFF_FACTOR,
                       backoff_max_seconds=TASK_BACKOFF_MAX_SECONDS, schedule_timeout=TASK_TIMEOUT,
                       execution_timeout=timedelta(minutes=5))(_failure_fn)
    return wf


def sync_workflow(hatchet: Hatchet, settings: ProcessSettings) -> Any:
    """Declare ``ki-sync`` on ``hatchet`` (one ``scan`` task, ≤ KI_HATCHET_SYNC_CONCURRENCY at once)."""
    from hatchet_sdk import ConcurrencyExpression, ConcurrencyLimitStrategy

    wf = hatchet.workflow(name=SYNC_WORKFLOW, input_validator=SyncInput)

    def scan(inp: SyncInput, ctx) -> dict[str, Any]:
        from ki.workflows.sync import run_sync

        return run_sync(int(inp.run_id), int(inp.source_id), inp)

    wf.task(name="scan", retries=2, backoff_factor=5.0, backoff_max_seconds=60, schedule_timeout=TASK_TIMEOUT,
            execution_timeout=TASK_TIMEOUT,
            concurrency=[ConcurrencyExpression(expression=SYNC_KEY_EXPRESSION,
                                               max_runs=settings.hatchet_sync_concurrency,
                                               limit_strategy=ConcurrencyLimitStrategy.GROUP_ROUND_ROBIN)])(scan)
    return wf


def build_workflows(hatchet: Hatchet, settings: ProcessSettings) -> KiWorkflows:
    """Declare ki's workflows on ``hatchet`` with the concurrency of ``settings``.

    Returns: :class:`KiWorkflows` (document DAG, access refresh, sync).
    """
    return KiWorkflows(
        document=_document_workflow(hatchet, DOCUMENT_WORKFLOW, settings, PIPELINE_STAGE_ORDER),
        access_refresh=_document_workflow(hatchet, ACCESS_REFRESH_WORKFLOW, settings, (FINAL_STAGE,)),
        sync=sync_workflow(hatchet, settings),
    )


_workflows: weakref.WeakKeyDictionary[Any, KiWorkflows] = weakref.WeakKeyDictionary()
_workflows_lock = threading.Lock()


def ki_workflows(hatchet: Any, settings: Any) -> Any:
    """The :class:`KiWorkflows` declared on ``hatchet`` (built once per client)."""
    with _workflows_lock:
        wfs = _workflows.get(hatchet)
        if wfs is None:
            wfs = _workflows[hatchet] = build_workflows(hatchet, settings)
        return wfs
