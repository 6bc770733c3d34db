"""Provider ``hatchet``: one Hatchet DAG per document, the database row still the idempotency boundary.

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider, concurrency and sweeper variables,
the sweeper) and "Failure modes". ``launch_insertion`` creates the ledger row and calls
:func:`trigger_insertion`, which

1. runs the same prepare steps as the local provider (``run_prepare_steps``);
2. reserves the batch (:func:`ki.store.runs.reserve_batch`): under a global
   advisory lock, every non-deleted object with a pending/running/failed row that no other active
   batch owns becomes a member of this run, so two concurrent launches never start a second DAG
   for the same document; a batch of only ``access_only_reindex`` index rows is relabelled
   "Access refresh" and runs the lighter workflow;
3. bulk-triggers one workflow run per member (:mod:`ki.workflows.insertion`) in chunks of
   :data:`TRIGGER_CHUNK`, each item with the stable idempotency key ``<run>:<object>`` (the
   workflow's key expression), and records every document's workflow run id (the run row keeps
   the first). A chunk the engine reports as colliding was already triggered (a resent RPC): its
   DAGs exist, nothing is started twice.

The run then belongs to the workers (``ki worker``): each task drives its row
(:mod:`ki.workflows.runtime`), progress is aggregated into the run row, the last document's final
task completes the run. :func:`wait_for_run` is what ``ki insert`` does meanwhile (polls the rows).

Client configuration is Hatchet's own environment (``HATCHET_CLIENT_TOKEN``, ``_HOST_PORT``,
``_SERVER_URL``, ``_TLS_STRATEGY``, ``_NAMESPACE``). Errors: :class:`OrchestratorUnavailable`
when the token is missing or the engine refuses the trigger (the run is then failed with the
cause; members already triggered still run and their rows stay the truth).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ki.config.process import HatchetClientSettings, current
from ki.context import PipelineContext
from ki.errors import OrchestratorUnavailable
from ki.store import runs

log = logging.getLogger(__name__)

#: Items per BulkTriggerWorkflow call (the SDK would split at 1,000 / 4 MiB itself, but then a
#: collision in one chunk loses the run ids of the others).
TRIGGER_CHUNK = 500

_clients: dict[tuple, Any] = {}
_workflows: dict[int, Any] = {}
_registered: set[tuple[int, str]] = set()
_clients_lock = threading.Lock()


@dataclass(frozen=True)
class TriggerReport:
    """What :func:`trigger_insertion` did.

    Attributes:
        run_id: the batch's run id.
        documents: members reserved (and triggered).
        access_only: the batch runs the access-refresh workflow.
        workflow_run_ids: number of workflow run ids recorded.
        trigger_seconds: time spent in the bulk trigger RPCs.
    """

    run_id: int
    documents: int
    access_only: bool
    workflow_run_ids: int
    trigger_seconds: float = 0.0


def hatchet_client(*, lookup: bool = False) -> Any:
    """A cached ``hatchet_sdk.Hatchet`` client built from the ``HATCHET_CLIENT_*`` environment.

    ``lookup=True``: a client whose REST calls are attempted once (the sweeper: an unknown run id
    answers NotFound in milliseconds instead of after ~15 s of retries). Clients are cached per
    environment (token, address, namespace), so a changed environment gets a new client.

    Raises:
        OrchestratorUnavailable: no ``HATCHET_CLIENT_TOKEN``, or the SDK refuses the configuration.
    """
    env = current(HatchetClientSettings).identity()
    key = ("lookup" if lookup else "trigger", env)
    with _clients_lock:
        if key in _clients:
            return _clients[key]
        if not env[0]:
            raise OrchestratorUnavailable(
                "components.orchestrator_provider is 'hatchet' but HATCHET_CLIENT_TOKEN is not set: point ki at "
                "a Hatchet engine (README, section Hatchet) or set KI_COMPONENTS__ORCHESTRATOR_PROVIDER=local")
        try:
            from hatchet_sdk import ClientConfig, Hatchet
            from hatchet_sdk.config import TenacityConfig
        except ImportError as exc:  # pragma: no cover - the extra is missing
            raise OrchestratorUnavailable("hatchet-sdk is not installed: pip install 'ki[hatchet]'") from exc
        try:
            config = ClientConfig(tenacity=TenacityConfig(max_attempts=1)) if lookup else ClientConfig()
            client = Hatchet(config=config)
        except Exception as exc:  # noqa: BLE001 - a bad token or address: fail closed, saying why
            raise OrchestratorUnavailable(f"Hatchet client configuration refused: {exc}") from exc
        _clients[key] = client
        return client


def reset_clients() -> None:
    """Forget cached clients (tests switch engines and namespaces)."""
    with _clients_lock:
        _clients.clear()
        _workflows.clear()
        _registered.clear()


def ki_workflows(hatchet: Any, settings: Any) -> Any:
    """The :class:`ki.workflows.insertion.KiWorkflows` declared on ``hatchet`` (cached per client)."""
    from ki.workflows.insertion import build_workflows

    with _clients_lock:
        wfs = _workflows.get(id(hatchet))
        if wfs is None:
            wfs = _workflows[id(hatchet)] = build_workflows(hatchet, settings)
        return wfs


def ensure_registered(hatchet: Any, wf: Any) -> None:
    """Register ``wf``'s definition with the engine once per process before triggering it.

    Measured on v0.105.0: a bulk trigger of a workflow name no worker has registered yet returns
    run ids that the engine never creates (REST 404, nothing ever runs). Registering the
    definition from the trigger side (the same ``PutWorkflow`` call a worker makes; an unchanged
    definition is a no-op) makes such runs queue until a worker starts.
    """
    key = (id(hatchet), wf.name)
    if key in _registered:
        return
    hatchet._client.admin.put_workflow(wf.to_proto())
    _registered.add(key)


def _trigger_chunk(wf: Any, run_id: int, oids: list[int], *, attempt: str = ""
                   ) -> tuple[list[tuple[int, str]], str | None]:
    """Trigger one chunk. Returns ((object id, workflow run id) pairs known, any run id of the chunk)."""
    from hatchet_sdk import BulkTriggerIdempotencyCollisionError

    from ki.workflows.insertion import DocumentInput

    items = [wf.create_bulk_run_item(input=DocumentInput(batch_id=str(run_id), doc_id=str(oid), attempt=attempt),
                                     key=f"{run_id}:{oid}:{attempt}",
                                     additional_metadata={"ki_run_id": str(run_id), "ki_object_id": str(oid)})
             for oid in oids]
    try:
        refs = wf.run_many(items, wait_for_result=False)
    except BulkTriggerIdempotencyCollisionError as exc:
        # Already triggered by an earlier (resent) call of this same batch: the DAGs exist.
        ok, collided = exc.successful_workflow_run_external_ids, exc.collisions
        log.warning("run %s: %d of %d documents were already triggered (idempotency key collision)",
                    run_id, len(collided), len(oids))
        known = [*ok, *(c.existing_run_external_id for c in collided)]
        if not ok and len(collided) == len(oids):  # the whole chunk was resent: ids come back in order
            return list(zip(oids, known, strict=True)), known[0]
        return [], (known[0] if known else None)  # which item collided is not reported: ids unmapped
    pairs = list(zip(oids, [r.workflow_run_id for r in refs], strict=True))
    return pairs, (pairs[0][1] if pairs else None)


def trigger_insertion(ctx: PipelineContext, run_id: int) -> TriggerReport:
    """Prepare, reserve and bulk-trigger the batch of run ``run_id`` (a ``queued`` insertion row).

    Returns: the :class:`TriggerReport`. An empty batch completes the run at once.
    Raises:
        OrchestratorUnavailable: no client, or the engine refused a trigger (the run is failed
            with the cause; its members are released because the run is no longer active).
    """
    from ki.orchestration.prepare import run_prepare_steps

    run_prepare_steps(ctx)
    with ctx.db.engine.begin() as conn:
        reservation = runs.reserve_batch(conn, run_id)
    if not reservation.object_ids:
        with ctx.db.engine.begin() as conn:
            runs.complete_if_terminal(conn, run_id)
        return TriggerReport(run_id, 0, False, 0)
    started = time.perf_counter()
    recorded = 0
    try:
        hatchet = hatchet_client()
        wfs = ki_workflows(hatchet, ctx.settings)
        wf = wfs.access_refresh if reservation.access_only else wfs.document
        ensure_registered(hatchet, wf)
        ids = list(reservation.object_ids)
        for i in range(0, len(ids), TRIGGER_CHUNK):
            pairs, any_id = _trigger_chunk(wf, run_id, ids[i:i + TRIGGER_CHUNK])
            with ctx.db.engine.begin() as conn:
                runs.record_workflow_runs(conn, run_id, pairs, first=any_id)
            recorded += len(pairs)
    except Exception as exc:  # noqa: BLE001 - any trigger failure fails the run with its cause
        cause = f"{type(exc).__name__}: {exc}"
        log.error("run %s: bulk trigger failed after %d of %d documents: %s", run_id, recorded,
                  len(reservation.object_ids), cause)
        with ctx.db.engine.begin() as conn:
            runs.fail_run(conn, run_id, f"trigger failed after {recorded} of {len(reservation.object_ids)} "
                                           f"documents: {cause}")
        if isinstance(exc, OrchestratorUnavailable):
            raise
        raise OrchestratorUnavailable(f"Hatchet refused the bulk trigger of run {run_id}: {cause}") from exc
    return TriggerReport(run_id, len(reservation.object_ids), reservation.access_only, recorded,
                         time.perf_counter() - started)


def trigger_members(ctx: PipelineContext, run_id: int, oids: list[int]) -> int:
    """Trigger DAGs for members added to a running batch (embedded objects adopted by their
    container's convert task) and record their ids. Returns the number triggered.

    Raises: OrchestratorUnavailable or the SDK's error (the calling task is retried by Hatchet).
    """
    if not oids:
        return 0
    client = hatchet_client()
    wf = ki_workflows(client, ctx.settings).document
    ensure_registered(client, wf)
    done = 0
    for i in range(0, len(oids), TRIGGER_CHUNK):
        pairs, _ = _trigger_chunk(wf, run_id, oids[i:i + TRIGGER_CHUNK])
        with ctx.db.engine.begin() as conn:
            runs.record_workflow_runs(conn, run_id, pairs)
        done += len(pairs)
    return done


def supersede_stalled(ctx: PipelineContext, run_id: int, *, since: Any) -> int:
    """Replace the DAGs of a stalled batch: trigger a replacement per document (a fresh ``attempt``
    token, so its own idempotency key and concurrency group), record it on the member, then cancel
    the stalled DAG (its failure hook sees it superseded and records nothing). Replaced: every
    unfinished document whose DAG Hatchet reports running, plus at most
    ``KI_HATCHET_DOCUMENT_CONCURRENCY`` of those it reports queued; nothing when no worker of this
    namespace is active (then the batch waits for a worker rather than being stalled).

    Why: measured on v0.105.0, an engine restart can lose a task assignment (the task stays
    RUNNING on a live worker that never received it, holding a worker slot until its six-hour
    execution timeout) or the creation of a DAG's next task after its parent completed (the DAG
    stays RUNNING forever), and DAGs queued behind them never start. Hatchet's replay refuses
    running DAGs ("failed preflight check for DAG"). The replacement's tasks find the finished
    stages done and continue at the first unfinished one. The sweeper calls this only for a batch
    silent for ``KI_RUN_SILENT_MINUTES`` with nothing claimed and no retry pending. Returns the
    number of DAGs replaced.
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
    if not stalled:
        return 0
    with ctx.db.engine.connect() as conn:
        found = runs.unfinished_members(conn, run_id, list(stalled))
        kind = runs.get_run(conn, run_id).kind
    # every DAG holding a slot (running), and at most one concurrency window of queued ones per sweep
    running = [m for m in found if stalled.get(m[1]) == V1TaskStatus.RUNNING.value]
    queued = [m for m in found if stalled.get(m[1]) != V1TaskStatus.RUNNING.value]
    members = running + queued[: ctx.settings.hatchet_document_concurrency]
    if not members:
        return 0
    wfs = ki_workflows(client, ctx.settings)
    wf = wfs.access_refresh if kind == runs.KIND_ACCESS_REFRESH else wfs.document
    ensure_registered(client, wf)
    import uuid

    attempt = uuid.uuid4().hex[:8]
    oids = [oid for oid, _ in members]
    for i in range(0, len(oids), TRIGGER_CHUNK):
        pairs, _ = _trigger_chunk(wf, run_id, oids[i:i + TRIGGER_CHUNK], attempt=attempt)
        with ctx.db.engine.begin() as conn:
            runs.record_workflow_runs(conn, run_id, pairs)
    client.runs.bulk_cancel(BulkCancelReplayOpts(ids=[wid for _, wid in members]))
    log.warning("run %s: superseded %d stalled document DAG(s)", run_id, len(members))
    return len(members)


