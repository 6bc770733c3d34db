"""Starting and stopping the real outside components the tests run (Hatchet engine, OpenSearch node).

:class:`ManagedProcess` is a child process in its own process group whose output goes to a log
file: :meth:`~ManagedProcess.launch` starts it and waits until a readiness check passes (a child that
exits or a check that times out raises with the log's tail, and the child is killed);
:meth:`~ManagedProcess.stop` is SIGTERM to the group, SIGKILL after a timeout; :meth:`~ManagedProcess.kill`
simulates a crash. The small probes (free ports, HTTP and TCP checks, the build cache directory) live
here too, so each component module holds only what is its own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

#: How often a readiness check is polled (s).
POLL_SECONDS = 0.2


def cache_dir() -> Path:
    """Where ``.ci/install_*.sh`` cache their builds: ``$KI_CACHE_DIR`` or ``~/.cache/ki``."""
    return Path(os.environ.get("KI_CACHE_DIR") or Path.home() / ".cache" / "ki")


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free on 127.0.0.1 right now."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def http_ok(url: str, timeout: float = 1.0) -> bool:
    """Whether ``GET url`` answers 2xx within ``timeout`` seconds."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return 200 <= resp.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def tcp_open(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port``."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
        return True
    return False


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file (``(no log)`` when it cannot be read)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class ManagedProcess:
    """A child in its own process group, output appended to :attr:`log_path`.

    Subclasses set :attr:`name` (used in messages) and define :attr:`log_path`; ``process`` is the
    running child or None.
    """

    name = "process"
    process: subprocess.Popen[bytes] | None = None
    #: log lines quoted in a startup error
    log_tail_lines = 40

    @property
    def log_path(self) -> Path:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def launch(self, cmd: Sequence[str], *, ready: Callable[[float], None], timeout: float,
               env: Mapping[str, str] | None = None, cwd: Path | None = None, stdin: int | IO[Any] | None = None,
               ) -> float:
        """Start ``cmd`` and call ``ready(deadline)`` (a ``time.monotonic()`` instant ``timeout`` s away).

        ``stdin`` defaults to /dev/null (``subprocess.PIPE`` keeps a pipe the child may watch).
        Returns the seconds until ready. Raises whatever ``ready`` raises (the child is killed first).
        """
        t0 = time.monotonic()
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        try:
            self.process = subprocess.Popen(
                list(cmd), env=dict(env) if env is not None else None, cwd=cwd,
                stdin=subprocess.DEVNULL if stdin is None else stdin, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        try:
            ready(t0 + timeout)
        except BaseException:
            self.kill()
            raise
        return time.monotonic() - t0

    def check_alive(self) -> None:
        """Raise RuntimeError (with the log's tail) when the child has exited."""
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.process.returncode} during startup; "
                               f"log {self.log_path}:\n{tail(self.log_path, self.log_tail_lines)}")

    def wait_until(self, condition: Callable[[], bool], deadline: float, waiting_for: Callable[[], str]) -> None:
        """Poll ``condition`` until it holds; TimeoutError after ``deadline`` naming ``waiting_for()``."""
        while True:
            self.check_alive()
            if condition():
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} not ready in time (waiting for {waiting_for()}); "
                                   f"log {self.log_path}:\n{tail(self.log_path, self.log_tail_lines)}")
            time.sleep(POLL_SECONDS)

    def _signal_group(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, sig)

    def _forget(self) -> None:
        if self.process is not None and self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        self.process = None

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful stop: SIGTERM to the process group, SIGKILL after ``timeout`` seconds."""
        if self.process is None:
            return
        self._signal_group(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._forget()

    def kill(self) -> None:
        """SIGKILL the process group (crash simulation)."""
        if self.process is None:
            return
        self._signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        self._forget()

    def rss_bytes(self) -> int:
        """Resident memory of the child (Linux ``/proc``); 0 when not running."""
        if not self.is_running():
            return 0
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def __enter__(self) -> ManagedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
