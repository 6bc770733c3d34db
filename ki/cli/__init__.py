"""The ``ki`` command (Typer): one module per command group, registered by :mod:`ki.cli.app`.

The console entry point is ``ki.cli:main`` (the Typer app with every command group: ``ki.cli.app.app``);
``python -m ki.cli`` runs the same. The data directory is ``KI_DATA_DIR`` (default: the platform's user data
directory).
"""

from ki.cli.app import main

__all__ = ["main"]