def run_counters(ctx: PipelineContext, run_id: int) -> tuple[str, Any, str | None]:
    """(status, RunCounters, error) of a run row."""
    from ki.orchestration.runner import RunCounters

    with ctx.db.engine.connect() as conn:
        r = runs.get_run(conn, run_id)
    if r is None:
        raise LookupError(f"pipeline run {run_id} does not exist")
    return r.status, RunCounters(processed=r.processed, done=r.done, skipped=r.skipped, retried=r.retried,
                                 quarantined=r.quarantined), r.error


def wait_for_run(ctx: PipelineContext, run_id: int, *, on_tick: Callable[[Any], None] | None = None,
                 poll_seconds: float = 0.5, timeout_seconds: float | None = None) -> tuple[str, Any, str | None]:
    """Poll the run row until it is no longer active, calling ``on_tick(RunnerStatus)`` each poll.

    The status carries the run row's counters, the batch's claimed rows (``active``) and, when
    only retries are outstanding, the earliest one due (``waiting_for_retry``). Every
    ``KI_RUN_SWEEP_SECONDS`` the run is offered to the sweeper (it examines only a silent run).
    Returns (status, RunCounters, error); on ``timeout_seconds`` the status is still ``running``.
    """
    from ki.orchestration.runner import RunnerStatus
    from ki.orchestration.sweeper import sweep_runs

    deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
    sweep_every = ctx.settings.run_sweep_seconds
    last_sweep = time.monotonic()
    states: list[runs.BatchState] = []
    last_states = 0.0
    while True:
        status, counters, error = run_counters(ctx, run_id)
        if on_tick is not None:
            if time.monotonic() - last_states >= 2.0:  # the batch aggregate reads every row of the batch
                with ctx.db.engine.connect() as conn:
                    states = runs.batch_states(conn, [run_id])
                last_states = time.monotonic()
            tick = RunnerStatus(counters, states[0].running_rows if states else 0)
            if states and states[0].next_retry_at is not None and not states[0].running_rows:
                tick.waiting_for_retry = (states[0].next_retry_at, 1)
            on_tick(tick)
        if status not in runs.ACTIVE_RUN_STATUSES:
            return status, counters, error
        if deadline is not None and time.monotonic() > deadline:
            return status, counters, error
        if sweep_every and time.monotonic() - last_sweep >= sweep_every:
            last_sweep = time.monotonic()
            try:
                sweep_runs(ctx, run_ids=[run_id])
            except Exception as exc:  # noqa: BLE001 - the sweep is opportunistic
                log.warning("sweep of run %s failed: %s", run_id, exc)
        time.sleep(poll_seconds)


