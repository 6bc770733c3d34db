"""Triggering Hatchet runs: a batch's first window, the members its conveyor releases, a replacement DAG, a sync.

Provider ``hatchet``: one Hatchet DAG per document, the database row still the idempotency boundary.

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider, concurrency and sweeper variables,
the sweeper), "Failure modes", and the decision "Hatchet DAG shape and pacing" (DESIGN.md).
``ki.launch.launch_insertion`` creates the ledger row and calls :func:`trigger_insertion`, which

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
   key expression), and records every document's workflow run id (the run row keeps the first).

The run then belongs to the workers (``ki worker``): each task drives its row
(:mod:`ki.workflows.task`), progress is aggregated into the run row, each DAG's final task (or
failure hook) releases and triggers the next members, the last document's final task completes
the run. ``ki.launch.wait_for_run`` is what ``ki insert`` does meanwhile (polls the rows).

Errors: :class:`OrchestratorUnavailable` when the token is missing or the engine refuses the
trigger (the run is then failed with the cause; members already triggered still run and their
rows stay the truth).
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from ki.context import PipelineContext
from ki.errors import OrchestratorUnavailable
from ki.orchestration.prepare import run_prepare_steps
from ki.sources.scan import ScanScope
from ki.store import batches, conveyor, runs
from ki.workflows.client import ensure_registered, hatchet_client
from ki.workflows.dag import (
    ACCESS_REFRESH_WORKFLOW,
    SYNC_WORKFLOW,
    document_stages,
    document_workflow_name,
    workflow,
)
from ki.workflows.inputs import DocumentInput, SyncInput

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


def _items(wf: Any, run_id: int, oids: list[int], attempt: str) -> list[Any]:
    return [wf.create_bulk_run_item(input=DocumentInput(batch_id=str(run_id), doc_id=str(oid), attempt=attempt),
                                    key=f"{run_id}:{oid}:{attempt}",
                                    additional_metadata={"ki_run_id": str(run_id), "ki_object_id": str(oid),
                                                         "ki_attempt": attempt})
            for oid in oids]


def _trigger_chunk(wf: Any, run_id: int, oids: list[int], *, attempt: str = ""
                   ) -> tuple[list[tuple[int, str]], str | None]:
    """Trigger one chunk. Returns ((object id, workflow run id) pairs, any run id of the chunk).

    A document whose idempotency key collides was triggered before (a resent RPC, a replayed
    final task): its existing DAG's id is returned, nothing is started twice. The engine does not
    say which items of a partly colliding chunk collided, so such a chunk is triggered again one
    item at a time (each then either collides, naming its existing DAG, or was among the started
    ones and collides too): every pair is known.
    """
    from hatchet_sdk import BulkTriggerIdempotencyCollisionError

    try:
        refs = wf.run_many(_items(wf, run_id, oids, attempt), wait_for_result=False)
    except BulkTriggerIdempotencyCollisionError as exc:
        ok, collided = exc.successful_workflow_run_external_ids, exc.collisions
        log.info("run %s: %d of %d documents were already triggered (idempotency key collision)",
                 run_id, len(collided), len(oids))
        if not ok and len(collided) == len(oids):  # the whole chunk was resent: ids come back in order
            known = [c.existing_run_external_id for c in collided]
            return list(zip(oids, known, strict=True)), (known[0] if known else None)
        pairs = [p for oid in oids for p in _trigger_chunk(wf, run_id, [oid], attempt=attempt)[0]]
        return pairs, (pairs[0][1] if pairs else None)
    pairs = list(zip(oids, [r.workflow_run_id for r in refs], strict=True))
    return pairs, (pairs[0][1] if pairs else None)


def _document_workflow(ctx: PipelineContext, hatchet: Any, run_id: int) -> Any:
    """The registered document workflow of run ``run_id``: the one recorded on the run (a batch
    keeps its DAG), else the one of the current configuration's enabled stages."""
    with ctx.db.engine.connect() as conn:
        name = conveyor.shape(conn, run_id).workflow_name
    wf = workflow(hatchet, ctx.settings, name or document_workflow_name(document_stages(ctx.config)))
    ensure_registered(hatchet, wf)
    return wf


def trigger_members(ctx: PipelineContext, run_id: int, oids: list[int], *, attempt: str = "") -> int:
    """Trigger a DAG of the run's document workflow for each member in ``oids`` (released by the
    conveyor) and record their workflow run ids. Returns the number of ids recorded.

    Idempotent: a member triggered before (same run, object and ``attempt``) collides on the
    idempotency key and gets its existing DAG's id recorded. Without ``attempt`` (the conveyor's
    triggers) each member's key part is :func:`ki.store.conveyor.attempt_keys` (``reopen<n>`` for a
    member re-opened after its DAG ended).
    Raises: OrchestratorUnavailable or the SDK's error (a calling task is retried by Hatchet; its
        replay triggers the same members again).
    """
    if not oids:
        return 0
    client = hatchet_client()
    wf = _document_workflow(ctx, client, run_id)
    if attempt:
        groups = {attempt: list(oids)}
    else:  # the conveyor's triggers: a member re-opened after its DAG ended gets a new key per re-opening
        with ctx.db.engine.connect() as conn:
            keys = conveyor.attempt_keys(conn, run_id, oids)
        groups = {}
        for oid in oids:
            groups.setdefault(keys[oid], []).append(oid)
    done = 0
    for key, members in groups.items():
        for i in range(0, len(members), TRIGGER_CHUNK):
            pairs, any_id = _trigger_chunk(wf, run_id, members[i:i + TRIGGER_CHUNK], attempt=key)
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


