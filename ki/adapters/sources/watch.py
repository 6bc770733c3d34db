"""The folder watcher: file-system changes of local-folder sources turned into syncs of just what changed.

``ki watch`` and ``ki serve --watch``; prior-art.md §8 (paperless-ngx's consumer and what
its users hit). Per source, one :class:`SourceWatcher`:

* an **observer** thread runs ``watchfiles`` on the root: native events (inotify) where they work,
  polling where they do not (``watch_mode``: the source's setting, else ``poll`` on a network file
  system, :mod:`ki.adapters.sources.mounts`). It beats on every wake-up (events or a one-second timeout); an
  observer that stopped (thread ended, or silent for :data:`OBSERVER_SILENCE_SECONDS`) is replaced and a
  full rescan follows (events may have been lost meanwhile);
* the events go through a :class:`~ki.adapters.sources.settle.Settler` (settle window, one candidate per
  arriving file, busy files retried, folders moved in expanded, ignored names counted by reason);
* settled paths are synced through the caller's ``sync`` function (``ki.app.launch.launch_sync`` with a
  :class:`~ki.adapters.sources.scan.ScanScope` of those paths: the same scan code as a full sync, so ignore rules,
  hashing, renames, tombstones and deletion confirmations are one code path; a file seen deleted while its
  folder is still listed is tombstoned by that scan, up to ``pipeline.watch.delete_at_once_max`` at once,
  :func:`ki.adapters.sources.scan.seen_gone`). A sync refused because
  another sync of the source runs is tried again on the next tick;
* a **full rescan** runs on start (nothing missed while no watcher ran, nothing redone that is done: the
  scan compares sizes, mtimes and hashes) and every ``pipeline.watch.rescan_seconds``; files modified
  within the settle window, or pending, are deferred to the settler rather than taken half-written;
* the root is checked on every tick: a root that is missing or unreadable **pauses** the source with
  the reason recorded (no scan, so nothing is tombstoned); a root replaced by another folder restarts
  the observer; when the root is back, watching resumes with a full rescan;
* the health (mode, state, paused and why, last event, last full scan, files seen / queued / ignored by
  reason, observer restarts) is written to ``source_watch`` every few seconds (:mod:`ki.store.watch`).
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from ki.adapters.observability.metrics import WATCH_FILES
from ki.adapters.sources.mounts import watch_mode_for
from ki.adapters.sources.names import display_form
from ki.adapters.sources.scan import ScanScope
from ki.adapters.sources.settle import Settler
from ki.core.errors import SourceUnavailable, SyncAlreadyRunning
from ki.domain.context import PipelineContext
from ki.store import watch as health_store

log = logging.getLogger(__name__)

#: Seconds between the watcher's ticks (settle checks, root checks, flushes).
TICK_SECONDS = 0.25
#: Seconds between health writes (and heartbeats) to the database.
HEALTH_SECONDS = 2.0
#: An observer that has not woken for this long (it wakes at least every second) is restarted.
OBSERVER_SILENCE_SECONDS = 30.0
#: watchfiles' grouping of events (ms): short, the settle window does the waiting.
DEBOUNCE_MS = 100


class SyncOutcome(Protocol):
    """What the ``sync`` function returns (``ki.app.launch.SyncSummary``)."""

    status: str
    error: str | None
    cause: BaseException | None
    report: Any


#: ``sync(source_id, scope) -> SyncOutcome``; raises SyncAlreadyRunning when the source is being synced.
SyncFn = Callable[[int, ScanScope], SyncOutcome]


@dataclass
class SourceWatcher:
    """The watch of one source (module doc). Driven by :meth:`tick`; thread-safe only for the observer's
    event queue."""

    source_id: int
    root: Path
    mode: str
    mode_reason: str
    settle_seconds: float
    rescan_seconds: float
    poll_seconds: float
    delete_at_once_max: int = 0
    state: str = "starting"
    paused_reason: str | None = None
    last_event_at: datetime | None = None
    last_full_scan_at: datetime | None = None
    files_queued: int = 0
    restarts: int = 0
    settler: Settler = field(init=False)
    events: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    _observer: threading.Thread | None = None
    _observer_stop: threading.Event | None = None
    _beat: float = 0.0
    _identity: tuple[int, int] | None = None
    _next_rescan: float = 0.0
    _retry: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.settler = Settler(self.root, self.settle_seconds)

    # -- observer ------------------------------------------------------------------------------------

    def start_observer(self) -> None:
        """Start (or replace) the observer thread on the root."""
        self.stop_observer()
        stop = threading.Event()
        self._observer_stop = stop
        self._beat = time.monotonic()
        self._observer = threading.Thread(target=self._observe, args=(stop,), daemon=True,
                                          name=f"ki-watch-{self.source_id}")
        self._observer.start()

    def stop_observer(self) -> None:
        """Stop the observer thread (it ends within a second)."""
        if self._observer_stop is not None:
            self._observer_stop.set()
        if self._observer is not None:
            self._observer.join(timeout=5)
        self._observer = self._observer_stop = None

    def observer_alive(self, now: float) -> bool:
        """True while the observer thread runs and has woken within :data:`OBSERVER_SILENCE_SECONDS`."""
        return (self._observer is not None and self._observer.is_alive()
                and now - self._beat < OBSERVER_SILENCE_SECONDS)

    def _observe(self, stop: threading.Event) -> None:
        import watchfiles

        try:
            for changes in watchfiles.watch(
                    self.root, watch_filter=None, debounce=DEBOUNCE_MS, step=50, stop_event=stop,
                    rust_timeout=1000, yield_on_timeout=True, force_polling=self.mode == "poll",
                    poll_delay_ms=int(self.poll_seconds * 1000), recursive=True, ignore_permission_denied=True,
                    raise_interrupt=False):
                self._beat = time.monotonic()
                for _change, path in changes:
                    self.events.put(path)
        except Exception as exc:  # noqa: BLE001 - the supervisor sees the dead thread and restarts it
            log.warning("watcher of %s stopped: %s: %s", self.root, type(exc).__name__, exc)

    # -- the supervisor's tick -----------------------------------------------------------------------

    def tick(self, sync: SyncFn, now: float) -> None:
        """One round: check the root and the observer, take events, sync what settled, rescan when due."""
        if not self._check_root(now):
            return
        if not self.observer_alive(now):
            if self._observer is not None:
                self.restarts += 1
                log.warning("observer of %s stopped; restarted (a full rescan follows)", self.root)
            self.start_observer()
            self._next_rescan = now
        self._drain()
        ready = self._retry + self.settler.ready(now)
        self._retry = []
        if ready:
            self._sync(sync, ready, now)
        if now >= self._next_rescan and self.state == "watching":
            self._rescan(sync, now)

    def _check_root(self, now: float) -> bool:
        """Pause on a missing/unreadable root, resume (observer + rescan) when it is back; True while watching."""
        try:
            st = os.stat(self.root)
            if not os.path.isdir(self.root):
                raise NotADirectoryError(f"{self.root} is not a folder")
            with os.scandir(self.root):
                pass
        except OSError as exc:
            reason = f"source root unavailable: {exc.strerror or exc}"
            if self.state != "paused":
                log.warning("watching %s paused: %s", self.root, reason)
                self.stop_observer()
                self.settler.clear()
                self._retry = []
            self.state, self.paused_reason = "paused", reason
            return False
        identity = (st.st_dev, st.st_ino)
        if self.state != "watching" or identity != self._identity:
            if self.state == "paused":
                log.info("watching %s resumed", self.root)
            elif self._identity is not None and identity != self._identity:
                log.warning("source root %s was replaced by another folder; watching it anew", self.root)
            self._identity = identity
            self.state, self.paused_reason = "watching", None
            self.start_observer()
            self._next_rescan = now
        return True

    def _drain(self) -> None:
        now = time.monotonic()
        root = str(self.root)
        got = False
        while True:
            try:
                path = self.events.get_nowait()
            except queue.Empty:
                break
            got = True
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if not rel.startswith(".."):
                self.settler.note(rel, now)
        if got:
            self.last_event_at = datetime.now(UTC)

    def _sync(self, sync: SyncFn, rels: list[str], now: float) -> None:
        try:
            # a path that is gone was seen deleted: the scan tombstones it at once unless many go together
            gone = tuple(r for r in rels if not os.path.lexists(os.path.join(self.root, r)))
            outcome = sync(self.source_id, ScanScope(paths=tuple(rels), gone=gone,
                                                     delete_at_once_max=self.delete_at_once_max))
        except SyncAlreadyRunning:
            self._retry = rels  # another sync of this source runs: again on the next tick
            return
        ok = outcome.status != "failed"  # hatchet: queued, the ki-sync workflow scans
        self.settler.done(rels, synced=ok, now=now)
        if ok:
            self.files_queued += len(rels)
            for rel in rels:  # one record per file: ki's stderr filter lets one record per template through a
                # window (ki.cli.faults._OncePerWindow), so the path is part of the message, not an argument
                log.info(f"handed over to a sync: {os.path.join(str(self.root), rel)}")
            WATCH_FILES.labels("handed_over").inc(len(rels))
        elif isinstance(outcome.cause, SourceUnavailable):
            log.warning("sync of %s found the source unavailable: %s", self.root, outcome.error)
        else:
            log.warning("sync of %d changed path(s) of %s failed: %s", len(rels), self.root, outcome.error)
        if not ok:
            WATCH_FILES.labels("sync_failed").inc(len(rels))

    def _rescan(self, sync: SyncFn, now: float) -> None:
        defer = frozenset(display_form(rel)[0] for rel in self.settler.pending)
        scope = ScanScope(defer=defer, defer_younger_than=self.settle_seconds)
        try:
            outcome = sync(self.source_id, scope)
        except SyncAlreadyRunning:
            self._next_rescan = now + 1.0  # a sync of the source runs elsewhere; soon again
            return
        self._next_rescan = now + self.rescan_seconds
        if outcome.status == "failed":
            log.warning("full rescan of %s failed: %s", self.root, outcome.error)
            return
        self.last_full_scan_at = datetime.now(UTC)
        report = outcome.report
        for f in getattr(report, "deferred", None) or []:  # young files: settle first, then sync them
            self.settler.note(os.fsdecode(f.raw) if f.raw is not None else f.external_id, now)

    def health(self) -> dict[str, Any]:
        """The health fields of ``source_watch`` (see ki.store.watch.write_health)."""
        return {"source_id": self.source_id, "mode": self.mode, "state": self.state,
                "paused_reason": self.paused_reason, "last_event_at": self.last_event_at,
                "last_full_scan_at": self.last_full_scan_at, "files_seen": self.settler.seen,
                "files_queued": self.files_queued, "files_ignored": sum(self.settler.ignored.values()),
                "ignored_reasons": dict(self.settler.ignored), "restarts": self.restarts}


class Watcher:
    """Watches sources until stopped: ticks every :data:`TICK_SECONDS`, writes health every
    :data:`HEALTH_SECONDS` (module doc).

    Args:
        sources: ``(source_id, root, config)`` of the local-folder sources to watch.
        sync: runs a sync of a source with a scope (``ki.app.launch.launch_sync`` wired by the command).
        mode: force ``native`` or ``poll`` for every source (None: per source, see ki.adapters.sources.mounts).
    Raises: ValueError for a source whose ``watch_mode`` setting is neither ``native`` nor ``poll``.
    """

    def __init__(self, ctx: PipelineContext, sources: list[tuple[int, str, dict]], sync: SyncFn, *,
                 mode: str | None = None):
        self.ctx = ctx
        self.sync = sync
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        cfg = ctx.config.pipeline.watch
        self.sources: list[SourceWatcher] = []
        for sid, root, config in sources:
            chosen, why = (mode, "chosen for this watcher") if mode else watch_mode_for(root, config)
            self.sources.append(SourceWatcher(sid, Path(root), chosen, why, cfg.settle_seconds, cfg.rescan_seconds,
                                              cfg.poll_seconds, cfg.delete_at_once_max))
        self._last_health = 0.0

    def run(self, stop: threading.Event) -> None:
        """Watch until ``stop`` is set; then stop the observers and record the sources ``stopped``."""
        for sw in self.sources:
            log.info("watching %s (%s: %s)", sw.root, sw.mode, sw.mode_reason)
        try:
            while not stop.is_set():
                self.tick()
                stop.wait(TICK_SECONDS)
        finally:
            for sw in self.sources:
                sw.stop_observer()
                sw.state = "stopped"
            self.write_health()

    def tick(self) -> None:
        """One round over every source, and the health write when due."""
        now = time.monotonic()
        for sw in self.sources:
            try:
                sw.tick(self.sync, now)
            except Exception:  # noqa: BLE001 - one source's fault must not stop the others' watching
                log.exception("watching %s: tick failed", sw.root)
        if now - self._last_health >= HEALTH_SECONDS:
            self.write_health()
            self._last_health = now

    def write_health(self) -> None:
        """Write every source's health row (best effort: a database hiccup is logged, the watch goes on)."""
        try:
            with self.ctx.db.engine.begin() as conn:
                for sw in self.sources:
                    health_store.write_health(conn, watcher=self.name, **sw.health())
        except Exception as exc:  # noqa: BLE001
            log.warning("watcher health not written: %s", exc)
