"""Which process holds a claim or a run, and whether it is still alive.

A claim (``processing_state.claimed_by``) and a local run (``pipeline_runs.worker``) record the
process that holds them as a **worker identity** ``host:pid:start``: the host name, the process
id and the process's start time (clock ticks since boot, field 22 of ``/proc/<pid>/stat``). A
holder on *this* host is dead when its pid no longer exists or now belongs to another program
(a different start time: the pid was reused); such claims are recovered at once instead of after
``claim_timeout_seconds``. Holders on other hosts cannot be examined: their claims keep the
timeout. Identities without a start time (``host:pid``, older rows, a system without ``/proc``)
are judged by the pid alone.

Assumes one host name per pid namespace (two containers sharing a host name and not a pid
namespace would see each other's claims as dead: give them distinct host names).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class WorkerIdentity:
    """A parsed worker identity: ``host``, ``pid``, ``start`` (clock ticks since boot, or None)."""

    host: str
    pid: int
    start: int | None = None

    def __str__(self) -> str:
        return f"{self.host}:{self.pid}" + (f":{self.start}" if self.start is not None else "")


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """``(state, start ticks)`` of process ``pid`` from ``/proc/<pid>/stat``, or None (no such
    process, no ``/proc``). The ``comm`` field may hold spaces and parentheses: the fields after it
    are counted from the last ``)``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        rest = data[data.rindex(b")") + 2:].split()
        return rest[0].decode("ascii", "replace"), int(rest[19])
    except (ValueError, IndexError):
        return None


def process_start_ticks(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot, or None when there is no such
    process or the system has no ``/proc``."""
    st = _proc_stat(pid)
    return st[1] if st is not None else None


@cache
def _host() -> str:
    return socket.gethostname()


def this_worker() -> str:
    """This process's worker identity ``host:pid:start`` (``host:pid`` without ``/proc``)."""
    return str(WorkerIdentity(_host(), os.getpid(), process_start_ticks(os.getpid())))


def parse_worker(worker: str | None) -> WorkerIdentity | None:
    """``host:pid[:start]`` parsed, or None for anything else (a foreign or legacy label)."""
    if not worker:
        return None
    parts = worker.split(":")
    if len(parts) not in (2, 3) or not parts[0]:
        return None
    try:
        pid = int(parts[1])
        start = int(parts[2]) if len(parts) == 3 else None
    except ValueError:
        return None
    return WorkerIdentity(parts[0], pid, start) if pid > 0 else None


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def dead_here(worker: str | None) -> bool:
    """True when ``worker`` names a process on this host that is gone (or a zombie), or whose pid
    another process now uses (its start time differs). False for other hosts and for labels that
    are no identity."""
    ident = parse_worker(worker)
    if ident is None or ident.host != _host():
        return False
    if ident.pid == os.getpid():
        return ident.start is not None and ident.start != process_start_ticks(ident.pid)
    if not _pid_exists(ident.pid):
        return True
    st = _proc_stat(ident.pid)
    if st is None:  # no /proc: the pid exists, nothing more is known
        return False
    state, start = st
    if state in ("Z", "X"):  # a zombie (killed, not yet reaped by its parent) holds nothing
        return True
    return ident.start is not None and start != ident.start
