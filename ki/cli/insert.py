"""``ki insert PATH`` and ``ki sync [SOURCE|PATH]``: a sync run of a source, handing off to an insertion run.

Both go through :func:`ki.app.launch.launch_sync`. ``ki insert`` registers (or reuses) a
local-folder source and always runs the insertion, even when the scan found nothing new (it also
finishes work an earlier run left owed); ``ki sync`` hands off only when the scan brought something new
and ``pipeline.auto_insert_after_sync`` is on. Shows a progress bar per stage, then the run summary, the
bucket table and where quarantined files are. Exit 0 when the runs complete, 1 when one fails, 2 when the
folder is refused as a new source (missing, a file, inside another source: nothing is registered), 3 when
a known folder is unavailable, 4 when a sync of the source is already running.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ki.cli.common import (
    FINISHED_BUCKETS,
    bucket_counts,
    console,
    open_context,
    plain,
    print_status,
    serve_metrics,
    shown,
)
from ki.core.errors import SourceUnavailable, SyncAlreadyRunning
from ki.core.taxonomies import PIPELINE_STAGE_ORDER, STAGE_CONSOLE_NAMES, stage_label


def insert(
    path: Path = typer.Argument(..., help="folder to insert (a local-folder source)"),
    workers: int = typer.Option(None, help="worker threads (default KI_WORKERS, 8)"),
    wait_retries: float = typer.Option(None, help="wait this many seconds for retries falling due"),
    public: bool = typer.Option(None, "--public/--share", help="--public: every principal sees every document "
                                "of this folder; --share: who may read a file on the share may see it (the "
                                "default of a new source; see README \"Permissions\")"),
) -> None:
    """Scan PATH and run every stage until idle; exit 0 when the run completes. Who may see a document is
    read from the share (file owner, group, mode, ACLs) unless the source is --public."""
    from ki.core.startup import TIMELINE

    TIMELINE.begin()  # the restart's phases, logged once the first row is finished
    from ki.adapters.sources.registry import SourceRefused
    from ki.app.insert import insert_folder

    ctx = open_context()
    serve_metrics(ctx)
    TIMELINE.mark("context")
    root = path.expanduser().resolve()
    view = SyncView(ctx, root)
    try:
        with view.progress:
            inserted = insert_folder(ctx, root, public=public, workers=workers, wait_for_retries_seconds=wait_retries,
                                     on_registered=view.registered, on_scanned=view.scanned, on_tick=view.tick)
            view.last_tick(inserted.sync)
    except SourceRefused as exc:
        console.print(f"[red]refused:[/] {shown(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from exc
    except SyncAlreadyRunning as exc:
        console.print(f"[yellow]{exc}[/]")
        raise typer.Exit(4) from exc
    view.show(inserted.sync)
    say_permissions(inserted.source_id, inserted.permissions)


def say_permissions(source_id: int, summary) -> None:
    """One line on the source's permission model (a :class:`ki.app.insert.PermissionSummary`); loud when every
    principal sees its documents."""
    from ki.domain.access.share_permissions import PUBLIC, SHARE

    model, opened, indexed = summary.model, summary.opened, summary.indexed
    if model == PUBLIC:
        console.print(f"[bold red]warning: source {source_id} is public[/]: every principal sees all its "
                      f"{indexed} indexed documents in search (`ki insert --share` reads permissions from the "
                      "share instead)", highlight=False)
    elif opened:
        console.print(f"[bold yellow]warning: {opened} of {indexed} indexed documents are readable by everyone on "
                      "the share[/] (mode o+r): every principal sees them in search; restrict them on the share "
                      "(chmod o-r, setfacl) or with .ki-grants.json", highlight=False)
    elif model == SHARE:
        console.print(f"permissions: read from the share (owner, group, mode, ACLs) for all {indexed} indexed "
                      "documents; none is open to everyone", highlight=False)
    else:
        console.print(f"permissions: the source's configured grants for all {indexed} indexed documents; none is "
                      "open to everyone", highlight=False)


def sync(
    refs: list[str] = typer.Argument(None, metavar="[SOURCE|PATH]...",
                                     help="source ids or folders (a new folder is registered); default: every source"),
    workers: int = typer.Option(None, help="worker threads of the hand-off (default KI_WORKERS, 8)"),
    wait_retries: float = typer.Option(None, help="wait this many seconds for retries falling due"),
) -> None:
    """Sync sources: scan, then hand off to an insertion run when something is new (auto-insert on)."""
    from ki.adapters.sources.registry import SourceRefused, named_sources
    from ki.store.sources import list_sources

    ctx = open_context()
    serve_metrics(ctx)
    try:
        targets = named_sources(ctx, refs or [])
    except SourceRefused as exc:
        console.print(f"[red]refused:[/] {shown(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from exc
    if not refs:
        with ctx.db.engine.connect() as conn:
            targets = [(s.id, s.root) for s in list_sources(conn)]
    if not targets:
        console.print("no sources registered: `ki sync FOLDER` or `ki insert FOLDER` adds one")
        return
    worst = 0
    for source_id, root in targets:
        try:
            scan_and_run(ctx, source_id, root, workers=workers, wait_retries=wait_retries, insert=False)
        except typer.Exit as exc:
            worst = max(worst, exc.exit_code)
    if worst:
        raise typer.Exit(worst)


def scan_and_run(ctx, source_id: int, root: Path | str, *, workers: int | None = None,
                 wait_retries: float | None = None, insert: bool = True) -> None:
    """One sync run of a source (:func:`ki.app.launch.launch_sync`) with progress bars, then the summary.

    ``insert``: hand off to the insertion run even when nothing is new and auto-insert is off (``ki source
    rescan``); False: as a sync decides (``ki sync``).

    Raises:
        typer.Exit: 3 when the folder is unavailable (nothing changed), 1 when a run failed, 4 when a sync
            of the source is already running.
    """
    from ki.app.launch import launch_sync

    view = SyncView(ctx, root, source_id)
    try:
        with view.progress:
            result = launch_sync(ctx, source_id, trigger="cli", wait=True, insert=insert, workers=workers,
                                 wait_for_retries_seconds=wait_retries, on_scanned=view.scanned, on_tick=view.tick)
            view.last_tick(result)
    except SyncAlreadyRunning as exc:
        console.print(f"[yellow]{exc}[/]")
        raise typer.Exit(4) from exc
    view.show(result)


class SyncView:
    """The face of one sync run of a source in a terminal: the scan line, a progress bar per enabled stage while
    the insertion runs, then the outcome (:meth:`show`)."""

    def __init__(self, ctx, root: Path | str, source_id: int | None = None):
        self.ctx, self.root, self.source_id = ctx, root, source_id
        self.enabled = [s for s in PIPELINE_STAGE_ORDER if ctx.config.pipeline.stage(s).enabled]
        self.progress = Progress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=console,
                                 disable=not console.is_terminal and not ctx.settings.progress)
        self.tasks: dict[str, int] = {}
        self.last = 0.0
        self.count_seconds = 0.0  # how long the bars' last count took
        self.started = time.monotonic()

    def registered(self, source_id: int, restored: bool) -> None:
        """The folder's source exists (``ki insert``): say so when it was restored."""
        from ki.core.startup import TIMELINE

        TIMELINE.mark("source")
        self.source_id = source_id
        if restored:
            console.print(f"source {source_id} ({shown(str(self.root))}) was removed: restored", highlight=False)

    def scanned(self, report) -> None:
        """The scan's line: what it found, what awaits deletion, what it could not take."""
        from ki.core.startup import TIMELINE

        TIMELINE.mark("scan")
        console.print(f"scanned {shown(str(self.root))}: {scan_counts(report)}; "
                      + "".join(f"{m}; " for m in missing_notes(self.ctx, self.source_id))
                      + f"{len(report.tombstoned)} tombstoned"
                      + (" [yellow](empty listing of a non-empty source: nothing tombstoned)[/]"
                         if report.suspicious else ""),
                      highlight=False, soft_wrap=True)
        print_scan_notes(report)

    def tick(self, status) -> None:
        """At most twice a second: each stage's bar (finished of all, quarantined, awaiting retry, paused).

        The bars read exact counts of every state row; their query grows with the estate (~0.1 s at 50,000
        documents), so the bars refresh no more often than every ten times the last count's duration (at most
        a tenth of a core) and not at all when they are not shown (no terminal)."""
        now = time.monotonic()
        if now - self.last < max(0.5, 10 * self.count_seconds):
            return
        self.last = now
        if self.progress.disable:
            self._notes(status)
            return
        if not self.tasks:
            self.tasks.update({s: self.progress.add_task(STAGE_CONSOLE_NAMES[s], total=None, note="")
                               for s in self.enabled})
        counts = bucket_counts(self.ctx)
        self.count_seconds = time.monotonic() - now
        paused = {}  # stage → "paused: gateway unavailable since …" (an open circuit breaker, ki.adapters.breaker)
        if getattr(status, "paused", None):
            from ki.adapters.breaker import describe_pauses

            paused = {st: p["message"] for p in describe_pauses(status.paused, self.ctx.config) for st in p["stages"]}
        for s in self.enabled:
            c = counts[s]
            total = sum(c.values())
            finished = sum(c[b] for b in FINISHED_BUCKETS)
            note = f"[red]{c['quarantined']} quarantined[/]" if c["quarantined"] else ""
            if c["failed"]:
                note += f" [yellow]{c['failed']} awaiting retry[/]"
            if s in paused:
                note += f" [yellow]{paused[s]}[/]"
            self.progress.update(self.tasks[s], completed=finished, total=total, note=note)
        self._notes(status)

    def _notes(self, status) -> None:
        """The one-line waiting notes (for running holders, for a retry due later)."""
        if status.waiting_for_running and status.holders:
            console.print(waiting_for_holders(status), end="\r", markup=False)
        elif status.waiting_for_retry is not None:
            due, n = status.waiting_for_retry
            console.print(f"waiting for {n} retr{'y' if n == 1 else 'ies'} due at {due:%H:%M:%S} UTC", end="\r")

    def last_tick(self, result) -> None:
        """The bars as the insertion run left them."""
        from ki.orchestration.runner import RunnerStatus

        if result.insertion is not None:
            self.last = 0.0
            self.tick(RunnerStatus(result.insertion.counters, 0))

    def show(self, result) -> None:
        """The sync run's outcome, then the insertion run's summary, buckets, budget and quarantines.

        Raises:
            typer.Exit: 3 when the folder is unavailable (nothing changed), 1 when a run failed, 8 when the
                insertion run was cancelled.
        """
        ctx, source_id, root = self.ctx, self.source_id, self.root
        if result.status != "completed":
            if isinstance(result.cause, SourceUnavailable) or (result.error or "").startswith("SourceUnavailable"):
                console.print(f"[red]source unavailable:[/] {shown(result.error or '')} — nothing was changed; run "
                              "again when it is back", highlight=False, soft_wrap=True)
                raise typer.Exit(3)
            console.print(f"[red]sync run {result.run_id} failed:[/] {result.error}")
            raise typer.Exit(1)
        if result.report is None:  # the hatchet provider's worker scanned
            from ki.app.launch import run_counters

            _, c, _ = run_counters(ctx, result.run_id)
            console.print(f"sync run {result.run_id} of {shown(str(root))}: {c.processed} files listed, {c.done} new "
                          "or changed" + "".join(f"; {m}" for m in missing_notes(ctx, source_id)), highlight=False)
        summary = result.insertion
        if summary is None:
            console.print(f"sync run {result.run_id} completed: "
                          + ("nothing new to insert" if ctx.config.pipeline.auto_insert_after_sync
                             else "auto-insert after sync is off (`ki insert` inserts)"))
            return
        elapsed = time.monotonic() - self.started
        c = summary.counters
        console.print(f"run {summary.run_id} {summary.status} in {elapsed:.1f} s: {c.processed} stage executions "
                      f"({c.done} done, {c.skipped} skipped, {c.retried} retried, {c.quarantined} quarantined)")
        print_status(bucket_counts(ctx))
        from ki.cli.status import print_budget
        from ki.orchestration.budget import budget_wait

        print_budget(budget_wait(ctx.db.engine, ctx.config))
        print_run_quarantines(ctx, source_id, summary.run_id)
        if summary.status == "cancelled":
            console.print(f"[yellow]{shown(summary.error)}[/]", highlight=False)
            raise typer.Exit(8)
        if summary.status != "completed":
            console.print(f"[red]run failed:[/] {shown(summary.error)}", highlight=False)
            raise typer.Exit(1)


