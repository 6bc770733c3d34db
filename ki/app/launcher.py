"""Starting insertion runs from the API without blocking requests.

Spec: insertion-pipeline.md "Orchestration": every trigger goes through ``launch_insertion``; the
``local`` provider runs ``PipelineRunner.run_until_idle()`` inside the API process. Here that run
executes in one background thread per server; a launch while it is active does not start a second
runner beside it (both would only compete for the same rows) but records a **follow-up**: when the
active run ends, one more run starts, so work queued meanwhile (a saved re-run, a quarantine retry —
whose rows the running run's prepare steps have not seen) is picked up without anyone asking again.
With the ``hatchet`` provider a launch triggers the batch and returns (the engine runs it).

A sync (:meth:`RunLauncher.sync`, ``POST /api/actions/sync``) goes through ``launch_sync``:
with ``local`` the scan runs in a thread of its own and hands off to this launcher's insertion run
(or records the active one, with a follow-up behind it); with ``hatchet`` the ``ki-sync`` workflow is
triggered and the call returns.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ki.app.launch import launch_insertion, launch_sync
from ki.domain.context import PipelineContext

log = logging.getLogger(__name__)

#: Seconds a launch waits for the background run to create its run row.
START_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class Launch:
    """What a launch did: ``run_id`` of the run started (or already active), and whether a
    ``follow_up`` run was scheduled behind an active one."""

    run_id: int | None
    follow_up: bool


class RunLauncher:
    """One per server: launches insertion runs (see module doc). Thread-safe.

    ``on_change``: called (no arguments, never raising) when a run of this launcher created its row and when it
    ended — the server forgets the status and runs answers it shares (``ki.api.state.ServerState.changed``)."""

    def __init__(self, ctx: PipelineContext, on_change: Callable[[], None] | None = None):
        self.ctx = ctx
        self.on_change = on_change
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._current: int | None = None
        self._follow_up = False
        self._started = threading.Event()
        self._error: BaseException | None = None

    @property
    def active_run_id(self) -> int | None:
        """The run id the background thread executes now (None when idle)."""
        with self._lock:
            return self._current if self._thread is not None else None

    def launch(self, *, trigger: str) -> Launch:
        """Start an insertion run (``trigger`` is recorded on the run row).

        Raises:
            OrchestratorUnavailable: the ``hatchet`` provider has no engine configured, or refused.
            TimeoutError: a local run did not create its row within :data:`START_TIMEOUT_SECONDS`.
        """
        self.ctx.reload_config()
        if self.ctx.config.components.orchestrator_provider != "local":
            summary = launch_insertion(self.ctx, trigger=trigger, wait=False)
            return Launch(summary.run_id, False)
        with self._lock:
            if self._thread is not None:
                self._follow_up = True
                return Launch(self._current, True)
            self._started.clear()
            self._current = None
            self._error = None
            self._thread = threading.Thread(target=self._loop, args=(trigger,), name="ki-api-run", daemon=True)
            self._thread.start()
        if not self._started.wait(START_TIMEOUT_SECONDS):
            raise TimeoutError("the insertion run did not start within "
                               f"{START_TIMEOUT_SECONDS:g} s; see the server log")
        with self._lock:
            if self._current is None and self._error is not None:
                raise self._error
            return Launch(self._current, False)

    def sync(self, source_id: int, *, trigger: str) -> int:
        """Start a sync run of ``source_id``; returns its run id once its row exists.

        Raises:
            SyncAlreadyRunning: the source has an unfinished sync run (nothing is written).
            OrchestratorUnavailable: the ``hatchet`` provider has no engine configured, or refused.
            TimeoutError: the local sync did not create its row within :data:`START_TIMEOUT_SECONDS`.
        """
        self.ctx.reload_config()
        if self.ctx.config.components.orchestrator_provider != "local":
            return launch_sync(self.ctx, source_id, trigger=trigger).run_id
        started = threading.Event()
        box: dict[str, object] = {}

        def on_started(run_id: int) -> None:
            box["run_id"] = run_id
            started.set()

        def body() -> None:
            try:
                launch_sync(self.ctx, source_id, trigger=trigger, hand_off=self.hand_off, on_started=on_started)
            except Exception as exc:  # noqa: BLE001 - raised to the request below, or logged
                box["error"] = exc
                if started.is_set():
                    log.exception("sync of source %s from the API failed", source_id)
            finally:
                started.set()

        threading.Thread(target=body, name=f"ki-api-sync-{source_id}", daemon=True).start()
        if not started.wait(START_TIMEOUT_SECONDS):
            raise TimeoutError(f"the sync did not start within {START_TIMEOUT_SECONDS:g} s; see the server log")
        if "run_id" not in box:
            raise box["error"]  # type: ignore[misc]
        return int(box["run_id"])  # type: ignore[arg-type]

    def hand_off(self, ctx: PipelineContext, source_id: int, on_started: Callable[[int], None]) -> int | None:
        """A sync's hand-off (ki.adapters.sources.sync.HandOff) to this launcher: starts the background insertion run,
        or, while one is active, records that run (a follow-up run picks up what it may miss)."""
        launch = self.launch(trigger="sync")
        if launch.run_id is not None:
            on_started(launch.run_id)
        return launch.run_id

    def _on_started(self, run_id: int) -> None:
        with self._lock:
            self._current = run_id
        self._changed()
        self._started.set()

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:  # noqa: BLE001 - a listener must not stop a run
                log.exception("run change listener failed")

    def _loop(self, trigger: str) -> None:
        try:
            while True:
                cancelled = False
                try:
                    cancelled = launch_insertion(self.ctx, trigger=trigger,
                                                 on_started=self._on_started).status == "cancelled"
                except Exception as exc:  # noqa: BLE001 - launch_insertion records run failures; log the rest
                    log.exception("insertion run from the API failed")
                    with self._lock:
                        self._error = exc
                finally:
                    self._changed()
                    self._started.set()
                with self._lock:
                    if cancelled:  # ki run cancel: no follow-up run undoes it
                        self._follow_up = False
                    if not self._follow_up:
                        self._thread = None
                        self._current = None
                        return
                    self._follow_up = False
                trigger = "follow_up"
        except BaseException:
            with self._lock:
                self._thread = None
                self._current = None
            raise

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no run is active in this process (tests, shutdown). True when idle."""
        with self._lock:
            thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()
