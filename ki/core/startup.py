"""The startup timeline of a ``ki insert`` process: where the seconds before its first finished row go.

What is measured here is the recovery time after a ``kill -9`` (the restart until the first stage
row is finished, ≤ 5 s on the same host). A restart spends it in phases: the interpreter and imports,
opening the context (settings, the embedded PostgreSQL started or attached, the migrations check),
registering the source, the scan of the (mostly unchanged) estate, the run row (with the sweep of
the dead process's run), the prepare steps (stale-claim recovery of the dead claimer's rows among
them), the first claim and the first finished row. :data:`TIMELINE` records each phase's end once,
as wall seconds since the process started (its start time in ``/proc``, so the interpreter's own
start is counted) and CPU seconds of the process (every thread; ``time.process_time``: on a loaded
machine wall time grows with the load, CPU time stays near the quiet latency). Child processes
(conversion workers) and the PostgreSQL server's work are not in the CPU figure.

The timeline is off until :meth:`Timeline.begin` (``ki insert`` / ``ki sync`` call it); marks made
while it is off, or after the first finished row, do nothing, so a long-lived ``ki serve`` running
many runs never records one. When the first row is finished the whole timeline is logged once at
INFO (``ki.log``), as :meth:`Timeline.line` renders it; ``bench/chaos.py`` reads that line.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass

from ki.core.liveness import process_start_ticks

log = logging.getLogger(__name__)

#: the phase whose mark ends the timeline (and logs it)
FIRST_ROW = "first row finished"


def process_age_seconds() -> float:
    """Wall seconds since this process started (``/proc/self/stat`` start time against the boot clock);
    0.0 where there is no ``/proc``."""
    ticks = process_start_ticks(os.getpid())
    if ticks is None:
        return 0.0
    started = ticks / os.sysconf("SC_CLK_TCK")
    return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)


@dataclass(frozen=True)
class Mark:
    """One phase's end: ``wall`` and ``cpu`` seconds since the process started; ``detail`` (e.g. the
    stage of the first claimed row) is shown in brackets."""

    phase: str
    wall: float
    cpu: float
    detail: str | None = None


class Timeline:
    """The phases of one process's startup (see the module doc). Thread-safe; each phase is kept once
    (its first mark)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._on = False
        self._done = False
        self.marks: list[Mark] = []

    def begin(self) -> None:
        """Start recording (``ki insert``'s first line); marks the interpreter and imports."""
        with self._lock:
            self._on, self._done, self.marks = True, False, []
        self.mark("interpreter and imports")

    def mark(self, phase: str, detail: str | None = None) -> None:
        """Record the end of ``phase`` (first mark only; nothing while off or after :data:`FIRST_ROW`).
        Marking :data:`FIRST_ROW` logs :meth:`line` at INFO."""
        with self._lock:
            if not self._on or self._done or any(m.phase == phase for m in self.marks):
                return
            self.marks.append(Mark(phase, process_age_seconds(), time.process_time(), detail))
            if phase != FIRST_ROW:
                return
            self._done = True
            line = self.line()
        log.info("%s", line)

    def line(self) -> str:
        """``startup timeline: 3.41 s wall, 2.20 s CPU to the first row finished; interpreter and imports
        +1.02 s (cpu +0.95) · context +0.31 s (cpu +0.12) · …`` — each phase's own seconds (the difference
        from the phase before it)."""
        if not self.marks:
            return "startup timeline: nothing recorded"
        parts, wall, cpu = [], 0.0, 0.0
        for m in self.marks:
            named = f"{m.phase} [{m.detail}]" if m.detail else m.phase
            parts.append(f"{named} +{m.wall - wall:.2f} s (cpu +{m.cpu - cpu:.2f})")
            wall, cpu = m.wall, m.cpu
        last = self.marks[-1]
        return (f"startup timeline: {last.wall:.2f} s wall, {last.cpu:.2f} s CPU to the {last.phase}; "
                + " · ".join(parts))


#: this process's timeline
TIMELINE = Timeline()
