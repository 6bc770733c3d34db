"""``ki config show|set|unset``: the effective configuration and edits of the saved file.

Edits go through :func:`ki.app.config_edits.apply_config_changes` (validated as a whole, nothing written on
an error, each field's messages without pydantic's links) and are audited with ``cli:<OS user>`` as the
actor, together with the file (:mod:`ki.store.config_journal`). Whether an edit needs a run, and why, is the
console's rule (:func:`ki.app.config_view.requires_run`); which fields are secret is the console's
too (:func:`ki.app.config_view.is_secret`) — one rule for both surfaces.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from ki.cli.common import console, open_context, out, shown
from ki.config.loader import load_config

group = typer.Typer(no_args_is_help=True, help="Show and edit the saved configuration")

#: The first stage that reads each section (a prefix of the dotted key), for "how to apply it to the
#: documents already processed": bumping its rerun_token re-runs it and every later stage.
FIRST_READER: tuple[tuple[str, str], ...] = (("firm.", "classify_matter"), ("retrieval.", "index"),
                                             ("pipeline.ocr.", "convert"))


def _mask_secrets(data: dict[str, Any], prefix: str = "") -> None:
    from ki.app.config_view import is_secret

    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            _mask_secrets(value, dotted)
        elif is_secret(dotted) and value:
            data[key] = "***"


@group.command("show")
def config_show() -> None:
    """The effective configuration (saved file + environment pins), with pinned fields listed; secrets
    (API keys, passwords, tokens) show as "***"."""
    from ki.config.loader import env_pinned_fields

    ctx = open_context()
    data = ctx.config.model_dump(mode="json")
    for name, stage in data["pipeline"]["stages"].items():
        stage["producer_version"] = ctx.config.pipeline.producer_version(name)
        stage["timeout_seconds"] = ctx.config.pipeline.timeout_seconds(name)  # the default when unset
    _mask_secrets(data)
    out.print_json(json.dumps({"config": data, "env_pinned": env_pinned_fields(),
                               "data_dir": str(ctx.settings.data_dir)}))


def _refuse(exc: Exception) -> typer.Exit:
    from ki.core.errors import ConfigValidationError

    if isinstance(exc, ConfigValidationError):
        for key, messages in exc.errors.items():
            console.print(f"[red]refused:[/] {shown(key)}: {shown('; '.join(messages))}", highlight=False,
                          soft_wrap=True)
    else:
        console.print(f"[red]refused:[/] {shown(exc)}", highlight=False, soft_wrap=True)
    console.print("nothing was changed", highlight=False)
    return typer.Exit(2)


def _data_dir() -> Path:
    """The data directory, checked (an edit needs no database)."""
    from ki.cli.faults import check_data_dir
    from ki.config.loader import ProcessSettings

    data_dir = ProcessSettings().data_dir
    check_data_dir(data_dir)
    return data_dir


def cli_actor() -> str:
    """The audit actor of an edit from the command line: ``cli:<the OS user>``."""
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no passwd entry for the uid (a container)
        import os

        return f"cli:uid{os.getuid()}"


def _audit(keys: list[str]) -> Any:
    """The edit's audit (:func:`ki.app.config_view.edit_audit`) on ki's database, as :func:`cli_actor`."""
    from ki.app.config_view import edit_audit

    return edit_audit(open_context().db.engine, cli_actor(), keys)


def _coerced(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _rerun_cost(stage: str) -> None:
    """With a spending cap set (``pipeline.budget``): the re-run's estimated cost (the console dialog's estimate) set
    against the budget left. Nothing without a cap."""
    from ki.app.preview import rerun_preview

    ctx = open_context()
    p = rerun_preview(ctx, ctx.config, stage)
    if p.budget_note is None:
        return
    cost = "unknown" if p.estimate_usd is None else f"${p.estimate_usd:.2f}"
    line = f"re-runs {p.files} file(s) through {', '.join([stage, *p.downstream_stages])}: estimated cost {cost}"
    console.print(line + (f"; {p.budget_note}" if p.budget_note else ""), highlight=False, soft_wrap=True)


def _explain(key: str, old: Any, new: Any) -> None:
    """Say when the change takes effect: at the next run (the console's rule) or, for a field documents
    are processed with (:data:`FIRST_READER`), that it changes nothing already processed and how to apply
    it to those documents. Operational fields (timeouts, attempts, sizes) say nothing more."""
    from ki.app.config_view import requires_run, run_rule
    from ki.core.taxonomies import STAGE_CONSOLE_NAMES

    reason = requires_run(key, old, new)
    if reason:
        console.print(f"takes effect at the next run (`ki source rescan` or `ki insert`): {reason}", highlight=False,
                      soft_wrap=True)
        if key.startswith("pipeline.stages.") and key.endswith(".rerun_token") and old != new:
            _rerun_cost(key.split(".")[2])
        return
    stage = next((s for prefix, s in FIRST_READER if key.startswith(prefix)), None)
    if run_rule(key)[0] is not None or old == new or stage is None:
        return
    from ki.store.sources import list_sources

    with open_context().db.engine.connect() as conn:
        documents = sum(s.documents for s in list_sources(conn))
    if documents:
        console.print(f"note: this changes nothing for the {documents} documents already processed (files "
                      f"processed from now on use it); to apply it to them, `ki config set pipeline.stages."
                      f"{stage}.rerun_token NEW` re-runs {STAGE_CONSOLE_NAMES[stage]} and every later stage for "
                      "them at the next run", highlight=False, soft_wrap=True)


@group.command("set", context_settings={"ignore_unknown_options": True})
def config_set(key: str = typer.Argument(..., help="dotted field, e.g. pipeline.max_file_mb"),
               value: str = typer.Argument(..., help="new value (JSON or plain text; `-5` is a value)")) -> None:
    """Edit one field of the saved configuration; the value is checked first (range, URL, choices) and
    nothing is written when it is refused, or when the field is pinned by the environment."""
    from ki.app.config_edits import apply_config_changes
    from ki.app.config_view import flat_values, is_secret
    from ki.core.errors import ConfigurationError, ConfigValidationError

    data_dir = _data_dir()
    old = flat_values(load_config(data_dir)).get(key)
    new = _coerced(value)
    audit = _audit([key])
    try:
        try:
            checked, _ = apply_config_changes(data_dir, {key: new}, expected_version=None, audit=audit)
        except ConfigValidationError as first:
            if new == value:
                raise
            try:  # "2" meant as text (a rerun token, a firm name): try the string
                checked, _ = apply_config_changes(data_dir, {key: value}, expected_version=None, audit=audit)
            except ConfigValidationError:
                raise first from None  # the value as JSON was meant: its refusal is the one to show
            new = value
    except ConfigurationError as exc:
        raise _refuse(exc) from exc
    out.print(f"{shown(key)} = {'***' if is_secret(key) else shown(json.dumps(new, ensure_ascii=False))}",
              highlight=False)
    _explain(key, old, flat_values(checked).get(key))


@group.command("unset")
def config_unset(key: str = typer.Argument(..., help="dotted field, e.g. firm.name")) -> None:
    """Remove a field from the saved configuration: it falls back to its default."""
    from ki.app.config_edits import unset_config_value
    from ki.app.config_view import flat_values
    from ki.core.errors import ConfigurationError

    data_dir = _data_dir()
    old = flat_values(load_config(data_dir)).get(key)
    try:
        removed = unset_config_value(data_dir, key, audit=_audit([key]))
    except ConfigurationError as exc:
        raise _refuse(exc) from exc
    if not removed:
        out.print(f"{shown(key)} was not set in the saved configuration (it has its default)", highlight=False)
        return
    new = flat_values(load_config(data_dir)).get(key)
    out.print(f"{shown(key)} unset (default: {shown(json.dumps(new, ensure_ascii=False))})", highlight=False)
    _explain(key, old, new)


def register(app: typer.Typer) -> None:
    """Add ``ki config``."""
    app.add_typer(group, name="config")
