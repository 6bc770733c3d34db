"""Triggering Hatchet runs: a batch's first window, the members its conveyor releases, a replacement DAG, a sync.

Provider ``hatchet``: one Hatchet DAG per document, the database row still the idempotency boundary.

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider, concurrency and sweeper variables,
the sweeper), "Failure modes", and the decision "Hatchet DAG shape and pacing" (DESIGN.md).
``ki.app.launch.launch_insertion`` creates the ledger row and calls :func:`trigger_insertion`, which

1. runs the same prepare steps as the local provider (``run_prepare_steps``);
2. in one transaction, reserves the batch (:func:`ki.store.batches.reserve_batch`: under a global
   advisory lock, every non-deleted object with a pending/running/failed row that no other active
   batch owns becomes a member of this run, so two concurrent launches never start a second DAG
   for the same document; a batch of only ``access_only_reindex`` index rows is relabelled
   "Access refresh" and runs the lighter workflow), records its shape (the document workflow of
   the enabled stages, :func:`ki.workflows.dag.document_workflow_name`, and its window,
   ``KI_HATCHET_DOCUMENT_CONCURRENCY``) and releases the first window
   (:func:`ki.store.conveyor.release`);
3. triggers those members (:func:`trigger_members`): one workflow run each, in chunks of
   :data:`TRIGGER_CHUNK`, each with the stable idempotency key ``<run>:<object>:`` (the workflow's
   key expression), and records every document's workflow run id once the engine acknowledged it
   (the run row keeps the first); a refused chunk is retried with backoff and jitter while the
   batch's window shrinks (:mod:`ki.workflows.pushback`).

The run then belongs to the workers (``ki worker``): each task drives its row
(:mod:`ki.workflows.task`), progress is aggregated into the run row, each DAG's final task (or
failure hook) releases and triggers the next members, the last document's final task completes
the run. ``ki.app.launch.wait_for_run`` is what ``ki insert`` does meanwhile (polls the rows).

Errors: :class:`OrchestratorUnavailable` when the token is missing or the engine refuses the
trigger (the run is then failed with the cause; members already triggered still run and their
rows stay the truth).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from ki.adapters.sources.scan import ScanScope
from ki.core.errors import OrchestratorUnavailable
from ki.domain.context import PipelineContext
from ki.orchestration.prepare import run_prepare_steps
from ki.store import batches, conveyor, objects, runs
from ki.workflows.client import ensure_registered, hatchet_client
from ki.workflows.dag import (
    ACCESS_REFRESH_WORKFLOW,
    LANE_PRIORITY,
    SYNC_WORKFLOW,
    document_stages,
    document_workflow_name,
    workflow,
)
from ki.workflows.inputs import DocumentInput, SyncInput
from ki.workflows.pushback import PartialTrigger, send

log = logging.getLogger(__name__)

#: Items per BulkTriggerWorkflow call (the SDK would split at 1,000 / 4 MiB itself, but then a
#: collision in one chunk loses the run ids of the others).
TRIGGER_CHUNK = 500


@dataclass(frozen=True)
class TriggerReport:
    """What :func:`trigger_insertion` did.

    Attributes:
        run_id: the batch's run id.
        documents: members reserved.
        access_only: the batch runs the access-refresh workflow.
        workflow_run_ids: number of workflow run ids recorded (the first window: at most
            ``KI_HATCHET_DOCUMENT_CONCURRENCY``; the conveyor triggers the rest).
        trigger_seconds: time spent in the trigger RPCs.
        workflow_name: the batch's document workflow.
    """

    run_id: int
    documents: int
    access_only: bool
    workflow_run_ids: int
    trigger_seconds: float = 0.0
    workflow_name: str | None = None


#: Longest ``ki_file`` metadata value (characters): a longer path keeps its end (the file name) after "…".
FILE_LABEL_MAX = 240


def file_label(path: str) -> str:
    """A document's path as the ``ki_file`` metadata of its DAG: at most :data:`FILE_LABEL_MAX` characters,
    a longer one shortened at the start (``…`` + its last characters), so the file name stays readable."""
    return path if len(path) <= FILE_LABEL_MAX else "…" + path[-(FILE_LABEL_MAX - 1):]


def run_metadata(run_id: int, oid: int, attempt: str, path: str | None) -> dict[str, str]:
    """The additional metadata of a document DAG, which the Hatchet dashboard shows on the run and filters by
    (``key:value``): ``ki_run_id`` (the batch), ``ki_object_id``, ``ki_attempt`` (the idempotency key's part,
    "" for the first trigger) and ``ki_file`` (the path relative to its source root, :func:`file_label`;
    absent for an object that is gone)."""
    meta = {"ki_run_id": str(run_id), "ki_object_id": str(oid), "ki_attempt": attempt}
    if path is not None:
        meta["ki_file"] = file_label(path)
    return meta


def _items(wf: Any, run_id: int, oids: list[int], attempt: str, priorities: dict[int, int],
           paths: dict[int, str]) -> list[Any]:
    from hatchet_sdk.types.priority import Priority

    return [wf.create_bulk_run_item(input=DocumentInput(batch_id=str(run_id), doc_id=str(oid), attempt=attempt),
                                    key=f"{run_id}:{oid}:{attempt}",
                                    priority=Priority(priorities[oid]) if oid in priorities else None,
                                    additional_metadata=run_metadata(run_id, oid, attempt, paths.get(oid)))
            for oid in oids]


def _trigger_chunk(wf: Any, run_id: int, oids: list[int], *, attempt: str = "",
                   priorities: dict[int, int] | None = None, paths: dict[int, str] | None = None
                   ) -> tuple[list[tuple[int, str]], str | None]:
    """Trigger one chunk, one attempt. Returns ((object id, workflow run id) pairs, any run id of the chunk).

    A document whose idempotency key collides was triggered before (a resent RPC, a replayed
    final task, an attempt whose answer was lost): its existing DAG's id is returned, nothing is
    started twice. The engine does not say which items of a partly colliding chunk collided, so
    such a chunk is triggered again one item at a time (each then either collides, naming its
    existing DAG, or was among the started ones and collides too): every pair is known.
    ``priorities``: each document's Hatchet run priority (absent: the engine's default, 1); ``paths``: each
    document's relative path (its DAG's ``ki_file`` metadata, :func:`run_metadata`).
    Raises: the SDK's error (a refusal), or :class:`ki.workflows.pushback.PartialTrigger` when the
        engine acknowledged fewer runs than asked (the retry's collisions name the ones it made).
    """
    priorities, paths = priorities or {}, paths or {}
    from hatchet_sdk import BulkTriggerIdempotencyCollisionError

    try:
        refs = wf.run_many(_items(wf, run_id, oids, attempt, priorities, paths), wait_for_result=False)
    except BulkTriggerIdempotencyCollisionError as exc:
        ok, collided = exc.successful_workflow_run_external_ids, exc.collisions
        log.info("run %s: %d of %d documents were already triggered (idempotency key collision)",
                 run_id, len(collided), len(oids))
        if not ok and len(collided) == len(oids):  # the whole chunk was resent: ids come back in order
            known = [c.existing_run_external_id for c in collided]
            return list(zip(oids, known, strict=True)), (known[0] if known else None)
        pairs = [p for oid in oids
                 for p in _trigger_chunk(wf, run_id, [oid], attempt=attempt, priorities=priorities,
                                         paths=paths)[0]]
        return pairs, (pairs[0][1] if pairs else None)
    ids = [r.workflow_run_id for r in refs]
    if len(ids) != len(oids) or not all(ids):
        raise PartialTrigger(f"the engine acknowledged {sum(1 for i in ids if i)} of {len(oids)} workflow runs")
    pairs = list(zip(oids, ids, strict=True))
    return pairs, (pairs[0][1] if pairs else None)


def _document_workflow(ctx: PipelineContext, hatchet: Any, run_id: int) -> Any:
    """The registered document workflow of run ``run_id``: the one recorded on the run (a batch
    keeps its DAG), else the one of the current configuration's enabled stages."""
    with ctx.db.engine.connect() as conn:
        name = conveyor.shape(conn, run_id).workflow_name
    return workflow(hatchet, ctx.settings, name or document_workflow_name(document_stages(ctx.config)))


def trigger_members(ctx: PipelineContext, run_id: int, oids: list[int], *, attempt: str = "") -> int:
    """Trigger a DAG of the run's document workflow for each member in ``oids`` (released by the
    conveyor) and record their workflow run ids. Returns the number of ids recorded.

    Each DAG runs at the Hatchet priority of the most urgent lane of its document's owed rows
    (``ki.workflows.dag.LANE_PRIORITY``: a live change overtakes a backfill's queued DAGs).
    A member's id is recorded only once the engine acknowledged its run: a refused, unanswered or partly
    answered chunk is retried with backoff and jitter while the run's window shrinks
    (:func:`ki.workflows.pushback.send`). Idempotent: a member triggered before (same run, object and
    ``attempt``) collides on the idempotency key and gets its existing DAG's id recorded. Without
    ``attempt`` (the conveyor's triggers) each member's key part is :func:`ki.store.conveyor.attempt_keys`
    (``reopen<n>`` for a member re-opened after its DAG ended).
    Raises: OrchestratorUnavailable or the SDK's last error once ``KI_HATCHET_TRIGGER_RETRY_SECONDS`` passed
        (a calling task is retried by Hatchet, its replay triggers the same members again; members left
        unacknowledged hold their slot until the sweeper's early check triggers them).
    """
    if not oids:
        return 0
    client = hatchet_client(once=True)
    wf = _document_workflow(ctx, client, run_id)
    with ctx.db.engine.connect() as conn:
        priorities = {oid: LANE_PRIORITY[lane] for oid, lane in conveyor.member_lanes(conn, oids).items()}
        keys = {} if attempt else conveyor.attempt_keys(conn, run_id, oids)
        paths = objects.relative_paths(conn, oids)
    if attempt:
        groups = {attempt: list(oids)}
    else:  # the conveyor's triggers: a member re-opened after its DAG ended gets a new key per re-opening
        groups = {}
        for oid in oids:
            groups.setdefault(keys[oid], []).append(oid)
    done = 0
    for key, members in groups.items():
        for i in range(0, len(members), TRIGGER_CHUNK):
            chunk = members[i:i + TRIGGER_CHUNK]

            def attempt_chunk(chunk: list[int] = chunk, key: str = key) -> tuple[list[tuple[int, str]], str | None]:
                ensure_registered(client, wf)
                return _trigger_chunk(wf, run_id, chunk, attempt=key, priorities=priorities, paths=paths)

            pairs, any_id = send(ctx, run_id, attempt_chunk, what=f"{len(chunk)} document DAG(s) of run {run_id}")
            with ctx.db.engine.begin() as conn:
                batches.record_workflow_runs(conn, run_id, pairs, first=any_id)
            done += len(pairs)
    return done


def advance_conveyor(ctx: PipelineContext, run_id: int, *, released_by: int | None,
                     every_releaser: bool = False) -> int:
    """Release the run's next members into its window and trigger them (the conveyor's step outside
    a member's end: an adoption of attachments, the sweeper). Returns the DAGs triggered."""
    with ctx.db.engine.begin() as conn:
        oids = conveyor.release(conn, run_id, released_by=released_by,
                                default_window=ctx.settings.hatchet_document_concurrency,
                                every_releaser=every_releaser)
    return trigger_members(ctx, run_id, oids)


def trigger_insertion(ctx: PipelineContext, run_id: int) -> TriggerReport:
    """Prepare, reserve and trigger the first window of the batch of run ``run_id`` (a ``queued``
    insertion row).

    Returns: the :class:`TriggerReport`. An empty batch completes the run at once.
    Raises:
        OrchestratorUnavailable: no client, or the engine refused a trigger (the run is failed
            with the cause; its members are released because the run is no longer active).
    """
    run_prepare_steps(ctx)
    window = ctx.settings.hatchet_document_concurrency
    with ctx.db.engine.begin() as conn:
        reservation = batches.reserve_batch(conn, run_id)
        name = None
        first: list[int] = []
        if reservation.object_ids:
            name = ACCESS_REFRESH_WORKFLOW if reservation.access_only else document_workflow_name(
                document_stages(ctx.config))
            conveyor.set_shape(conn, run_id, name, window)
            first = conveyor.release(conn, run_id, released_by=None, default_window=window)
    if not reservation.object_ids:
        with ctx.db.engine.begin() as conn:
            batches.complete_if_terminal(conn, run_id)
        return TriggerReport(run_id, 0, False, 0)
    started = time.perf_counter()
    try:
        recorded = trigger_members(ctx, run_id, first)
    except Exception as exc:  # noqa: BLE001 - any trigger failure fails the run with its cause
        cause = f"{type(exc).__name__}: {exc}"
        log.error("run %s: trigger of the first %d of %d documents failed: %s", run_id, len(first),
                  len(reservation.object_ids), cause)
        with ctx.db.engine.begin() as conn:
            batches.fail_run(conn, run_id,
                             f"trigger failed ({len(reservation.object_ids)} documents reserved): {cause}")
        if isinstance(exc, OrchestratorUnavailable):
            raise
        raise OrchestratorUnavailable(f"Hatchet refused the trigger of run {run_id}: {cause}") from exc
    return TriggerReport(run_id, len(reservation.object_ids), reservation.access_only, recorded,
                         time.perf_counter() - started, name)


def trigger_sync(ctx: PipelineContext, run_id: int, source_id: int, scope: ScanScope | None = None, *,
                 attempt: str = "") -> None:
    """Trigger the ``ki-sync`` workflow of a queued ``sync`` run (scanning ``scope``, None: the whole source)
    and record its workflow run id once the engine acknowledged it.

    Retried like the document triggers (:func:`ki.workflows.pushback.send`, refusals counted on the sync run);
    the idempotency key ``<run>:<attempt>`` makes a resent trigger return the existing run. ``attempt``: a
    fresh token when the sweeper re-triggers a sync whose workflow run the engine lost.
    Raises:
        OrchestratorUnavailable: no client, or the engine kept refusing (the run is failed with the cause).
    """
    from hatchet_sdk import IdempotencyCollisionError

    scope = scope or ScanScope()
    inp = SyncInput(run_id=str(run_id), source_id=str(source_id), attempt=attempt,
                    paths=list(scope.paths) if scope.paths is not None else None, defer=sorted(scope.defer),
                    defer_younger_than=scope.defer_younger_than, gone=list(scope.gone),
                    delete_at_once_max=scope.delete_at_once_max)

    def attempt_sync() -> str:
        ensure_registered(hatchet, wf)
        try:
            return wf.run(inp, wait_for_result=False,
                          additional_metadata={"ki_run_id": str(run_id), "ki_source_id": str(source_id)}
                          ).workflow_run_id
        except IdempotencyCollisionError as exc:  # a resent trigger: the engine made the run before
            return exc.existing_run_external_id

    try:
        hatchet = hatchet_client(once=True)
        wf = workflow(hatchet, ctx.settings, SYNC_WORKFLOW)
        workflow_run_id = send(ctx, run_id, attempt_sync, what=f"sync run {run_id}")
    except Exception as exc:  # noqa: BLE001
        with ctx.db.engine.begin() as conn:
            batches.fail_run(conn, run_id, f"trigger failed: {type(exc).__name__}: {exc}")
        if isinstance(exc, OrchestratorUnavailable):
            raise
        raise OrchestratorUnavailable(f"Hatchet refused the sync trigger of run {run_id}: {exc}") from exc
    with ctx.db.engine.begin() as conn:
        runs.set_workflow_run(conn, run_id, workflow_run_id)
