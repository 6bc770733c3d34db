"""``ki config show|set``: the effective configuration and edits of the saved file."""

from __future__ import annotations

import json

import typer

from ki.cli.common import console, open_context, out, shown
from ki.errors import ConfigurationError

group = typer.Typer(no_args_is_help=True, help="Show and edit the saved configuration")


@group.command("show")
def config_show() -> None:
    """The effective configuration (saved file + environment pins), with pinned fields listed."""
    from ki.config.loader import env_pinned_fields

    ctx = open_context()
    data = ctx.config.model_dump(mode="json")
    for name, stage in data["pipeline"]["stages"].items():
        stage["producer_version"] = ctx.config.pipeline.producer_version(name)
    out.print_json(json.dumps({"config": data, "env_pinned": env_pinned_fields(),
                               "data_dir": str(ctx.settings.data_dir)}))


@group.command("set")
def config_set(key: str = typer.Argument(..., help="dotted field, e.g. pipeline.max_file_mb"),
               value: str = typer.Argument(..., help="new value (JSON or plain text)")) -> None:
    """Edit one field of the saved configuration (refused when pinned by the environment)."""
    from ki.config.loader import ProcessSettings, set_config_value

    settings = ProcessSettings()
    try:
        set_config_value(settings.data_dir, key, value)
    except ConfigurationError as exc:
        console.print(f"[red]refused:[/] {shown(exc)}", highlight=False)
        raise typer.Exit(2) from exc
    out.print(f"{key} = {value}")


def register(app: typer.Typer) -> None:
    """Add ``ki config``."""
    app.add_typer(group, name="config")
