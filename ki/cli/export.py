"""``ki export --json``: what Classify and Relate concluded, one JSON object per live source object."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from ki.cli.common import open_context


def export(
    as_json: bool = typer.Option(True, "--json", help="one JSON object per line (the only format)"),
    root: Path = typer.Option(None, help="only the source registered for this folder"),
) -> None:
    """What Classify and Relate concluded: one JSON object per live source object, one per line."""
    from ki.app.export import export_rows

    ctx = open_context()
    root_s = str(root.expanduser().resolve()) if root else None
    for row in export_rows(ctx.db, root=root_s):
        sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")


def register(app: typer.Typer) -> None:
    """Add ``ki export``."""
    app.command()(export)
