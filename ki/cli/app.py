"""The Typer app of the ``ki`` command, and how command modules join it.

Every module of :mod:`ki.cli` other than ``app``, ``common`` and ``__main__`` is one command group:
it defines ``register(app: typer.Typer) -> None``, which adds its commands (``@app.command()``) or
its own sub-app (``app.add_typer(group, name=...)``). Adding a command group is adding one module;
:data:`HELP_ORDER` only orders ``ki --help`` (modules it does not list follow, alphabetically).
Command modules import what they drive inside the command functions, so ``ki --help`` stays fast.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from pathlib import Path

import typer

import ki.cli.faults as faults
from ki.cli.common import console

#: ``ki --help`` lists the command modules in this order, then every other one alphabetically.
HELP_ORDER: tuple[str, ...] = ("insert", "source", "status", "search", "quarantine", "config", "export", "index",
                               "worker", "db")
_NOT_COMMANDS = frozenset({"app", "common", "faults", "live", "__main__"})

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="ki: durable document insertion")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("ki")
        except PackageNotFoundError:  # running from a source tree that was never installed
            number = "unknown (not installed)"
        typer.echo(f"ki {number}")
        raise typer.Exit()


@app.callback()
def _options(
    show_version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                      help="Print ki's version and exit."),
) -> None:
    from ki.adapters.observability.tracing import configure_from_env

    configure_from_env()  # OpenTelemetry traces when the OTEL_* variables ask for them (off by default)


def command_modules() -> list[str]:
    """Names of the command modules of :mod:`ki.cli`, in ``ki --help`` order."""
    package = Path(__file__).resolve().parent
    found = {m.name for m in pkgutil.iter_modules([str(package)])} - _NOT_COMMANDS
    return [n for n in HELP_ORDER if n in found] + sorted(found - set(HELP_ORDER))


def _register_all() -> None:
    for name in command_modules():
        module = importlib.import_module(f"ki.cli.{name}")
        register = getattr(module, "register", None)
        if register is None:
            raise RuntimeError(f"ki.cli.{name} defines no register(app): every module of ki.cli is a command group")
        register(app)


_register_all()


def main() -> None:  # pragma: no cover - console entry
    """The console entry point (``ki``): runs :data:`app`. Logging goes to ``ki.log`` (warnings also to
    stderr, one line each); any exception a command lets out is reported by :func:`ki.cli.faults.report`
    (one message, what to do, the log's path) and exits with its documented code, never a traceback."""
    os.umask(0o077)  # what ki writes (search index, configuration, exports) is private to its user
    faults.configure_logging()
    names = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    names |= {g.name for g in app.registered_groups}
    first = sys.argv[1] if len(sys.argv) > 1 else ""
    faults.running(f"ki {first}" if first in names else "ki")
    try:
        app()  # standalone: usage errors, --help and typer.Exit end here through SystemExit
    except Exception as exc:  # noqa: BLE001 - every other fault becomes one message + ki.log
        sys.exit(faults.report(exc, console))
