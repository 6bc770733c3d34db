"""``ki db stop``: the embedded PostgreSQL of this data directory."""

from __future__ import annotations

import typer

from ki.cli.common import out

group = typer.Typer(no_args_is_help=True, help="The embedded PostgreSQL")


@group.command("stop")
def db_stop() -> None:
    """Stop the embedded PostgreSQL of this data directory (it otherwise keeps running)."""
    from ki.config.loader import ProcessSettings
    from ki.store.db import stop_embedded_server

    settings = ProcessSettings()
    stopped = stop_embedded_server(settings.data_dir / "pg")
    out.print("stopped" if stopped else "not running")


def register(app: typer.Typer) -> None:
    """Add ``ki db``."""
    app.add_typer(group, name="db")
