"""``ki watch [PATH ...]``: watch local-folder sources and sync what changes (ki.adapters.sources.watch).

Watches every registered local-folder source, or only the folders given (registered when new). Each
settled change is synced through ``launch_sync`` and handed off to an insertion run in this process
(``local``) or to the Hatchet engine (``hatchet``). Runs until Ctrl-C / SIGTERM. ``ki serve --watch``
runs the same watcher inside the console's server (:func:`start_watcher`).
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path

import typer
from rich.markup import escape

from ki.cli.common import console, open_context, serve_metrics


def start_watcher(ctx, launcher, paths: list[Path] | None = None, *, mode: str | None = None):
    """Build the watcher of ``paths`` (None: every local source) syncing through ``launch_sync`` and handing
    off to ``launcher`` (a :class:`ki.app.launcher.RunLauncher`); returns ``(watcher, stop event, thread)``
    with the thread started.

    Raises: SourceRefused when a path is not a registered source and cannot be added; ValueError for a bad
        ``watch_mode`` setting.
    """
    from ki.adapters.sources.registry import watchable_sources
    from ki.adapters.sources.watch import Watcher
    from ki.app.launch import launch_sync

    sources = watchable_sources(ctx, [str(p) for p in paths] if paths else None)

    def sync(source_id, scope):
        return launch_sync(ctx, source_id, trigger="watch", scope=scope, hand_off=launcher.hand_off)

    watcher = Watcher(ctx, sources, sync, mode=mode)
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,), name="ki-watcher", daemon=True)
    thread.start()
    return watcher, stop, thread


def watch(
    paths: list[Path] = typer.Argument(None, help="folders to watch (registered if new); default: every local "
                                                  "source"),
    mode: str = typer.Option(None, help="native or poll for every source (default: per source: its watch_mode "
                                        "setting, else poll on network file systems)"),
) -> None:
    """Watch local-folder sources; sync and insert what arrives, changes, moves or goes (until Ctrl-C)."""
    from ki.adapters.sources.registry import SourceRefused
    from ki.app.launcher import RunLauncher
    from ki.cli.faults import configure_logging

    configure_logging(logging.INFO)

    if mode not in (None, "native", "poll"):
        console.print(f"[red]--mode must be native or poll, not {mode!r}[/]")
        raise typer.Exit(2)
    ctx = open_context()
    serve_metrics(ctx)
    launcher = RunLauncher(ctx)
    try:
        watcher, stop, thread = start_watcher(ctx, launcher, paths or None, mode=mode)
    except (SourceRefused, ValueError) as exc:
        console.print(f"[red]refused:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from exc
    if not watcher.sources:
        stop.set()
        console.print("no local-folder sources to watch: `ki watch PATH` registers one")
        raise typer.Exit(2)
    for sw in watcher.sources:
        console.print(f"watching {sw.root} ({sw.mode}: {sw.mode_reason}); settle {sw.settle_seconds:g} s, "
                      f"full rescan every {sw.rescan_seconds:g} s")
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # its "N changes detected" says nothing useful
    reporter = RunReporter(ctx, watcher)
    try:
        while thread.is_alive():
            thread.join(REPORT_SECONDS)
            reporter.tick()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        thread.join(30)
        launcher.wait_idle(60)
    console.print("watching stopped")


#: How often ``ki watch`` looks for finished runs to report (s); a summary line every SUMMARY_SECONDS.
REPORT_SECONDS = 2.0
SUMMARY_SECONDS = 300.0


class RunReporter:
    """What ``ki watch`` prints as the runs it started end: one line per file a run quarantined (path, stage,
    reason), and every :data:`SUMMARY_SECONDS` a summary (files seen, handed over to a sync, ignored; runs
    finished and files quarantined since the watcher started)."""

    def __init__(self, ctx, watcher, *, clock=None) -> None:
        import time

        from ki.store.runs import runs_page

        self.ctx, self.watcher = ctx, watcher
        self.clock = clock or time.monotonic
        with ctx.db.engine.connect() as conn:
            newest, _ = runs_page(conn, limit=1)
        self.seen_run = newest[0].id if newest else 0
        self.runs = self.quarantined = 0
        self.next_summary = self.clock() + SUMMARY_SECONDS

    def tick(self) -> None:
        """Report runs that ended since the last tick; print the summary when it is due."""
        from ki.orchestration.quarantine import quarantine_entries
        from ki.store.runs import ACTIVE_RUN_STATUSES, KIND_INSERTION, runs_page

        with self.ctx.db.engine.connect() as conn:
            recent, _ = runs_page(conn, kinds=[KIND_INSERTION], limit=50)
        ended = sorted((r for r in recent if r.id > self.seen_run and r.status not in ACTIVE_RUN_STATUSES),
                       key=lambda r: r.id)
        for run in ended:
            if any(r.id < run.id and r.id > self.seen_run and r.status in ACTIVE_RUN_STATUSES for r in recent):
                break  # report in order: an earlier run is still going
            entries, _ = quarantine_entries(self.ctx, limit=200, run_id=run.id)
            for e in entries:
                reason = (e.error or {}).get("reason") or (e.error or {}).get("class") or "unclassified"
                console.print(f"quarantined: {escape(str(e.path))} ({e.stage}, {reason})", highlight=False)
            console.print(f"run {run.id} {run.status}: {run.done} done, {run.quarantined} quarantined, "
                          f"{run.retried} retried", highlight=False)
            self.runs += 1
            self.quarantined += run.quarantined
            self.seen_run = run.id
        if self.clock() >= self.next_summary:
            self.next_summary = self.clock() + SUMMARY_SECONDS
            seen = sum(sw.settler.seen for sw in self.watcher.sources)
            handed = sum(sw.files_queued for sw in self.watcher.sources)
            ignored = sum(sum(sw.settler.ignored.values()) for sw in self.watcher.sources)
            console.print(f"watching {len(self.watcher.sources)} source(s): {seen} files seen, {handed} handed over "
                          f"to a sync, {ignored} ignored; {self.runs} runs finished, {self.quarantined} files "
                          "quarantined", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``ki watch``."""
    app.command()(watch)
