"""Conversions of untrusted formats in worker processes, under a memory and a wall-clock budget per file.

A hostile or merely huge file must not take the whole process down or hold a
worker for ever: ki's own converters (text, mail, mbox, MSG, DOCX, XLSX, PPTX, OpenDocument, PDF, HTML, RTF
and OCR — PDFium, lxml, openpyxl, python-pptx, striprtf, Pillow and onnxruntime parse untrusted bytes) run
in a pool of worker processes.

* **Memory**: each worker sets ``RLIMIT_DATA`` (private writable memory: the heap and anonymous
  mappings, which is what a parser's allocations use; not the shared libraries' mappings, which
  ``RLIMIT_AS`` would count) to ``pipeline.convert.memory_mb``. An allocation beyond it fails:
  Python raises MemoryError, a C library aborts; either way the file is quarantined ``too_large``
  with the limit and the worker's peak resident size. A C parser whose allocation fails may report
  damage instead (libxml2's "unknown error"): a failure after the file pushed the worker past
  :data:`OUT_OF_MEMORY_SHARE` of its budget is ``too_large`` too (``converter_failure`` says what
  the converter reported). The peak counts shared libraries, the limit does not: a file may finish
  with a peak a little above ``memory_mb``.
* **Wall clock**: the caller waits at most ``pipeline.convert.timeout_seconds``, renewing its
  claim every :data:`RENEW_SECONDS` meanwhile; then the worker is killed and the file quarantined
  ``too_large`` with the figure. A lost claim kills the worker too (:class:`~ki.core.errors.ClaimLost`).
* A worker that dies near its memory limit (peak resident size sampled every second) ran out of
  it: ``too_large``. One that dies of a crash signal (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL)
  well below it crashed on the file's content: ``corrupt``. A worker killed from outside, or
  ending for no reason of its own, is an outage (:class:`~ki.core.errors.InfrastructureError`, retried).

A worker is a fresh interpreter (``python -m ki.adapters.convert.isolation``: no fork of a threaded parent,
no re-import of the caller's ``__main__``); starting one costs about a second of imports, so a
worker is reused for :data:`MAX_TASKS_PER_WORKER` files, then replaced: bench/convert_isolation.py measures
the cost per file of in-process, reused-worker and worker-per-file conversion. A worker is retired early,
right after the file, when that file made it large (an idle worker kept ~420 MB after a
120 MB text while the parent indexed it): its peak memory passed half its limit, the file's bytes exceeded
:data:`RETIRE_INPUT_MB`, or the file raised the worker's peak resident size by more than
:data:`RETIRE_GROWTH_MB`. After every file the worker also hands its freed heap back to the OS
(:func:`ki.core.memory.release_memory`). The OCR lane still bounds OCR
process-wide: the caller holds a lane slot while a worker runs OCR.
"""

from __future__ import annotations

import importlib
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from ki.adapters.convert.model import StructuredDocument
from ki.core.errors import ClaimLost, InfrastructureError, UnsupportedDocument
from ki.core.memory import release_memory

RENEW_SECONDS = 10.0
STARTUP_SECONDS = 300.0  # a worker that has not imported the converters by then is an outage
MAX_TASKS_PER_WORKER = 200
#: Idle workers a pool keeps at least; it keeps one per CPU the process may run on when there are more
#: (a ``ki worker`` converts up to that many files at once, ``ki.workflows.cpu_slots``: each reused, none restarted).
MAX_IDLE_WORKERS = 4
#: A worker whose peak resident size passed this share of its budget is retired after the file; a
#: file that failed past it is classified ``too_large`` (its allocations failed), not by the failure.
OUT_OF_MEMORY_SHARE = 0.5
#: A worker is retired after a file larger than this (MiB): the next file starts in a fresh, small worker.
RETIRE_INPUT_MB = 32
#: A worker is retired after a file that raised its peak resident size by more than this (MiB).
RETIRE_GROWTH_MB = 256
#: Converter verdicts an allocation failure inside a C parser can masquerade as.
MEMORY_MASKING_REASONS = frozenset({"corrupt", "conversion_failed"})
#: Modules a worker imports before its first job (the converters; OCR's engine loads on first use).
PRELOAD = tuple(f"ki.adapters.convert.{name}" for name in (
    "router", "pdf", "docx", "mail", "msg", "html", "rtf", "text", "embedded", "xlsx", "pptx", "odf"))
_CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE, signal.SIGILL})
_BUILTIN_ERRORS = {cls.__name__: cls for cls in (ValueError, KeyError, IndexError, TypeError, LookupError, OSError,
                                                 RecursionError, UnicodeError, EOFError, ArithmeticError)}
Renew = Callable[[], object]


@dataclass(frozen=True)
class Budget:
    """The per-file budget: ``memory_mb`` (``RLIMIT_DATA`` of the worker, MiB) and ``seconds`` (wall clock)."""

    memory_mb: int
    seconds: float


# --------------------------------------------------------------------------- the worker side


def resolve(target: str) -> Callable[..., StructuredDocument]:
    """The converter function named by ``target`` (``"module:function"``), imported on first use.

    Raises: ImportError / AttributeError for a target that names nothing (a bug in the caller).
    """
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _peak_mb() -> float:
    """This worker's own peak resident size (MiB).

    ``VmHWM`` of ``/proc/self/status`` (the high-water mark of this process's own address space).
    Not ``ru_maxrss``: Linux keeps it across ``execve``, so a worker started by a large parent (a
    long-lived ``pytest``, ``ki serve`` or ``ki worker``) would report the parent's size as its own,
    be retired after every file and have every failure read as ``too_large``. ``ru_maxrss`` only
    where ``/proc`` is missing.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError):
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # ru_maxrss is KiB on Linux


def _serve(inbox: Connection, outbox: Connection, memory_bytes: int) -> None:
    """Worker loop: receive ``(target, data, filename, kwargs)``, answer one tagged tuple per job."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    while True:
        try:
            target, data, filename, kwargs = inbox.recv()
        except (EOFError, OSError):
            return
        try:
            doc = resolve(target)(data, filename, **kwargs)
            answer: tuple = ("ok", doc.model_dump(mode="json"))
        except UnsupportedDocument as exc:
            answer = ("unsupported", str(exc), exc.reason, exc.details)
        except MemoryError as exc:
            answer = ("memory", str(exc))
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller, classified there
            answer = ("error", type(exc).__name__, str(exc))
        del data
        try:
            outbox.send((*answer, _peak_mb()))
        except (OSError, ValueError):  # the caller gave up on this job (timeout, claim lost)
            return
        del answer
        release_memory()  # the file's freed heap back to the OS while the worker waits for the next one


# --------------------------------------------------------------------------- the caller side


class _Worker:
    """One ``python -m ki.adapters.convert.isolation`` process; jobs go in on its stdin, answers come out on a
    duplicate of its stdout (its own fd 1 is pointed at stderr, so nothing it prints can corrupt them)."""

    def __init__(self, budget: Budget):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ki.adapters.convert.isolation", str(budget.memory_mb << 20)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True,
        )
        self.inbox = Connection(os.dup(self.process.stdout.fileno()), writable=False)
        self.outbox = Connection(os.dup(self.process.stdin.fileno()), readable=False)
        self.process.stdout.close()
        self.process.stdin.close()
        self.tasks = 0
        self.last_peak: float | None = None
        #: The peak resident size (MiB) before its current file: after start-up, then after each file.
        self.base_peak: float | None = None

    def wait_ready(self, renew: Renew | None) -> None:
        """Wait until the worker has imported the converters (its start does not count against a file)."""
        deadline = time.monotonic() + STARTUP_SECONDS
        next_renew = time.monotonic() + RENEW_SECONDS
        while True:
            try:
                if self.inbox.poll(1.0):
                    self.inbox.recv()
                    self.base_peak = self.peak_mb()
                    return
            except (EOFError, OSError):
                raise InfrastructureError(f"a conversion worker did not start (exit code {self.process.poll()})",
                                          infrastructure="conversion worker did not start") from None
            now = time.monotonic()
            if now >= deadline:
                raise InfrastructureError(f"a conversion worker did not start within {STARTUP_SECONDS:g} s",
                                          infrastructure="conversion worker did not start")
            if renew is not None and now >= next_renew:
                if renew() is False:
                    raise ClaimLost("the claim was lost while a conversion worker started")
                next_renew = now + RENEW_SECONDS

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignored
            pass
        self.inbox.close()
        self.outbox.close()

    def peak_mb(self) -> float | None:
        """The worker's peak resident size so far (MiB, ``VmHWM``), remembered for after its death."""
        try:
            with open(f"/proc/{self.process.pid}/status", encoding="ascii") as fh:  # Linux
                for line in fh:
                    if line.startswith("VmHWM:"):
                        self.last_peak = round(int(line.split()[1]) / 1024, 1)
                        break
        except (OSError, ValueError):
            pass
        return self.last_peak



