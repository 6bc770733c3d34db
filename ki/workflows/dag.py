"""ki's Hatchet workflows, declared in one place: the per-document DAGs, the access refresh, the sync.

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider; concurrency variables) with the
decision "Hatchet DAG shape and pacing" (DESIGN.md).

The document DAG declares **one task per enabled stage**, in ``PIPELINE_STAGE_ORDER``, each
waiting for the one before it. Its workflow name is derived from the enabled set
(:func:`document_workflow_name`, e.g. ``ki-insertion-f-c-i`` for fetch, convert, index), so a
configuration change that enables or disables a stage registers a new workflow, and a batch in
flight keeps the DAG it was triggered with (the name is recorded on its run row,
:mod:`ki.store.conveyor`)::

    fetch → convert → [classify_matter → relate → extract_metadata → extract_decisions →] index
                                            │                                               │
                       task concurrency 'relate' ≤ KI_RELATE_MODEL_CONCURRENCY               └ final task:
                                                                                              finishes the
    idempotency: key input.batch_id + ':' + input.doc_id + ':' + input.attempt (status based)  document,
    every task: 6 retries, backoff factor 5 capped at 60 s, 6 h schedule and execution timeouts releases the
    on failure: the document is recorded as orchestration_failed and the next member released  next member
    with a model stage: model tasks prefer workers labelled ki-pool=model, the others require ki-pool=general
    (the model-stage capacity reserve, :mod:`ki.workflows.pools`)

No workflow-level concurrency: ``KI_HATCHET_DOCUMENT_CONCURRENCY`` is enforced by the batch ledger
(the conveyor, :mod:`ki.store.conveyor`: a batch triggers at most that many DAGs at once and each
DAG's end triggers the next). Measured on engine v0.105.0 (docs/hatchet-engine.md gotchas 11-13), a
workflow-level key becomes a parent strategy plus one child strategy per task, scheduled in SQL,
and doubles the engine's CPU per document; engine tasks for switched-off stages cost engine events
too.

Switched-off stages have no task: their rows are recorded ``skipped``/``disabled_by_configuration``
by the completing statement of the stage before them, as under the local provider. A task drives
every unfinished earlier row of its document first (``task.drive_stage``), so a row that is not on
the DAG (a stage enabled while the batch ran) is still driven by the next task that runs.

The access refresh (workflow ``ki-access-refresh``, run ledger label "Access refresh"): one task,
``index``, for a batch whose only outstanding rows are ``access_only_reindex`` index rows; the
index handler then rewrites only the permission fields.

The stable idempotency key matters because the SDK splits a bulk trigger into several non-atomic
RPCs that tenacity may resend, and because a replayed final task triggers its successors again: a
resent item collides on its key instead of starting a second DAG (``create_bulk_run_item(key=…)``
never reaches the engine at SDK 1.43.1). The row claim stays the real idempotency boundary.

The sync workflow (``ki-sync``): one task, ``scan`` (:func:`ki.workflows.sync.run_sync`), with a
constant concurrency key ``'sync'`` capped at ``KI_HATCHET_SYNC_CONCURRENCY`` and the idempotency key
``input.run_id + ':' + input.attempt`` (a resent trigger returns the existing run).

Nothing here runs at import: :func:`workflow` declares a workflow on a client (cached per client
and name), so ``ki worker`` (which registers them) and the trigger get the same shapes. The task
bodies are :mod:`ki.workflows.task` and :mod:`ki.workflows.sync`.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ki.core.taxonomies import PIPELINE_STAGE_ORDER
from ki.workflows.inputs import DocumentInput, SyncInput
from ki.workflows.pools import task_labels

if TYPE_CHECKING:
    from hatchet_sdk import Hatchet

    from ki.config.loader import ProcessSettings

DOCUMENT_WORKFLOW_PREFIX = "ki-insertion"
ACCESS_REFRESH_WORKFLOW = "ki-access-refresh"
SYNC_WORKFLOW = "ki-sync"
FINAL_STAGE = PIPELINE_STAGE_ORDER[-1]

TASK_RETRIES = 6
TASK_BACKOFF_FACTOR = 5.0
TASK_BACKOFF_MAX_SECONDS = 60
TASK_TIMEOUT = timedelta(hours=6)
#: Keys stay reserved this long after their run ended (status-based idempotency falls back to it).
IDEMPOTENCY_FALLBACK_TTL = timedelta(hours=7)
#: Hatchet run priority (1-3, 3 first) of a document DAG by the most urgent lane of its owed rows (DESIGN.md
#: "Lanes": live > retry > backfill > rerun; Hatchet has three levels, so backfill and rerun share the lowest).
#: The whole DAG inherits it: each task is queued at its run's priority.
LANE_PRIORITY: dict[str, int] = {"live": 3, "retry": 2, "backfill": 1, "rerun": 1}
IDEMPOTENCY_KEY_EXPRESSION = "input.batch_id + ':' + input.doc_id + ':' + input.attempt"
RELATE_KEY_EXPRESSION = "'relate'"
SYNC_KEY_EXPRESSION = "'sync'"
SYNC_IDEMPOTENCY_KEY_EXPRESSION = "input.run_id + ':' + input.attempt"


def _code(stage: str) -> str:
    return "".join(word[0] for word in stage.split("_"))


#: Each stage's code in a document workflow's name: the initials of its words (``classify_matter`` → ``cm``).
STAGE_CODES: dict[str, str] = {stage: _code(stage) for stage in PIPELINE_STAGE_ORDER}
_STAGE_OF_CODE = {code: stage for stage, code in STAGE_CODES.items()}
if len(_STAGE_OF_CODE) != len(STAGE_CODES):  # pragma: no cover - a new stage name would need its own code
    raise RuntimeError(f"stage codes collide: {STAGE_CODES}")


def document_stages(config: Any) -> tuple[str, ...]:
    """The stages a document DAG declares under ``config`` (a ``KiConfig``): the enabled ones in
    ``PIPELINE_STAGE_ORDER``; when every stage is switched off, the final stage alone (its task
    drives the document's rows, which the executor then records ``disabled_by_configuration``)."""
    enabled = tuple(s for s in PIPELINE_STAGE_ORDER if config.pipeline.stage(s).enabled)
    return enabled or (FINAL_STAGE,)


def document_workflow_name(stages: Iterable[str]) -> str:
    """``ki-insertion-<codes>`` for a DAG of ``stages`` (in pipeline order), e.g. ``ki-insertion-f-c-i``.

    Raises: ValueError for an unknown stage, an empty set or stages out of pipeline order.
    """
    stages = tuple(stages)
    if not stages or any(s not in STAGE_CODES for s in stages) or list(stages) != sorted(
            stages, key=PIPELINE_STAGE_ORDER.index) or len(set(stages)) != len(stages):
        raise ValueError(f"not a document DAG's stages (pipeline order, no repeats): {stages}")
    return DOCUMENT_WORKFLOW_PREFIX + "-" + "-".join(STAGE_CODES[s] for s in stages)


def workflow_stages(name: str) -> tuple[str, ...]:
    """The stages of the document workflow ``name`` (:func:`document_workflow_name`'s inverse;
    ``ki-access-refresh`` → its one ``index`` task).

    Raises: ValueError when ``name`` is not one of ki's document workflows.
    """
    if name == ACCESS_REFRESH_WORKFLOW:
        return (FINAL_STAGE,)
    prefix = DOCUMENT_WORKFLOW_PREFIX + "-"
    codes = name[len(prefix):].split("-") if name.startswith(prefix) else []
    try:
        stages = tuple(_STAGE_OF_CODE[c] for c in codes)
    except KeyError:
        stages = ()
    if not stages or document_workflow_name(stages) != name:
        raise ValueError(f"{name!r} is not one of ki's document workflows")
    return stages


def stage_execution_timeout(config: Any, stage: str) -> timedelta:
    """A stage task's Hatchet execution timeout: :data:`TASK_TIMEOUT`, or — when the stage's deadline
    (``pipeline.stages.<stage>.timeout_seconds``) times its attempts (``max_attempts`` + 1) is longer —
    that, so the orchestrator never cuts an attempt short of the deadline ki records as ``StageTimeout``."""
    if config is None:
        return TASK_TIMEOUT
    pipeline = config.pipeline
    attempts = pipeline.stage(stage).max_attempts + 1
    return max(TASK_TIMEOUT, timedelta(seconds=pipeline.timeout_seconds(stage) * attempts))


def _config_of(settings: Any) -> Any:
    """The saved configuration of ``settings.data_dir`` (the stage deadlines), or None when unreadable."""
    try:
        from ki.config.loader import load_config

        return load_config(settings.data_dir)
    except Exception:  # noqa: BLE001 - a declaration never fails on it: the six-hour default applies
        return None


def _task_options(config: Any = None, stage: str | None = None) -> dict[str, Any]:
    timeout = stage_execution_timeout(config, stage) if stage is not None else TASK_TIMEOUT
    return {"retries": TASK_RETRIES, "backoff_factor": TASK_BACKOFF_FACTOR,
            "backoff_max_seconds": TASK_BACKOFF_MAX_SECONDS, "schedule_timeout": TASK_TIMEOUT,
            "execution_timeout": timeout}


def _stage_fn(stage: str, *, final: bool):
    def run(inp: DocumentInput, ctx) -> dict[str, Any]:
        from hatchet_sdk import NonRetryableException

        from ki.core.errors import RunAborted
        from ki.workflows.task import stage_task

        try:
            return stage_task(stage, inp.run_id, inp.source_object_id, final=final,
                              cancelled=lambda: ctx.exit_flag)
        except RunAborted as exc:  # ki's own configuration is wrong: retrying the task cannot help
            raise NonRetryableException(str(exc)) from exc

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
        task_defaults=TaskDefaults(**_task_options()),
        idempotency=StatusBasedIdempotencyConfig(key_expression=IDEMPOTENCY_KEY_EXPRESSION,
                                                 fallback_ttl=IDEMPOTENCY_FALLBACK_TTL),
    )
    config = _config_of(settings)
    parent = None
    for stage in stages:
        concurrency = None
        if stage == "relate":
            concurrency = [ConcurrencyExpression(expression=RELATE_KEY_EXPRESSION,
                                                 max_runs=settings.relate_model_concurrency,
                                                 limit_strategy=ConcurrencyLimitStrategy.GROUP_ROUND_ROBIN)]
        fn = _stage_fn(stage, final=stage == stages[-1])
        parent = wf.task(name=stage, parents=[parent] if parent is not None else None, concurrency=concurrency,
                         desired_worker_labels=task_labels(stage, stages), **_task_options(config, stage))(fn)
    wf.on_failure_task(name="record_failure", retries=TASK_RETRIES, backoff_factor=TASK_BACKOFF_FACTOR,
                       backoff_max_seconds=TASK_BACKOFF_MAX_SECONDS, schedule_timeout=TASK_TIMEOUT,
                       execution_timeout=timedelta(minutes=5))(_failure_fn)
    return wf


