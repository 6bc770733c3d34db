"""``ki archive [--older-than DAYS] [--batch-size N] [--json]``: move cold history to the archive tables
(:mod:`ki.orchestration.archive`)."""

from __future__ import annotations

import json

import typer

from ki.cli.common import console, open_context, out


def archive(
    older_than: int = typer.Option(None, "--older-than", min=0, max=36_500,
                                   help="days (default pipeline.archive_after_days, 30)"),
    batch_size: int = typer.Option(5000, min=1, max=1_000_000, help="rows per batch (each batch one transaction)"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """Move finished runs and their members, attempt history, audit entries and the rows of long-tombstoned files
    older than DAYS to the archive tables, in bounded batches (an interrupted pass loses nothing: run it again).
    Public ids, provenance, spend and failed rows' evidence stay readable; a work item read or retried through
    /v1/work-items is restored. Bucket counts do not change."""
    from ki.orchestration.archive import archive_history

    ctx = open_context()
    report = archive_history(ctx, older_than_days=older_than, batch_size=batch_size, trigger="cli",
                             on_batch=lambda r: console.print(f"archiving: {r.moved} rows moved", end="\r",
                                                              highlight=False))
    if as_json:
        out.print_json(json.dumps({**report.__dict__, "moved": report.moved}))
        return
    out.print(f"archived {report.moved} rows in {report.seconds:.1f} s ({report.batches} batches): {report.runs} runs "
              f"with {report.run_members} members, {report.attempts} attempt entries, {report.audit_entries} audit "
              f"entries, {report.state_rows} rows of long-deleted files (with {report.state_attempts} attempts)",
              highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``ki archive``."""
    app.command("archive")(archive)
