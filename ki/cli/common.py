"""What the command modules share: the two consoles, opening the pipeline context, the status table."""

from __future__ import annotations

import sys
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from ki.errors import ConfigurationError
from ki.taxonomies import BUCKETS, PIPELINE_STAGE_ORDER

#: Messages, progress and errors (stderr).
console = Console(stderr=True)
#: Results (stdout; 160 columns when not a terminal, so piped tables do not wrap).
out = Console(width=None if sys.stdout.isatty() else 160)

#: Buckets in which a stage row has nothing left to do in this run.
FINISHED_BUCKETS = ("done", "skipped", "disabled", "quarantined")


def open_context() -> Any:
    """The :class:`~ki.context.PipelineContext` of this process; a configuration error
    prints one line and exits 2."""
    from ki.context import PipelineContext

    try:
        return PipelineContext.open()
    except ConfigurationError as exc:
        console.print(f"[red]configuration error:[/] {exc}")
        raise typer.Exit(2) from exc


def bucket_counts(ctx: Any) -> dict[str, dict[str, int]]:
    """stage → bucket → rows (every stage and bucket present)."""
    from ki.store.status import bucket_counts as counts

    with ctx.db.engine.connect() as conn:
        return counts(conn)


def print_status(counts: dict[str, dict[str, int]]) -> None:
    """The per-stage bucket table on stdout."""
    table = Table(title="processing_state by stage")
    table.add_column("stage")
    for b in BUCKETS:
        table.add_column(b, justify="right")
    for s in PIPELINE_STAGE_ORDER:
        table.add_row(s, *[str(counts[s][b]) for b in BUCKETS])
    out.print(table)