def supersede_stalled(ctx: PipelineContext, run_id: int, *, since: Any) -> int:
    """Replace the DAGs of a stalled batch: trigger a replacement per document (a fresh ``attempt``
    token, so its own idempotency key), record it on the member, then cancel the stalled DAG (its
    failure hook sees it superseded and records nothing). Replaced: every unfinished document whose
    DAG Hatchet reports running, plus at most the batch's window of those it reports queued;
    nothing when no worker of this namespace is active (then the batch waits for a worker rather
    than being stalled).

    Why: measured on v0.105.0, an engine restart can lose a task assignment (the task stays
    RUNNING on a live worker that never received it, holding a worker slot until its six-hour
    execution timeout) or the creation of a DAG's next task after its parent completed (the DAG
    stays RUNNING forever), and DAGs queued behind them never start. Hatchet's replay refuses
    running DAGs ("failed preflight check for DAG"). The replacement's tasks find the finished
    stages done and continue at the first unfinished one. The sweeper calls this only for a batch
    silent for ``KI_RUN_SILENT_MINUTES`` with nothing claimed and no retry pending. Returns the
    number of DAGs replaced.

    Also re-triggered (fresh ``attempt``, nothing to cancel): members in flight whose recorded DAG
    the engine does not know at all (``_lost_dags``), at most a window per sweep.
    """
    from hatchet_sdk import V1TaskStatus
    from hatchet_sdk.features.runs import BulkCancelReplayOpts

    client = hatchet_client()
    prefix = client.config.namespace or ""
    workers = client.workers.list().rows or []
    if not any(w.name.startswith(prefix) and str(w.status).endswith("ACTIVE") for w in workers):
        return 0  # nobody would run a replacement: the batch is waiting for a worker, not stalled
    stalled: dict[str, str] = {}
    for status in (V1TaskStatus.RUNNING, V1TaskStatus.QUEUED):
        listing = client.runs.list(additional_metadata={"ki_run_id": str(run_id)}, statuses=[status],
                                   only_tasks=False, since=since, limit=1000)
        for row in listing.rows or []:
            if prefix and not (row.display_name or "").startswith(prefix):
                continue  # another namespace's run with the same ki_run_id
            for x in (row.workflow_run_external_id, row.metadata.id):
                if x:
                    stalled.setdefault(str(x), status.value)
    with ctx.db.engine.connect() as conn:
        found = batches.unfinished_members(conn, run_id, list(stalled)) if stalled else []
        window = conveyor.shape(conn, run_id).window or ctx.settings.hatchet_document_concurrency
        unlisted = [m for m in conveyor.in_flight_members(conn, run_id) if m[1] not in stalled]
    # every DAG holding a slot (running), and at most one window of queued ones per sweep
    running = [m for m in found if stalled.get(m[1]) == V1TaskStatus.RUNNING.value]
    queued = [m for m in found if stalled.get(m[1]) != V1TaskStatus.RUNNING.value]
    members = running + queued[:window]
    lost = _lost_dags(unlisted[:window])
    if not members and not lost:
        return 0
    trigger_members(ctx, run_id, [oid for oid, _ in members + lost], attempt=uuid.uuid4().hex[:8])
    if members:
        client.runs.bulk_cancel(BulkCancelReplayOpts(ids=[wid for _, wid in members]))
    log.warning("run %s: superseded %d stalled document DAG(s), re-triggered %d the engine lost", run_id,
                len(members), len(lost))
    return len(members) + len(lost)


def _lost_dags(members: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Of ``(object id, workflow run id)`` pairs, those whose DAG the engine does not know (REST 404):
    measured on v0.105.0, a trigger acknowledged just before an engine crash can be lost (the
    conveyor triggers while a batch runs, so a crash can meet one). Any other answer keeps the pair."""
    from hatchet_sdk.clients.rest.exceptions import NotFoundException

    lookup = hatchet_client(lookup=True)
    lost = []
    for oid, wid in members:
        try:
            lookup.runs.get_status(wid)
        except NotFoundException:
            lost.append((oid, wid))
        except Exception:  # noqa: BLE001 - cannot ask: not evidence of a loss
            continue
    return lost


def trigger_sync(ctx: PipelineContext, run_id: int, source_id: int, scope: ScanScope | None = None) -> None:
    """Trigger the ``ki-sync`` workflow of a queued ``sync`` run (scanning ``scope``, None: the whole source)
    and record its workflow run id.

    Raises:
        OrchestratorUnavailable: no client or the engine refused (the run is failed with the cause).
    """
    try:
        hatchet = hatchet_client()
        wf = workflow(hatchet, ctx.settings, SYNC_WORKFLOW)
        ensure_registered(hatchet, wf)
        scope = scope or ScanScope()
        inp = SyncInput(run_id=str(run_id), source_id=str(source_id),
                        paths=list(scope.paths) if scope.paths is not None else None, defer=sorted(scope.defer),
                        defer_younger_than=scope.defer_younger_than, gone=list(scope.gone),
                        delete_at_once_max=scope.delete_at_once_max)
        ref = wf.run(inp, wait_for_result=False,
                     additional_metadata={"ki_run_id": str(run_id), "ki_source_id": str(source_id)})
    except Exception as exc:  # noqa: BLE001
        with ctx.db.engine.begin() as conn:
            batches.fail_run(conn, run_id, f"trigger failed: {type(exc).__name__}: {exc}")
        if isinstance(exc, OrchestratorUnavailable):
            raise
        raise OrchestratorUnavailable(f"Hatchet refused the sync trigger of run {run_id}: {exc}") from exc
    with ctx.db.engine.begin() as conn:
        runs.set_workflow_run(conn, run_id, ref.workflow_run_id)
