"""``ki insert PATH``: register (or reuse) a local-folder source, scan it, run every stage until idle.

Shows a progress bar per stage, then the run summary, the bucket table and where quarantined
files are. Exit 0 when the run completes, 1 when it fails, 2 when the folder is refused as a new source
(missing, a file, inside another source: nothing is registered), 3 when a known folder is unavailable.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ki.cli.common import FINISHED_BUCKETS, bucket_counts, console, open_context, plain, print_status, shown
from ki.errors import SourceUnavailable
from ki.taxonomies import PIPELINE_STAGE_ORDER, STAGE_CONSOLE_NAMES


def insert(
    path: Path = typer.Argument(..., help="folder to insert (a local-folder source)"),
    workers: int = typer.Option(None, help="worker threads (default KI_WORKERS, 8)"),
    wait_retries: float = typer.Option(None, help="wait this many seconds for retries falling due"),
) -> None:
    """Scan PATH and run every stage until idle; exit 0 when the run completes."""
    from ki.sources.registry import SourceRefused, add_local_source

    ctx = open_context()
    root = path.expanduser().resolve()
    try:
        source_id, restored = add_local_source(ctx, root)
    except SourceRefused as exc:
        console.print(f"[red]refused:[/] {shown(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from exc
    if restored:
        console.print(f"source {source_id} ({shown(str(root))}) was removed: restored", highlight=False)
    scan_and_run(ctx, source_id, root, workers=workers, wait_retries=wait_retries)


def scan_and_run(ctx, source_id: int, root: Path, *, workers: int | None = None,
                 wait_retries: float | None = None) -> None:
    """Scan one source, run every stage until idle with progress bars, print the summary.

    Raises:
        typer.Exit: 3 when the folder is unavailable (nothing changed), 1 when the run failed.
    """
    from ki.launch import launch_insertion
    from ki.sources.scan import scan_source

    try:
        report = scan_source(ctx, source_id)
    except SourceUnavailable as exc:
        console.print(f"[red]source unavailable:[/] {shown(str(exc))} — nothing was changed; run again when it "
                      "is back", highlight=False, soft_wrap=True)
        raise typer.Exit(3) from exc
    console.print(
        f"scanned {shown(str(root))}: {report.listed} files, {report.new} new, {report.changed} changed, "
        f"{report.unchanged} unchanged, {len(report.tombstoned)} tombstoned"
        + (" [yellow](empty listing of a non-empty source: nothing tombstoned)[/]" if report.suspicious else ""),
        highlight=False, soft_wrap=True)
    print_scan_notes(report)
    enabled = [s for s in PIPELINE_STAGE_ORDER if ctx.config.pipeline.stage(s).enabled]
    progress = Progress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=console,
                        disable=not console.is_terminal and not ctx.settings.progress)
    tasks = {s: progress.add_task(STAGE_CONSOLE_NAMES[s], total=None, note="") for s in enabled}
    last = [0.0]

    def on_tick(status) -> None:
        now = time.monotonic()
        if now - last[0] < 0.5:
            return
        last[0] = now
        counts = bucket_counts(ctx)
        for s in enabled:
            c = counts[s]
            total = sum(c.values())
            finished = sum(c[b] for b in FINISHED_BUCKETS)
            note = f"[red]{c['quarantined']} quarantined[/]" if c["quarantined"] else ""
            if c["failed"]:
                note += f" [yellow]{c['failed']} awaiting retry[/]"
            progress.update(tasks[s], completed=finished, total=total, note=note)
        if status.waiting_for_running and status.holders:
            console.print(waiting_for_holders(status), end="\r", markup=False)
        elif status.waiting_for_retry is not None:
            due, n = status.waiting_for_retry
            console.print(f"waiting for {n} retr{'y' if n == 1 else 'ies'} due at {due:%H:%M:%S} UTC", end="\r")

    started = time.monotonic()
    with progress:
        summary = launch_insertion(ctx, trigger="cli", source_id=source_id, workers=workers,
                                   wait_for_retries_seconds=wait_retries, on_tick=on_tick, wait=True)
        last[0] = 0.0
        from ki.orchestration.runner import RunnerStatus

        on_tick(RunnerStatus(summary.counters, 0))
    elapsed = time.monotonic() - started
    c = summary.counters
    console.print(f"run {summary.run_id} {summary.status} in {elapsed:.1f} s: {c.processed} stage executions "
                  f"({c.done} done, {c.skipped} skipped, {c.retried} retried, {c.quarantined} quarantined)")
    print_status(bucket_counts(ctx))
    from ki.orchestration.quarantine import list_quarantine

    quarantined = list_quarantine(ctx, limit=20)
    if quarantined:
        console.print(f"[red]quarantined files[/] (first {len(quarantined)}; `ki quarantine list` for all):")
        for e in quarantined:
            console.print(f"  {plain(e.path)}  [{e.stage}] {e.error.get('reason') or e.error.get('class')}: "
                          f"{plain(str(e.error.get('message', ''))[:120])}", markup=False, highlight=False)
    if summary.status != "completed":
        console.print(f"[red]run failed:[/] {shown(summary.error)}", highlight=False)
        raise typer.Exit(1)


SKIPPED_SHOWN = 10


def waiting_for_holders(status) -> str:
    """What the run waits for when only other processes' claims are left (issue 14 item 2): each
    holder, its rows and its silence, and when a silent one is presumed dead."""
    parts = []
    for h in status.holders[:3]:
        parts.append(f"{h.rows} held by {h.worker or '?'} (heartbeat {h.silent_seconds:.0f} s ago)")
    more = f" and {len(status.holders) - 3} more holders" if len(status.holders) > 3 else ""
    return (f"waiting for {status.waiting_for_running} running stage(s): {'; '.join(parts)}{more}; "
            f"a silent holder is presumed dead after {status.claim_timeout_seconds:.0f} s, "
            "an ended process of this host at once")


def print_scan_notes(report) -> None:
    """What the scan did not take and why (issue 14 item 5), and what it kept safe or released."""
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
        console.print(f"{report.released} file(s) that could not be read for permissions are readable again")


def register(app: typer.Typer) -> None:
    """Add ``ki insert``."""
    app.command()(insert)
