"""LibreOffice headless as ki's converter of legacy formats: found at start, run and stopped by ki per file.

docs/design-decisions.md "Legacy Office through LibreOffice". ``components.libreoffice`` names the ``soffice``
command (default ``soffice`` on PATH; empty turns it off). :func:`find_soffice` resolves it to the
``soffice.bin`` program itself (the ``soffice`` shell wrapper and its ``oosplash`` launcher fork the real
process away from ki's control). :func:`convert_file` runs one conversion in a process group of its own:

* with a private user profile per conversion worker (``-env:UserInstallation``): two workers never share
  a profile (LibreOffice locks it), and the user's own LibreOffice settings never apply;
* under the worker's memory budget (the ``RLIMIT_DATA`` of :mod:`ki.adapters.convert.isolation` is inherited);
* under a wall-clock limit a little shorter than the worker's, after which the whole group is killed;
* with ``PR_SET_PDEATHSIG``: if the worker itself is killed (its budget, a lost claim), the kernel kills
  LibreOffice with it — no orphan ``soffice.bin`` is left behind.

One conversion at a time per worker (a worker runs one file at a time), so as many LibreOffice processes
as conversion slots at most.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import time
from functools import cache
from pathlib import Path

from ki.core.errors import UnsupportedDocument

#: What to install when LibreOffice is absent (the ``needs_converter`` quarantine names it).
INSTALL_HINT = ("install LibreOffice (Debian: apt-get install libreoffice-writer-nogui libreoffice-calc-nogui "
                "libreoffice-impress-nogui) or set components.libreoffice to its soffice")
_PR_SET_PDEATHSIG = 1
#: soffice.bin's exit code asking to be started again (after it created a new user profile).
RESTART_EXIT = 81


@cache
def _resolve(command: str) -> str | None:
    found = shutil.which(command) if command else None
    if not found:
        return None
    real = Path(found).resolve()
    program = real.with_name("soffice.bin")
    return str(program) if program.is_file() and os.access(program, os.X_OK) else str(real)


def find_soffice(command: str | None) -> str | None:
    """The LibreOffice program ``command`` (``components.libreoffice``) names, or None when it is empty or
    nothing executable is found (on PATH or as a path). Cached per command for the process."""
    return _resolve(command or "")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


_PROFILE: list[str] = []


def _profile_dir() -> str:
    """This worker's private LibreOffice profile (created on first use, removed when the worker exits)."""
    if not _PROFILE:
        path = tempfile.mkdtemp(prefix=f"ki-soffice-{os.getpid()}-")
        _PROFILE.append(path)
        atexit.register(shutil.rmtree, path, True)
    return _PROFILE[0]


def convert_file(program: str, source: Path, target_filter: str, out_dir: Path, *, timeout_seconds: float) -> Path:
    """Convert ``source`` with LibreOffice to ``target_filter`` (``docx``, ``pptx``, ``pdf`` …) in ``out_dir``.

    Returns: the converted file's path.
    Raises:
        UnsupportedDocument: ``too_large`` past ``timeout_seconds`` (the process group is killed);
            ``conversion_failed`` when LibreOffice produced no file (it cannot read this one; its output
            is in ``details``).
    """
    profile = Path(_profile_dir()).as_uri()
    args = [program, "--headless", "--invisible", "--nologo", "--norestore", "--nodefault", "--nolockcheck",
            f"-env:UserInstallation={profile}", "--convert-to", target_filter, "--outdir", str(out_dir), str(source)]
    deadline = time.monotonic() + timeout_seconds
    for _ in range(2):  # a fresh profile makes soffice.bin exit 81 ("restart") once: oosplash's job, now ours
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                cwd=out_dir, start_new_session=True, preexec_fn=_die_with_parent)
        try:
            output, _ = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise UnsupportedDocument(f"{source.name}: LibreOffice took longer than {timeout_seconds:g} s",
                                      reason="too_large", details={"limit_seconds": timeout_seconds}) from None
        finally:
            _kill_group(proc)  # whatever it left running in its group
        if proc.returncode != RESTART_EXIT:
            break
    produced = sorted(p for p in out_dir.iterdir() if p != source and p.is_file())
    if not produced:
        text = output.decode("utf-8", "replace").strip()[-500:]
        raise UnsupportedDocument(f"{source.name}: LibreOffice could not convert it (exit {proc.returncode})",
                                  reason="conversion_failed", details={"libreoffice": text,
                                                                       "exit_code": proc.returncode})
    return produced[0]


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignored
        pass
