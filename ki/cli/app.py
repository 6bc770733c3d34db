"""The Typer app of the ``ki`` command, and how command modules join it.

Every module of :mod:`ki.cli` other than ``app``, ``common`` and ``__main__`` is one command group:
it defines ``register(app: typer.Typer) -> None``, which adds its commands (``@app.command()``) or
its own sub-app (``app.add_typer(group, name=...)``). Adding a command group is adding one module;
:data:`HELP_ORDER` only orders ``ki --help`` (modules it does not list follow, alphabetically).
Command modules import what they drive inside the command functions, so ``ki --help`` stays fast.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

import typer

from ki.cli.common import console
from ki.errors import KiError

#: ``ki --help`` lists the command modules in this order, then every other one alphabetically.
HELP_ORDER: tuple[str, ...] = ("insert", "status", "search", "quarantine", "config", "export", "index", "worker",
                               "db")
_NOT_COMMANDS = frozenset({"app", "common", "__main__"})

app = typer.Typer(add_completion=False, no_args_is_help=True, help="ki: durable document insertion")


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
    """The console entry point (``ki``): runs :data:`app`; a :class:`ki.errors.KiError` prints one line, exit 2."""
    try:
        app()
    except KiError as exc:
        console.print(f"[red]{type(exc).__name__}:[/] {exc}")
        sys.exit(2)