SKIPPED_SHOWN = 10
#: Quarantined files of the run the summary lists (``ki quarantine list`` shows all).
QUARANTINED_SHOWN = 20


def scan_counts(report) -> str:
    """``5 files: 1 new, 1 changed, 2 unchanged, 1 restored`` (+ renamed, not taken when any): the parts
    add up to the files listed (:attr:`ki.adapters.sources.scan.ScanReport.not_taken`)."""
    parts = [f"{report.new} new", f"{report.changed} changed", f"{report.unchanged} unchanged",
             f"{report.reappeared} restored"]
    if report.renamed:
        parts.append(f"{report.renamed} renamed")
    if report.not_taken:
        parts.append(f"{report.not_taken} not taken")
    return f"{report.listed} file{'' if report.listed == 1 else 's'}: " + ", ".join(parts)


def missing_notes(ctx, source_id: int) -> list[str]:
    """``2 missing, tombstoned after 1 more scan`` per group of the source's files awaiting deletion
    confirmation (``pipeline.deletion_confirmations``), soonest tombstoned first; empty when none."""
    from ki.store.sources import missing_streaks

    with ctx.db.engine.connect() as conn:
        streaks = missing_streaks(conn, source_id)
    threshold = ctx.config.pipeline.deletion_confirmations
    notes = []
    for streak, n in streaks.items():
        more = max(threshold - streak, 1)
        notes.append(f"{n} missing, tombstoned after {more} more scan{'' if more == 1 else 's'}")
    return notes