def launch_sync(ctx: PipelineContext, source_id: int, *, trigger: str = "api") -> int:
    """Create a ``sync`` run for ``source_id`` and trigger the ``ki-sync`` workflow. Returns the run id.

    Raises:
        OrchestratorUnavailable: no client or the engine refused (the run is failed with the cause).
        sqlalchemy.exc.IntegrityError: the source already has an unfinished sync run
            (``uq_pipeline_runs_active_sync``).
    """
    from ki.workflows.sync import SyncInput

    with ctx.db.engine.begin() as conn:
        run_id = runs.create_run(conn, kind=runs.KIND_SYNC, label="Sync", provider="hatchet", status="queued",
                                 source_id=source_id, trigger=trigger)
    try:
        hatchet = hatchet_client()
        wfs = ki_workflows(hatchet, ctx.settings)
        ensure_registered(hatchet, wfs.sync)
        ref = wfs.sync.run(SyncInput(run_id=str(run_id), source_id=str(source_id)), wait_for_result=False,
                           additional_metadata={"ki_run_id": str(run_id), "ki_source_id": str(source_id)})
    except Exception as exc:  # noqa: BLE001
        with ctx.db.engine.begin() as conn:
            runs.fail_run(conn, run_id, f"trigger failed: {type(exc).__name__}: {exc}")
        if isinstance(exc, OrchestratorUnavailable):
            raise
        raise OrchestratorUnavailable(f"Hatchet refused the sync trigger of run {run_id}: {exc}") from exc
    with ctx.db.engine.begin() as conn:
        runs.set_workflow_run(conn, run_id, ref.workflow_run_id)
    return run_id
