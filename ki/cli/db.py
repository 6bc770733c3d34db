"""``ki db stop``: the embedded PostgreSQL of this data directory."""

from __future__ import annotations

import typer

from ki.cli.common import console, out
from ki.cli.faults import EXIT_IN_USE

group = typer.Typer(no_args_is_help=True, help="The embedded PostgreSQL")


@group.command("stop")
def db_stop(force: bool = typer.Option(False, "--force", help="stop even while other processes use it")) -> None:
    """Stop the embedded PostgreSQL of this data directory (it otherwise keeps running).

    Refused (exit 6) while another process is connected to it — a running `ki insert`, `ki serve` or
    `ki worker` would fail — unless --force."""
    from ki.config.loader import ProcessSettings
    from ki.store.db import embedded_server_sessions, stop_embedded_server

    settings = ProcessSettings()
    pgdata = settings.data_dir / "pg"
    sessions = embedded_server_sessions(pgdata)
    if sessions is None:
        out.print("not running")
        return
    if sessions and not force:
        console.print(f"[yellow]refused:[/] {len(sessions)} other connection{'s' if len(sessions) != 1 else ''} "
                      f"to the embedded PostgreSQL in {pgdata} (another ki process is using it):",
                      highlight=False, soft_wrap=True)
        for line in sessions:
            console.print(f"  {line}", markup=False, highlight=False)
        console.print("stop those processes first, or run `ki db stop --force` (their work stops and resumes "
                      "with the next `ki insert`)", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_IN_USE)
    stopped = stop_embedded_server(pgdata)
    out.print("stopped" if stopped else "not running")


def register(app: typer.Typer) -> None:
    """Add ``ki db``."""
    app.add_typer(group, name="db")