def print_run_quarantines(ctx, source_id: int, run_id: int) -> None:
    """The files of this source that this run quarantined (path, stage, reason, message), and how many
    of the source stay quarantined from earlier runs."""
    from ki.orchestration.quarantine import quarantine_entries

    entries, in_run = quarantine_entries(ctx, limit=QUARANTINED_SHOWN, source_id=source_id, run_id=run_id)
    _, of_source = quarantine_entries(ctx, limit=0, source_id=source_id)
    if in_run:
        first = f"first {len(entries)} of {in_run}; " if in_run > len(entries) else ""
        console.print(f"[red]quarantined by this run: {in_run} file{'' if in_run == 1 else 's'}[/] "
                      f"({first}`ki quarantine list` for all):", highlight=False)
        for e in entries:
            console.print(f"  {plain(e.path)}  [{stage_label(e.stage)}] "
                          f"{e.error.get('reason') or e.error.get('class')}: "
                          f"{plain(str(e.error.get('message', ''))[:120])}", markup=False, highlight=False)
    earlier = of_source - in_run
    if earlier > 0:
        console.print(f"{earlier} file{'' if earlier == 1 else 's'} of this source stay{'s' if earlier == 1 else ''} "
                      "quarantined from earlier runs (`ki quarantine list`, `ki quarantine retry ID`)",
                      highlight=False)


