"""``ki worker``: a Hatchet worker with ki's workflows, plus the run sweeper on a timer.

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
    from ki.orchestration.providers.hatchet import hatchet_client, ki_workflows
    from ki.orchestration.sweeper import SweeperThread
    from ki.workflows.runtime import worker_runtime

    hatchet = hatchet_client()
    rt = worker_runtime(slots)
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