def _sync_workflow(hatchet: Hatchet, settings: ProcessSettings) -> Any:
    """Declare ``ki-sync`` on ``hatchet`` (one ``scan`` task, ≤ KI_HATCHET_SYNC_CONCURRENCY at once)."""
    from hatchet_sdk import ConcurrencyExpression, ConcurrencyLimitStrategy, StatusBasedIdempotencyConfig

    wf = hatchet.workflow(name=SYNC_WORKFLOW, input_validator=SyncInput,
                          idempotency=StatusBasedIdempotencyConfig(key_expression=SYNC_IDEMPOTENCY_KEY_EXPRESSION,
                                                                   fallback_ttl=IDEMPOTENCY_FALLBACK_TTL))

    def scan(inp: SyncInput, ctx) -> dict[str, Any]:
        from ki.workflows.sync import run_sync

        return run_sync(int(inp.run_id), int(inp.source_id), inp)

    wf.task(name="scan", retries=2, backoff_factor=5.0, backoff_max_seconds=60, schedule_timeout=TASK_TIMEOUT,
            execution_timeout=TASK_TIMEOUT,
            concurrency=[ConcurrencyExpression(expression=SYNC_KEY_EXPRESSION,
                                               max_runs=settings.hatchet_sync_concurrency,
                                               limit_strategy=ConcurrencyLimitStrategy.GROUP_ROUND_ROBIN)])(scan)
    return wf