def waiting_for_holders(status) -> str:
    """What the run waits for when only other processes' claims are left: each
    holder, its rows and its silence, and when a silent one is presumed dead."""
    parts = []
    for h in status.holders[:3]:
        parts.append(f"{h.rows} held by {h.worker or '?'} (heartbeat {h.silent_seconds:.0f} s ago)")
    more = f" and {len(status.holders) - 3} more holders" if len(status.holders) > 3 else ""
    return (f"waiting for {status.waiting_for_running} running stage(s): {'; '.join(parts)}{more}; "
            f"a silent holder is presumed dead after {status.claim_timeout_seconds:.0f} s, "
            "an ended process of this host at once")


def print_scan_notes(report) -> None:
    """What the scan did not take and why, and what it kept safe or released."""
    if report.skipped:
        by_reason = ", ".join(f"{n} {reason}" for reason, n in report.skipped_by_reason().items())
        console.print(f"[yellow]skipped {len(report.skipped)} entr{'y' if len(report.skipped) == 1 else 'ies'}:[/] "
                      f"{by_reason}")
        for e in report.skipped[:SKIPPED_SHOWN]:
            console.print(f"  {plain(e.path)}  [{e.reason}]" + (f" {plain(e.detail)}" if e.detail else ""),
                          markup=False, highlight=False)
        if len(report.skipped) > SKIPPED_SHOWN:
            console.print(f"  … and {len(report.skipped) - SKIPPED_SHOWN} more")
    if report.unsure:
        console.print(f"[yellow]{report.unsure} known document(s) below folders that could not be read were not "
                      "counted missing[/]")
    if report.released:
        console.print(f"{report.released} file(s) that could not be read for permissions changed permissions: "
                      "fetched again")


def register(app: typer.Typer) -> None:
    """Add ``ki insert`` and ``ki sync``."""
    app.command()(insert)
    app.command()(sync)