class WorkerPool:
    """Worker processes for :func:`run` under one :class:`Budget` (thread-safe; one per budget)."""

    def __init__(self, budget: Budget):
        self.budget = budget
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        #: The worker's peak resident size (MiB) after the latest file that came back (benchmarks).
        self.last_peak_mb: float | None = None
        #: Workers retired early (before :data:`MAX_TASKS_PER_WORKER`) because a file made them large.
        self.retired = 0
        #: Worker processes started (benchmarks: a start costs a fresh interpreter's imports).
        self.started = 0
        from ki.config.process import available_cores  # here, not at the top: a worker process imports this module

        self.max_idle = max(MAX_IDLE_WORKERS, available_cores())

    def _checkout(self, renew: Renew | None) -> _Worker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.alive():
                    return worker
                worker.kill()
            self.started += 1
        worker = _Worker(self.budget)
        try:
            worker.wait_ready(renew)
        except BaseException:
            worker.kill()
            raise
        return worker

    def _checkin(self, worker: _Worker, peak_mb: float, input_bytes: int) -> None:
        worker.tasks += 1
        grew = peak_mb - (worker.base_peak if worker.base_peak is not None else peak_mb)
        worker.base_peak = peak_mb
        large = (peak_mb > self.budget.memory_mb * OUT_OF_MEMORY_SHARE or input_bytes > RETIRE_INPUT_MB << 20
                 or grew > RETIRE_GROWTH_MB)
        if large or worker.tasks >= MAX_TASKS_PER_WORKER:
            self.retired += large
            worker.kill()
            return
        with self._lock:
            if len(self._idle) < self.max_idle:
                self._idle.append(worker)
                return
        worker.kill()

    def close(self) -> None:
        """Stop every idle worker (tests; workers in use finish their file first)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()

    def run(self, target: str, data: bytes, filename: str, *, renew: Renew | None = None,
            **kwargs: Any) -> StructuredDocument:
        """Run ``target`` (``"module:function"``, called as ``f(data, filename, **kwargs)``) in a worker.

        Returns: the converter's :class:`StructuredDocument`.
        Raises:
            UnsupportedDocument: what the converter raised; ``too_large`` when the file exceeded the
                memory or the wall-clock budget (``details``: ``limit_mb``/``peak_mb`` or
                ``limit_seconds``); ``corrupt`` when the converter crashed on it (a crash signal).
            ClaimLost: ``renew()`` returned False while waiting (the worker is killed).
            InfrastructureError: the worker died for no reason of the file's.
            Other exceptions the converter raised, as built-in types (else RuntimeError).
        """
        worker = self._checkout(renew)
        started = time.monotonic()
        try:
            worker.outbox.send((target, data, filename, kwargs))
            answer = self._wait(worker, filename, started, renew)
        except BaseException:
            worker.kill()
            raise
        *payload, peak = answer
        self.last_peak_mb = peak
        self._checkin(worker, peak, len(data))
        return self._result(payload, peak, filename)

    def _wait(self, worker: _Worker, filename: str, started: float, renew: Renew | None) -> tuple:
        next_renew = started + RENEW_SECONDS
        deadline = started + self.budget.seconds
        while True:
            now = time.monotonic()
            if now >= deadline:
                raise UnsupportedDocument(
                    f"{filename}: conversion took longer than the budget of {self.budget.seconds:g} s",
                    reason="too_large",
                    details={"limit_seconds": self.budget.seconds, "elapsed_seconds": round(now - started, 1),
                             "peak_mb": worker.peak_mb()},
                )
            if renew is not None and now >= next_renew:
                if renew() is False:
                    raise ClaimLost("the claim was lost while the file was being converted")
                next_renew = now + RENEW_SECONDS
            try:
                if worker.inbox.poll(min(1.0, deadline - now, max(0.01, next_renew - now))):
                    return worker.inbox.recv()
            except (EOFError, OSError):
                raise self._died(worker, filename) from None
            worker.peak_mb()  # sampled while alive: a worker that dies takes its figures with it

    def _died(self, worker: _Worker, filename: str) -> Exception:
        try:
            code = worker.process.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        peak, limit = worker.last_peak, self.budget.memory_mb
        near_limit = peak is not None and peak >= 0.8 * limit
        if code is not None and code < 0:
            sig = signal.Signals(-code)
            if near_limit or (sig == signal.SIGABRT and peak is not None and peak >= 0.5 * limit):
                return UnsupportedDocument(
                    f"{filename}: the converter ran out of its memory budget of {limit} MB ({sig.name})",
                    reason="too_large", details={"limit_mb": limit, "peak_mb": peak, "signal": sig.name})
            if sig in _CRASH_SIGNALS:
                return UnsupportedDocument(f"{filename}: the converter crashed on this file ({sig.name})",
                                           reason="corrupt", details={"signal": sig.name, "peak_mb": peak})
        return InfrastructureError(f"the conversion worker for {filename} ended unexpectedly (exit code {code})",
                                   infrastructure="conversion worker died")

    def _result(self, payload: list, peak: float, filename: str) -> StructuredDocument:
        kind = payload[0]
        if kind == "ok":
            return StructuredDocument.model_validate(payload[1])
        limit = self.budget.memory_mb
        if (kind == "error" or (kind == "unsupported" and payload[2] in MEMORY_MASKING_REASONS)) \
                and peak > limit * OUT_OF_MEMORY_SHARE:
            # A worker starts a file below half its budget (else it is retired): a failure after this
            # file pushed it past that is its allocations failing (libxml2 reports "unknown error",
            # a parser's MemoryError caught as damage), not the file's damage.
            failure = payload[2] if kind == "unsupported" else payload[1]
            raise UnsupportedDocument(
                f"{filename}: conversion failed near its memory budget of {limit} MB ({payload[1]})",
                reason="too_large", details={"limit_mb": limit, "peak_mb": peak, "converter_failure": failure})
        if kind == "unsupported":
            raise UnsupportedDocument(payload[1], reason=payload[2], details=payload[3])
        if kind == "memory":
            raise UnsupportedDocument(f"{filename}: conversion needed more than its memory budget of {limit} MB",
                                      reason="too_large", details={"limit_mb": limit, "peak_mb": peak})
        name, message = payload[1], payload[2]
        cls = _BUILTIN_ERRORS.get(name)
        raise cls(message) if cls else RuntimeError(f"{name}: {message}")


_POOLS: dict[Budget, WorkerPool] = {}
_POOLS_LOCK = threading.Lock()


def pool(budget: Budget) -> WorkerPool:
    """The process-wide :class:`WorkerPool` for ``budget``."""
    with _POOLS_LOCK:
        found = _POOLS.get(budget)
        if found is None:
            found = _POOLS[budget] = WorkerPool(budget)
        return found


def reset_pools() -> None:
    """Stop every pool's idle workers and forget the pools (tests)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for p in pools:
        p.close()


def main() -> None:
    """Entry of a worker process: ``python -m ki.adapters.convert.isolation <RLIMIT_DATA bytes>``."""
    protocol_out = os.dup(1)
    os.dup2(2, 1)  # anything a library prints goes to stderr, never into the answers
    for module in PRELOAD:
        importlib.import_module(module)
    outbox = Connection(protocol_out, readable=False)
    outbox.send(("ready", os.getpid()))
    _serve(Connection(os.dup(0), writable=False), outbox, int(sys.argv[1]))


if __name__ == "__main__":
    main()
