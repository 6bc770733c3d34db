"""The model-stage capacity reserve under Hatchet: worker labels, and a reserve worker beside each ``ki worker``.

Spec: DESIGN.md "Lanes" (claims … reserve a share of workers for the model stages) and work-queue.md "1. Poll"
(bounded capacity reserved for extraction before the general queue); the decision "The model-stage reserve as
Hatchet worker labels" (docs/design-decisions.md). The local provider reserves ``pipeline.lanes.model_workers``
of its workers (default a quarter, :func:`ki.store.lanes.model_workers`): they claim model-stage rows first.

Under Hatchet a slot is a worker's, and which tasks a worker may run is said by labels:

* every ``ki worker`` registers with the label ``ki-pool=general`` (:data:`POOL_LABEL`);
* a document DAG with a model stage declares its other tasks (fetch, convert, index) with the *required*
  desired label ``ki-pool=general``, and its model-stage tasks with the *preferred* desired label
  ``ki-pool=model`` (weight 1, not required): the engine (v0.105.0 ``rankWorkerIds``) gives a model task a slot
  of a ``model`` worker first and of a ``general`` one only when every ``model`` slot is busy, and never gives
  a ``model`` slot to any other task;
* a ``ki worker`` whose enabled stages include a model stage keeps :func:`reserve_slots` of its
  ``KI_WORKER_SLOTS`` for them: it serves ``slots - reserve`` as the ``general`` worker and starts
  :class:`ReserveWorker`, a second worker process (the same command, ``KI_WORKER_POOL=model``) with the
  ``reserve`` slots, which ends with it (``PR_SET_PDEATHSIG`` when it is killed);
* ``KI_WORKER_POOL=model ki worker`` runs a dedicated reserve worker (only model-stage tasks), for a reserve
  on hosts of its own.

DAGs without a model stage (the access refresh, the sync, a pipeline with the model stages off) declare no
labels, so any worker runs them. Unlike the local reserve, a ``model`` slot idles while no model task waits
(a Hatchet worker cannot take "model first, then anything" from the engine).
"""

from __future__ import annotations

import ctypes
import logging
import signal
import subprocess
import sys
from typing import Any

from ki.config.process import WorkerPoolSettings, child_environment, current
from ki.core.errors import ConfigurationError
from ki.core.taxonomies import MODEL_STAGES
from ki.store.lanes import model_workers

log = logging.getLogger(__name__)

POOL_LABEL = "ki-pool"
GENERAL = "general"
MODEL = "model"
#: ``general`` (default) or ``model``: which pool this worker process's slots are.
POOL_ENV = "KI_WORKER_POOL"
#: Set by a ``general`` worker for the reserve worker it starts: the reserve's slots (over ``--slots``).
POOL_SLOTS_ENV = "KI_WORKER_POOL_SLOTS"
_PR_SET_PDEATHSIG = 1


def worker_pool() -> str:
    """This process's pool from ``KI_WORKER_POOL`` (``general`` when unset).

    Raises: ConfigurationError for another value."""
    pool = current(WorkerPoolSettings).pool.strip().lower()
    if pool not in (GENERAL, MODEL):
        raise ConfigurationError(f"{POOL_ENV} must be {GENERAL!r} or {MODEL!r}, not {pool!r}")
    return pool


def has_model_stage(stages: tuple[str, ...] | list[str]) -> bool:
    """Whether a DAG of ``stages`` has a model stage (then its tasks carry pool labels)."""
    return any(s in MODEL_STAGES for s in stages)


def task_labels(stage: str, stages: tuple[str, ...]) -> list[Any] | None:
    """The desired worker labels of ``stage``'s task in a DAG of ``stages`` (SDK ``DesiredWorkerLabel``s), or
    None when the DAG has no model stage: a model stage prefers ``model`` workers, any other stage requires a
    ``general`` one."""
    if not has_model_stage(stages):
        return None
    from hatchet_sdk.labels import DesiredWorkerLabel

    if stage in MODEL_STAGES:
        return [DesiredWorkerLabel(key=POOL_LABEL, value=MODEL, required=False, weight=1)]
    return [DesiredWorkerLabel(key=POOL_LABEL, value=GENERAL, required=True)]


def reserve_slots(slots: int, enabled_stages: tuple[str, ...], configured: int | None) -> int:
    """How many of a ``general`` worker's ``slots`` go to its reserve worker: 0 without a model stage among
    ``enabled_stages``, else :func:`ki.store.lanes.model_workers` (``pipeline.lanes.model_workers``, default a
    quarter rounded up; never all of them, 0 for one slot)."""
    return model_workers(slots, configured) if has_model_stage(enabled_stages) else 0


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


class ReserveWorker:
    """The reserve worker process of a ``general`` worker: this process's command line again
    (``sys.orig_argv``) with ``KI_WORKER_POOL=model`` and ``KI_WORKER_POOL_SLOTS=slots``, in this process group,
    ending when this process ends (SIGTERM on its death, :meth:`stop` on a graceful one)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.process: subprocess.Popen | None = None

    def start(self) -> ReserveWorker:
        """Start it. Raises OSError when the process cannot start."""
        env = child_environment(**{POOL_ENV: MODEL, POOL_SLOTS_ENV: str(self.slots)})
        self.process = subprocess.Popen([sys.executable, *sys.orig_argv[1:]], env=env,
                                        preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        log.info("ki worker: %d slot(s) reserved for the model stages (reserve worker pid %d)", self.slots,
                 self.process.pid)
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (Hatchet's graceful drain) and wait up to ``timeout`` s, then SIGKILL."""
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
