"""The ``ki`` command as the CLI acceptance tests run it: the entry point of this venv, a user's
environment, and a private folder for the data directory (pytest's rotating basetemp may be pruned by a
concurrent session while the embedded PostgreSQL still runs in it)."""

from __future__ import annotations

import os
import shutil
import subprocess
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


def run_ki(env: dict[str, str], *args: str, code: int = 0, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``ki ARGS`` (stdin closed); assert its exit code and that no traceback reached stderr."""
    proc = subprocess.run([*KI, *args], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == code, f"ki {' '.join(args)} exited {proc.returncode}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


class KiUser:
    """A user's shell for one test: a data directory under ``base``, their environment, the ``ki`` command."""

    def __init__(self, base: Path):
        self.base = base
        self.data_dir = base / "data"
        self.env = user_env(self.data_dir)

    def __call__(self, *args: str, code: int = 0, extra: dict[str, str] | None = None,
                 timeout: float = 600) -> subprocess.CompletedProcess:
        """``ki ARGS`` with :func:`run_ki`'s checks; ``extra`` adds environment variables."""
        return run_ki(self.env | (extra or {}), *args, code=code, timeout=timeout)
