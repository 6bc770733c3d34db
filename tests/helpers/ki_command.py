"""The ``ki`` command as the CLI acceptance tests run it: the entry point of this venv, a user's
environment, and a private folder for the data directory (pytest's rotating basetemp may be pruned by a
concurrent session while the embedded PostgreSQL still runs in it)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

KI_SCRIPT = Path(sys.executable).parent / "ki"
#: The command line of ``ki`` (the console script, else ``python -m ki.cli``).
KI = [str(KI_SCRIPT)] if KI_SCRIPT.exists() else [sys.executable, "-m", "ki.cli"]


def user_env(data_dir: Path) -> dict[str, str]:
    """This process's environment without any ``KI_`` variable, with ``KI_DATA_DIR=data_dir``."""
    return {k: v for k, v in os.environ.items() if not k.startswith("KI_")} | {"KI_DATA_DIR": str(data_dir)}


@contextmanager
def private_folder(prefix: str) -> Iterator[Path]:
    """A fresh folder; on exit the embedded PostgreSQL of ``<folder>/data`` is stopped and the folder removed."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        from ki.store.db import stop_embedded_server

        stop_embedded_server(path / "data" / "pg")
        shutil.rmtree(path, ignore_errors=True)
