"""What the app's routes share: the pipeline context, the run launcher, the current configuration.

One :class:`ServerState` per app, at ``app.state.ki``; :func:`server_state` is the FastAPI
dependency that hands it to a route.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from fastapi import Request

from ki.api.status_cache import BucketCache
from ki.app.config_edits import config_version
from ki.app.launcher import RunLauncher
from ki.config.settings import KiConfig
from ki.domain.context import PipelineContext

log = logging.getLogger(__name__)

#: The API asks for an opportunistic run sweep at most this often (seconds); the sweeper has its own
#: ``KI_RUN_SWEEP_SECONDS`` gate on top.
SWEEP_CHECK_SECONDS = 10.0


@dataclass
class ServerState:
    """The context every route uses (``ctx.db``, ``ctx.settings``), the launcher, the shared bucket
    counts (:mod:`ki.api.status_cache`) and the config cache."""

    ctx: PipelineContext
    launcher: RunLauncher
    buckets: BucketCache
    _version: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _sweeping: threading.Event = field(default_factory=threading.Event)
    _last_sweep: float = 0.0

    def config(self) -> KiConfig:
        """The effective configuration, re-read when the saved file's version changed (another
        process, ``ki config set``, or this server's own ``PUT /api/config``)."""
        version = config_version(self.ctx.settings.data_dir)
        with self._lock:
            if version != self._version:
                self.ctx.reload_config()
                self._version = version
            return self.ctx.config

    def sweep_soon(self) -> None:
        """The opportunistic sweep of GET /api/status and /api/runs (spec: "the sweeper"), in a background
        thread so a status read never waits on the orchestrator; at most one at a time."""
        now = time.monotonic()
        if self._sweeping.is_set() or now - self._last_sweep < SWEEP_CHECK_SECONDS:
            return
        self._last_sweep = now
        self._sweeping.set()

        def sweep() -> None:
            from ki.workflows.sweeper import sweep_if_due

            try:
                sweep_if_due(self.ctx)
            finally:
                self._sweeping.clear()

        threading.Thread(target=sweep, name="ki-api-sweep", daemon=True).start()


def server_state(request: Request) -> ServerState:
    """FastAPI dependency: the app's :class:`ServerState`."""
    return request.app.state.ki