def build_workflow(hatchet: Hatchet, settings: ProcessSettings, name: str) -> Any:
    """Declare ki's workflow ``name`` on ``hatchet`` with the concurrency of ``settings``: a document
    DAG (:func:`document_workflow_name`), ``ki-access-refresh`` or ``ki-sync``.

    Raises: ValueError for any other name.
    """
    if name == SYNC_WORKFLOW:
        return _sync_workflow(hatchet, settings)
    return _document_workflow(hatchet, name, settings, workflow_stages(name))


_workflows: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_workflows_lock = threading.Lock()


def workflow(hatchet: Any, settings: Any, name: str) -> Any:
    """The SDK ``Workflow`` ``name`` declared on ``hatchet`` (built once per client and name).

    Raises: ValueError when ``name`` is not one of ki's workflows.
    """
    with _workflows_lock:
        declared = _workflows.setdefault(hatchet, {})
        wf = declared.get(name)
        if wf is None:
            wf = declared[name] = build_workflow(hatchet, settings, name)
        return wf


def worker_workflows(hatchet: Any, settings: Any, document_workflows: Iterable[str]) -> list[Any]:
    """What a worker serves: each document workflow named (sorted), the access refresh and the sync."""
    names = sorted(set(document_workflows) - {ACCESS_REFRESH_WORKFLOW, SYNC_WORKFLOW})
    return [workflow(hatchet, settings, n) for n in [*names, ACCESS_REFRESH_WORKFLOW, SYNC_WORKFLOW]]
