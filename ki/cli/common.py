"""What the command modules share: the two consoles, opening the pipeline context, the status table."""

from __future__ import annotations

import sys
from typing import Any

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
    """The :class:`~ki.context.PipelineContext` of this process.

    Raises (each reported by :func:`ki.cli.faults.report` with its exit code):
        ConfigurationError: a bad environment variable or ``KI_DATABASE_URL`` that is no database URL (2).
        DataDirUnusable: ``KI_DATA_DIR`` cannot be created, read or written (5).
        DatabaseUnavailable / OperationalError: the database cannot be reached or did not start (4).
    """
    from sqlalchemy.exc import ArgumentError

    from ki.cli.faults import DatabaseUnavailable, check_data_dir, database_opened
    from ki.config.loader import ProcessSettings
    from ki.context import PipelineContext
    from ki.store.db import connect

    settings = ProcessSettings()
    check_data_dir(settings.data_dir)
    try:
        db = connect(settings)
    except ArgumentError as exc:
        raise ConfigurationError("KI_DATABASE_URL is not a PostgreSQL URL; expected "
                                 "postgresql://USER:PASSWORD@HOST:PORT/DATABASE") from exc
    except ConfigurationError as exc:  # the embedded server did not start
        if settings.database_url:
            raise
        raise DatabaseUnavailable(str(exc).splitlines()[0], external=False) from exc
    ctx = PipelineContext.open(settings, db=db)
    database_opened()
    return ctx


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
