"""``ki status [--json]``: per-stage bucket counts."""

from __future__ import annotations

import json

import typer

from ki.cli.common import bucket_counts, open_context, out, print_status


def status(as_json: bool = typer.Option(False, "--json", help="machine-readable output")) -> None:
    """Per-stage bucket counts (pending, running, done, failed, waiting, disabled, skipped, quarantined)."""
    ctx = open_context()
    from ki.workflows.sweeper import sweep_if_due

    sweep_if_due(ctx)  # opportunistic (hatchet provider only; spec: "the sweeper")
    counts = bucket_counts(ctx)
    if as_json:
        out.print_json(json.dumps({"stages": counts}))
    else:
        print_status(counts)


def register(app: typer.Typer) -> None:
    """Add ``ki status``."""
    app.command()(status)
