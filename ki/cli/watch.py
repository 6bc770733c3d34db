"""``ki watch [PATH ...]``: watch local-folder sources and sync what changes (issue 19; ki.sources.watch).

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

from ki.cli.common import console, open_context


def start_watcher(ctx, launcher, paths: list[Path] | None = None, *, mode: str | None = None):
    """Build the watcher of ``paths`` (None: every local source) syncing through ``launch_sync`` and handing
    off to ``launcher`` (a :class:`ki.api.launcher.RunLauncher`); returns ``(watcher, stop event, thread)``
    with the thread started.

    Raises: SourceRefused when a path is not a registered source and cannot be added; ValueError for a bad
        ``watch_mode`` setting.
    """
    from ki.launch import launch_sync
    from ki.sources.registry import watchable_sources
    from ki.sources.watch import Watcher

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
    from ki.api.launcher import RunLauncher
    from ki.cli.faults import configure_logging
    from ki.sources.registry import SourceRefused

    configure_logging(logging.INFO)

    if mode not in (None, "native", "poll"):
        console.print(f"[red]--mode must be native or poll, not {mode!r}[/]")
        raise typer.Exit(2)
    ctx = open_context()
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
    try:
        while thread.is_alive():
            thread.join(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        thread.join(30)
        launcher.wait_idle(60)
    console.print("watching stopped")


def register(app: typer.Typer) -> None:
    """Add ``ki watch``."""
    app.command()(watch)
