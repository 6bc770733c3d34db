"""What the command modules share: the two consoles, opening the pipeline context, the status table."""

from __future__ import annotations

import re
import shutil
import sys
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ki.core.errors import ConfigurationError
from ki.core.taxonomies import BUCKETS, PIPELINE_STAGE_ORDER

#: Messages, progress and errors (stderr). Messages are never wrapped by rich (the terminal wraps them;
#: a log or a test reads each message as one line).
console = Console(stderr=True, soft_wrap=True)
#: Results (stdout; when not a terminal ``COLUMNS`` columns, else 160, so piped tables do not wrap).
out = Console(width=None if sys.stdout.isatty() else shutil.get_terminal_size((160, 24)).columns)

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def plain(value: object) -> str:
    """``value`` as text a terminal shows as written: every control character (the ESC of an ANSI escape
    sequence, a newline in a file name, ...) as ``\\xNN``. For output printed with ``markup=False``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))


def shown(value: object) -> str:
    """:func:`plain`, with rich markup escaped too: a file named ``Akte [red]2023[/red].txt`` prints as
    named inside a markup string (output that names cannot corrupt)."""
    return escape(plain(value))

#: Buckets in which a stage row has nothing left to do in this run.
FINISHED_BUCKETS = ("done", "skipped", "disabled", "quarantined")


def open_context(pool_size: int | None = None) -> Any:
    """The :class:`~ki.domain.context.PipelineContext` of this process (``pool_size``: database connections kept,
    as many again opened at peaks; None: ``KI_WORKERS`` + 2).

    Raises (each reported by :func:`ki.cli.faults.report` with its exit code):
        ConfigurationError: a bad environment variable or ``KI_DATABASE_URL`` that is no database URL (2).
        DataDirUnusable: ``KI_DATA_DIR`` cannot be created, read or written (5).
        DatabaseUnavailable / OperationalError: the database cannot be reached or did not start (4).
    """
    from sqlalchemy.exc import ArgumentError

    from ki.cli.faults import DatabaseUnavailable, check_data_dir, database_opened
    from ki.config.loader import ProcessSettings
    from ki.domain.context import PipelineContext
    from ki.store.db import connect

    settings = ProcessSettings()
    check_data_dir(settings.data_dir)
    try:
        db = connect(settings, pool_size=pool_size)
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


def serve_metrics(ctx: Any) -> None:
    """Serve Prometheus metrics on ``KI_METRICS_PORT`` when it is set (:mod:`ki.adapters.observability.exposition`),
    saying where; a taken port is refused as a configuration error (exit 2) before any work starts."""
    from ki.adapters.observability.exposition import start_metrics_port
    from ki.orchestration.budget import budget_wait

    try:
        where = start_metrics_port(ctx.db.engine, budget=lambda: budget_wait(ctx.db.engine, ctx.config))
    except OSError as exc:
        raise ConfigurationError(f"KI_METRICS_PORT: cannot serve metrics there: {exc.strerror or exc}") from exc
    if where is not None:
        console.print(f"metrics on http://{where[0]}:{where[1]}/metrics", highlight=False)


def bucket_counts(ctx: Any) -> dict[str, dict[str, int]]:
    """stage → bucket → rows (every stage and bucket present)."""
    from ki.store.status import bucket_counts as counts

    with ctx.db.engine.connect() as conn:
        return counts(conn)


def print_status(counts: dict[str, dict[str, int]]) -> None:
    """The bucket table on stdout: one row per bucket, one column per stage under its console name.
    Fits 80 columns with six-digit counts (long stage names wrap onto two header lines), on a terminal and
    piped alike (piped output is otherwise as wide as ``COLUMNS``, or 160)."""
    from ki.core.taxonomies import STAGE_CONSOLE_NAMES

    table = Table(title="documents by stage", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
                  collapse_padding=True)
    table.add_column("bucket", no_wrap=True)
    for s in PIPELINE_STAGE_ORDER:
        table.add_column(STAGE_CONSOLE_NAMES[s], justify="right")
    for b in BUCKETS:
        table.add_row(b, *[str(counts[s][b]) for s in PIPELINE_STAGE_ORDER])
    out.print(table, width=min(out.width, STATUS_WIDTH))


#: ``ki status`` and the insert summary's table fit this many columns (README, ``ki status``).
STATUS_WIDTH = 80


def print_stage_ids() -> None:
    """One wrapped note under the status table: which stage id (``--stage``, ``--json``, the settings)
    each console name stands for, where the two differ (``Parse is convert``)."""
    from ki.core.taxonomies import STAGE_CONSOLE_NAMES

    pairs = [f"{STAGE_CONSOLE_NAMES[s]} is {s}" for s in PIPELINE_STAGE_ORDER if STAGE_CONSOLE_NAMES[s].lower() != s]
    out.print("stage ids (for --stage, --json and the settings): " + ", ".join(pairs), markup=False,
              highlight=False, width=min(out.width, STATUS_WIDTH), style="dim")
