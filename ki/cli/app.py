"""The Typer app of the ``ki`` command, and how command modules join it.

Every module of :mod:`ki.cli` other than ``app``, ``common`` and ``__main__`` is one command group:
it defines ``register(app: typer.Typer) -> None``, which adds its commands (``@app.command()``) or
its own sub-app (``app.add_typer(group, name=...)``). Adding a command group is adding one module;
:data:`HELP_ORDER` only orders ``ki --help`` (modules it does not list follow, alphabetically).
Command modules import what they drive inside the command functions, so ``ki --help`` stays fast, and the
``ki`` command imports only the module of the command it runs when that module is named like the command
(``ki search`` → :mod:`ki.cli.search`; else every module): a cold ``ki search`` does not pay for the others.
:data:`app` (``from ki.cli.app import app``, what tests drive) has every command group.
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

_app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                   help="ki: durable document insertion")
_registered: set[str] = set()


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("ki")
        except PackageNotFoundError:  # running from a source tree that was never installed
            number = "unknown (not installed)"
        typer.echo(f"ki {number}")
        raise typer.Exit()


@_app.callback()
def _options(
    show_version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                      help="Print ki's version and exit."),
) -> None:
    from ki.config.environment import tracing_requested

    if not tracing_requested():
        return  # tracing stays off without an OTEL_* variable: its settings and the SDK are not even loaded
    from ki.adapters.observability.tracing import configure_from_env

    configure_from_env()  # OpenTelemetry traces when the OTEL_* variables ask for them (off by default)


def command_modules() -> list[str]:
    """Names of the command modules of :mod:`ki.cli`, in ``ki --help`` order."""
    package = Path(__file__).resolve().parent
    found = {m.name for m in pkgutil.iter_modules([str(package)])} - _NOT_COMMANDS
    return [n for n in HELP_ORDER if n in found] + sorted(found - set(HELP_ORDER))


def _register(names: list[str]) -> typer.Typer:
    """Add the command groups of the modules ``names`` (those not added yet) to the app; the app.

    Raises: RuntimeError when a module defines no ``register(app)``."""
    for name in names:
        if name in _registered:
            continue
        module = importlib.import_module(f"ki.cli.{name}")
        register = getattr(module, "register", None)
        if register is None:
            raise RuntimeError(f"ki.cli.{name} defines no register(app): every module of ki.cli is a command group")
        register(_app)
        _registered.add(name)
    return _app


def _command_names() -> set[str]:
    names = {c.name or (c.callback.__name__ if c.callback else "") for c in _app.registered_commands}
    return names | {g.name for g in _app.registered_groups}


def app_for(argv: list[str]) -> typer.Typer:
    """The app with what the command line ``argv`` (without the program name) needs: the command module named
    like its first word when that module defines the command, else every command module (``ki --help``, a
    misspelt command, a command defined in a module of another name)."""
    first = argv[0] if argv else ""
    modules = command_modules()
    if first in modules:
        _register([first])
        if first in _command_names():
            return _app
    return _register(modules)


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # every command group (tests, ``ki.cli.app.app``)
        return _register(command_modules())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:  # pragma: no cover - console entry
    """The console entry point (``ki``): runs :data:`app`. Logging goes to ``ki.log`` (warnings also to
    stderr, one line each); any exception a command lets out is reported by :func:`ki.cli.faults.report`
    (one message, what to do, the log's path) and exits with its documented code, never a traceback."""
    os.umask(0o077)  # what ki writes (search index, configuration, exports) is private to its user
    faults.configure_logging()
    app = app_for(sys.argv[1:])
    first = sys.argv[1] if len(sys.argv) > 1 else ""
    faults.running(f"ki {first}" if first in _command_names() else "ki")
    try:
        app()  # standalone: usage errors, --help and typer.Exit end here through SystemExit
    except Exception as exc:  # noqa: BLE001 - every other fault becomes one message + ki.log
        sys.exit(faults.report(exc, console))
