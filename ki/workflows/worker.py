"""``ki worker``: a Hatchet worker with ki's workflows, plus the run sweeper on a timer.

The worker wires the task bodies (:mod:`ki.workflows.task`, :mod:`ki.workflows.sync`) to what they
start beyond their own rows: the DAGs of members the batch's conveyor released
(:func:`ki.workflows.trigger.trigger_members`) and the insertion run after a sync
(``ki.app.launch.launch_insertion``).

Which document workflows it serves (decision "Hatchet DAG shape and pacing", DESIGN.md): the DAG of
the enabled stages of the configuration it loaded, plus the DAG of every active batch (a batch in
flight keeps the DAG it was triggered with), plus ``ki-access-refresh`` and ``ki-sync``
(:func:`served_workflows`). The SDK registers a worker's workflows only when it starts, so when a
configuration change (``ki config set``, seen within :data:`WATCH_SECONDS`) or a batch launched
elsewhere needs a workflow this worker does not serve, the worker drains (Hatchet's graceful
shutdown: no new tasks, running ones finish) and re-executes its own command line
(:func:`run_worker`), which registers the new set; a worker with nothing new keeps running.

Spec: insertion-pipeline.md "Orchestration" (the sweeper runs on a timer inside the Hatchet
worker, every ``KI_RUN_SWEEP_SECONDS``). The worker blocks until SIGTERM/SIGINT. It must run in
a normal (non-daemon) process: the SDK's ``worker.start()`` spawns processes of its own.

Environment: ``HATCHET_CLIENT_*`` (token, host:port, server URL, TLS strategy, namespace) and
ki's own (``KI_DATABASE_URL``/``KI_DATA_DIR``, ``KI_WORKER_SLOTS``, the concurrency variables).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading

from ki.config.process import WorkerPoolSettings, current, prefer_sleeping_omp_threads
from ki.domain.context import PipelineContext
from ki.workflows.task import HandOff

log = logging.getLogger(__name__)

#: How often the worker compares the workflows it serves with those it should serve (s).
WATCH_SECONDS = 5.0


def served_workflows(ctx: PipelineContext) -> set[str]:
    """The document workflows a worker should serve now: the enabled stages' DAG of ``ctx``'s
    configuration and the recorded DAG of every active ``hatchet`` batch."""
    from ki.store.conveyor import active_workflow_names
    from ki.workflows.dag import document_stages, document_workflow_name

    with ctx.db.engine.connect() as conn:
        active = active_workflow_names(conn)
    return {document_workflow_name(document_stages(ctx.config))} | active


class WorkflowWatch(threading.Thread):
    """Every :data:`WATCH_SECONDS`: reload the configuration and, when a workflow this worker does
    not serve is now needed (:func:`served_workflows`), set :attr:`restart` and send this process
    SIGTERM (the SDK's graceful shutdown). A database blip is logged and retried."""

    def __init__(self, ctx: PipelineContext, serving: set[str], interval: float = WATCH_SECONDS):
        super().__init__(name="ki-workflow-watch", daemon=True)
        self.ctx, self.serving, self.interval = ctx, set(serving), interval
        self.restart = threading.Event()
        self.stop_event = threading.Event()

    def check(self) -> set[str]:
        """The workflows needed but not served (empty: nothing to do)."""
        self.ctx.reload_config()
        return served_workflows(self.ctx) - self.serving

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            try:
                missing = self.check()
            except Exception as exc:  # noqa: BLE001 - keep watching through a database blip
                log.warning("workflow watch failed: %s", exc)
                continue
            if missing:
                log.warning("ki worker: %s now needed (configuration changed or a batch uses it); draining and "
                            "restarting to register it", ", ".join(sorted(missing)))
                self.restart.set()
                os.kill(os.getpid(), signal.SIGTERM)
                return

    def stop(self) -> None:
        self.stop_event.set()


def run_worker(*, hand_off: HandOff, slots: int | None = None, name: str | None = None, sweep: bool = True) -> None:
    """Open ki's database, declare the workflows, start the sweeper and the workflow watch, and run
    the Hatchet worker until SIGTERM/SIGINT.

    When the workflow watch asks for a restart, the worker drains and then re-executes this
    process's command line (``sys.orig_argv``: ``ki worker …``, or the test/bench helper), which
    registers the workflows needed then.

    Args:
        hand_off: how a sync task hands off to an insertion run (``(ctx, source_id, on_started) -> run id``;
            ``ki worker`` gives :func:`ki.app.launch.hand_off_to_insertion`): the caller wires it, so the provider
            never imports the launcher above it.
        slots: concurrent tasks (default ``KI_WORKER_SLOTS``, 8). With a model stage enabled, a ``general`` worker
            (``KI_WORKER_POOL``, :mod:`ki.workflows.pools`) keeps ``pipeline.lanes.model_workers`` of them (default
            a quarter) for the model stages, in a reserve worker process it starts and stops.
        name: worker name shown by Hatchet (default ``ki-<host>``).
        sweep: run the sweeper timer (``KI_RUN_SWEEP_SECONDS``; 0 disables it anyway).
    Raises:
        OrchestratorUnavailable: no Hatchet token / configuration.
        ConfigurationError: ki's database cannot be opened.
    """
    from ki.orchestration.archive import DailyArchiver
    from ki.workflows.client import hatchet_client
    from ki.workflows.dag import document_stages, worker_workflows
    from ki.workflows.pools import GENERAL, MODEL, POOL_LABEL, ReserveWorker, reserve_slots, worker_pool
    from ki.workflows.sweeper import SweeperThread
    from ki.workflows.task import worker_runtime
    from ki.workflows.trigger import trigger_members

    # the in-process embedding engine's OpenMP threads sleep while they wait instead of spinning: worker processes
    # (and a reserve) share the cores, and spinning cost ~60 % more CPU per document (bench/hatchet.py --real-work:
    # 1.6 vs 1.0 CPU-s per document in the workers; the local run the same either way). Before the engine loads.
    prefer_sleeping_omp_threads()
    hatchet = hatchet_client()
    pool = worker_pool()
    reserve_slots_set = current(WorkerPoolSettings).pool_slots
    if pool == MODEL and reserve_slots_set:  # the reserve worker a general worker started
        slots = reserve_slots_set
    rt = worker_runtime(slots)
    # what the task bodies start beyond their own rows (they never import the trigger or the launcher)
    rt.trigger_members = trigger_members
    rt.hand_off = hand_off
    n = slots or rt.ctx.settings.worker_slots
    reserve = reserve_slots(n, document_stages(rt.ctx.config), rt.ctx.config.pipeline.lanes.model_workers) \
        if pool == GENERAL else 0
    serving = served_workflows(rt.ctx)
    workflows = worker_workflows(hatchet, rt.ctx.settings, serving)
    general = pool == GENERAL  # the sweeper and the archive run beside the general worker only
    sweeper = SweeperThread(rt.ctx) if sweep and general else None
    if sweeper is not None and sweeper.interval:
        sweeper.start()
    watch = WorkflowWatch(rt.ctx, serving)
    watch.start()
    archiver = DailyArchiver(rt.ctx) if general else None  # cold history: one pass a day
    if archiver is not None:
        archiver.start()
    worker = hatchet.worker(f"{name or f'ki-{socket.gethostname()}'}{'' if general else '-model'}", slots=n - reserve,
                            labels={POOL_LABEL: pool}, workflows=workflows)
    log.info("ki worker (%s pool): %d slots, workflows %s", pool, n - reserve, ", ".join(w.name for w in workflows))
    reserved = ReserveWorker(reserve).start() if reserve else None
    try:
        worker.start()
    except SystemExit:
        if not watch.restart.is_set():
            raise
    finally:
        watch.stop()
        if reserved is not None:
            reserved.stop()
        if archiver is not None:
            archiver.stop()
        if sweeper is not None:
            sweeper.stop()
        rt.keeper.stop()
    if watch.restart.is_set():
        log.warning("ki worker: restarting: %s", " ".join(sys.orig_argv))
        logging.shutdown()
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
