"""What the app's routes share: the pipeline context, the run launcher, the current configuration, the answers
shared by concurrent readers (:mod:`ki.api.shared_answers`).

One :class:`ServerState` per app, at ``app.state.ki``; :func:`server_state` is the FastAPI
dependency that hands it to a route.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from fastapi import Request

from ki.api.shared_answers import FreshReads, SharedAnswers
from ki.api.status_cache import BucketCache
from ki.app.config_edits import config_version
from ki.app.launcher import RunLauncher
from ki.app.token_cache import TokenCache
from ki.config.settings import KiConfig
from ki.domain.context import PipelineContext

log = logging.getLogger(__name__)

#: The API asks for an opportunistic run sweep at most this often (seconds); the sweeper has its own
#: ``KI_RUN_SWEEP_SECONDS`` gate on top.
SWEEP_CHECK_SECONDS = 10.0
#: Seconds one ``GET /api/status`` answer (per principal) and one ``GET /api/runs`` page serve every reader.
STATUS_SECONDS = 1.0
RUNS_SECONDS = 1.0
#: Seconds one search page serves every reader of the same query, options, access set and index generation
#: (:mod:`ki.api.search_answers`); a change of the index is a new generation, so this bounds only the staleness of
#: what the record adds to a hit (path, matter, version, "missing since") without a change of the index.
SEARCH_SECONDS = 2.0
#: Search pages kept at most.
SEARCH_ENTRIES = 256


@dataclass
class ServerState:
    """The context every route uses (``ctx.db``, ``ctx.settings``), the launcher, the shared bucket
    counts (:mod:`ki.api.status_cache`), the config cache and the shared answers of the status, runs and search
    reads (``*_answers``: :class:`ki.api.shared_answers.SharedAnswers`) and the authenticated bearer tokens
    (:class:`ki.app.token_cache.TokenCache`, started with the app's lifespan: until then it serves nothing)."""

    ctx: PipelineContext
    launcher: RunLauncher
    buckets: BucketCache
    tokens: TokenCache
    status_answers: SharedAnswers = field(default_factory=lambda: SharedAnswers(STATUS_SECONDS, max_entries=64))
    runs_answers: SharedAnswers = field(default_factory=lambda: SharedAnswers(RUNS_SECONDS, max_entries=64))
    search_answers: SharedAnswers = field(default_factory=lambda: SharedAnswers(SEARCH_SECONDS,
                                                                                max_entries=SEARCH_ENTRIES))
    _version: str = ""
    _generations: tuple[str, FreshReads] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _sweeping: threading.Event = field(default_factory=threading.Event)
    _last_sweep: float = 0.0

    def config(self) -> KiConfig:
        """The effective configuration, re-read when the saved file's version changed (another
        process, ``ki config set``, or this server's own ``PUT /api/config``)."""
        return self.versioned_config()[0]

    def versioned_config(self) -> tuple[KiConfig, str]:
        """(:meth:`config`, the saved file's version it was read at)."""
        version = config_version(self.ctx.settings.data_dir)
        with self._lock:
            if version != self._version:
                self.ctx.reload_config()
                self._version = version
            return self.ctx.config, version

    def index_generation(self, config: KiConfig, version: str) -> tuple[int, int]:
        """The search index's generation (:meth:`ki.adapters.search.backend.SearchBackend.generation`) under the
        configuration of ``version``, read after this call began: concurrent searches share one read
        (:class:`ki.api.shared_answers.FreshReads`), so each still sees every change committed before it asked."""
        with self._lock:
            if self._generations is None or self._generations[0] != version:
                from ki.adapters.search.factory import backend_for

                backend = backend_for(self.ctx.db, config)
                self._generations = (version, FreshReads(backend.generation))
            reads = self._generations[1]
        return reads.get()

    def changed(self) -> None:
        """This server changed something (a save, a launch, a cancel): the next status and runs reads count
        afresh, so what a person just did is on the screen at once. (Search pages are keyed by the index's
        generation and the configuration's version: a change of either is a new key.)"""
        self.buckets.invalidate()
        self.status_answers.invalidate()
        self.runs_answers.invalidate()

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


async def server_state(request: Request) -> ServerState:
    """FastAPI dependency: the app's :class:`ServerState` (async: no worker-thread hop for an attribute read)."""
    return request.app.state.ki
