"""``ki worker``: a Hatchet worker with ki's workflows, plus the run sweeper on a timer.

The worker wires the task bodies (:mod:`ki.workflows.task`, :mod:`ki.workflows.sync`) to what they
start beyond their own rows: DAGs for adopted members (:func:`ki.workflows.trigger.trigger_members`)
and the insertion run after a sync (``ki.launch.launch_insertion``).

Spec: insertion-pipeline.md "Orchestration" (the sweeper runs on a timer inside the Hatchet
worker, every ``KI_RUN_SWEEP_SECONDS``). The worker blocks until SIGTERM/SIGINT. It must run in
a normal (non-daemon) process: the SDK's ``worker.start()`` spawns processes of its own.

Environment: ``HATCHET_CLIENT_*`` (token, host:port, server URL, TLS strategy, namespace) and
ki's own (``KI_DATABASE_URL``/``KI_DATA_DIR``, ``KI_WORKER_SLOTS``, the concurrency variables).
"""

from __future__ import annotations

import logging
import socket

log = logging.getLogger(__name__)


def run_worker(*, slots: int | None = None, name: str | None = None, sweep: bool = True) -> None:
    """Open ki's database, declare the workflows, start the sweeper thread and the Hatchet worker.

    Args:
        slots: concurrent tasks (default ``KI_WORKER_SLOTS``, 8).
        name: worker name shown by Hatchet (default ``ki-<host>``).
        sweep: run the sweeper timer (``KI_RUN_SWEEP_SECONDS``; 0 disables it anyway).
    Raises:
        OrchestratorUnavailable: no Hatchet token / configuration.
        ConfigurationError: ki's database cannot be opened.
    """
    from ki.launch import launch_insertion
    from ki.workflows.client import hatchet_client
    from ki.workflows.dag import ki_workflows
    from ki.workflows.sweeper import SweeperThread
    from ki.workflows.task import worker_runtime
    from ki.workflows.trigger import trigger_members

    hatchet = hatchet_client()
    rt = worker_runtime(slots)
    # what the task bodies start beyond their own rows (they never import the trigger or the launcher)
    rt.trigger_members = trigger_members
    rt.hand_off = lambda ctx, source_id, on_started: launch_insertion(ctx, trigger="sync", source_id=source_id,
                                                                      on_started=on_started).run_id
    n = slots or rt.ctx.settings.worker_slots
    workflows = ki_workflows(hatchet, rt.ctx.settings)
    sweeper = SweeperThread(rt.ctx) if sweep else None
    if sweeper is not None and sweeper.interval:
        sweeper.start()
    worker = hatchet.worker(name or f"ki-{socket.gethostname()}", slots=n, workflows=workflows.all())
    log.info("ki worker: %d slots, workflows %s", n, ", ".join(w.name for w in workflows.all()))
    try:
        worker.start()
    finally:
        if sweeper is not None:
            sweeper.stop()
        rt.keeper.stop()
