"""Answers computed once and shared by every concurrent reader: single flight, a short life, exact invalidation.

Spec: insertion-pipeline.md "The console page" (``GET /api/status`` polled every 5 s by every open page, runs listed
beside it); prior-art.md §8 (a dashboard must not overload the database). Under 32 concurrent clients during an
insert (``bench/api_concurrent.py``) each status read ran seven statements and each search its whole path, all
competing for the same two cores; most of those computations produced the answer the previous one had just given.

:class:`SharedAnswers` keeps one answer per key. A read within ``ttl`` seconds of the moment its computation started
gets it as it is; a read after that computes it again — once: reads of the same key arriving meanwhile wait for
that one computation and share its answer (single flight), and an error reaches every one of them (nothing is
stored). So an answer is at most ``ttl`` seconds old plus the time it took to compute, and ``Answer.at`` says when
it was taken. Whatever must never be served stale belongs in the key (the search index's generation, the caller's
access set): a new key is a new computation. :meth:`SharedAnswers.invalidate` forgets everything at once (after a
change this server made: the next read computes; a computation already running when it was called stores
nothing). At most ``max_entries`` keys are kept, the least recently computed dropped first.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

from starlette.concurrency import run_in_threadpool

T = TypeVar("T")


@dataclass(frozen=True)
class Answer(Generic[T]):
    """A shared answer: ``value``, when its computation started (``at``, UTC; ``started``, the monotonic clock)."""

    value: T
    at: datetime
    started: float


class _Flight(Generic[T]):
    """One computation in progress: the readers of its key wait on :attr:`done`."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.answer: Answer[T] | None = None
        self.error: BaseException | None = None
        self.followers = 0


class SharedAnswers(Generic[T]):
    """See the module doc. Thread-safe.

    Args:
        ttl: seconds an answer is served after its computation started (> 0).
        max_entries: keys kept at most (>= 1).
        clock: the monotonic clock (injectable for tests).
    """

    def __init__(self, ttl: float, *, max_entries: int = 256, clock: Callable[[], float] = time.monotonic):
        if ttl <= 0 or max_entries < 1:
            raise ValueError("ttl must be > 0 and max_entries >= 1")
        self.ttl = ttl
        self.max_entries = max_entries
        self.clock = clock
        self._lock = threading.Lock()
        self._answers: OrderedDict[Hashable, Answer[T]] = OrderedDict()
        self._flights: dict[Hashable, _Flight[T]] = {}
        self._epoch = 0
        self.computed = 0  # computations run (for tests and the bench's report)

    def fresh(self, key: Hashable) -> Answer[T] | None:
        """The stored answer of ``key`` while fresh, else None; never waits and never computes (an async route's
        fast path: only a miss needs a worker thread for :meth:`get`)."""
        with self._lock:
            answer = self._answers.get(key)
            if answer is not None and self.clock() - answer.started <= self.ttl:
                return answer
        return None

    def get(self, key: Hashable, compute: Callable[[], T]) -> Answer[T]:
        """The answer of ``key``: the stored one while fresh, else the one computation of it in flight (joined),
        else a new one run by this caller. Raises whatever ``compute`` raised (to every reader waiting on it)."""
        with self._lock:
            now = self.clock()
            answer = self._answers.get(key)
            if answer is not None and now - answer.started <= self.ttl:
                return answer
            flight = self._flights.get(key)
            leader = flight is None
            if leader:
                flight = self._flights[key] = _Flight()
            else:
                flight.followers += 1
            epoch = self._epoch
        if not leader:
            flight.done.wait()
            if flight.error is not None:
                raise flight.error
            assert flight.answer is not None
            return flight.answer
        try:
            started, at = self.clock(), datetime.now(UTC)
            flight.answer = Answer(compute(), at, started)
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            with self._lock:
                if self._flights.get(key) is flight:
                    del self._flights[key]
                self.computed += flight.answer is not None
                if flight.answer is not None and epoch == self._epoch:
                    self._answers[key] = flight.answer
                    self._answers.move_to_end(key)
                    while len(self._answers) > self.max_entries:
                        self._answers.popitem(last=False)
            flight.done.set()
        return flight.answer

    def waiting(self, key: Hashable) -> int:
        """Readers waiting for the computation of ``key`` in flight (beside the one running it)."""
        with self._lock:
            flight = self._flights.get(key)
            return flight.followers if flight is not None else 0

    async def get_async(self, key: Hashable, compute: Callable[[], T]) -> Answer[T]:
        """:meth:`fresh` at once on the event loop, else :meth:`get` in a worker thread (an async route: a fresh
        answer costs no thread hop). Raises what :meth:`get` raises."""
        return self.fresh(key) or await run_in_threadpool(self.get, key, compute)

    def invalidate(self) -> None:
        """Forget every answer; reads from now on compute afresh (a computation in flight stores nothing)."""
        with self._lock:
            self._epoch += 1
            self._answers.clear()
            self._flights.clear()


class FreshReads(Generic[T]):
    """One read shared by the callers that arrive while it waits to start: never older than the call.

    A caller gets the result of a read that began after it called — its own, or one that another caller started
    after it arrived: while a read runs, the callers arriving meanwhile wait for it to end, and then one of them
    runs the next read for all of them. So what a caller sees is as current as a read of its own would be (a
    change committed before the call is in it), and concurrent callers cost one read per round instead of one
    each. Reads run one at a time. An error reaches every caller waiting on that read. Thread-safe.

    Args:
        read: the read (no arguments).
    """

    def __init__(self, read: Callable[[], T]) -> None:
        self.read = read
        self._cond = threading.Condition()
        self._started = 0  # reads started
        self._finished = 0  # number of the last read finished
        self._running = False
        self._value: T | None = None
        self._error: BaseException | None = None
        self.reads = 0  # reads run (tests, the bench)
        self._waiting = 0

    def get(self) -> T:
        """The result of a read begun after this call (see the class doc). Raises what that read raised."""
        with self._cond:
            need = self._started + 1  # the first read to start from now on
            while self._finished < need:
                if not self._running:
                    self._running = True
                    self._started += 1
                    number = self._started
                    break
                self._waiting += 1
                self._cond.wait()
                self._waiting -= 1
            else:
                if self._error is not None:
                    raise self._error
                return self._value  # type: ignore[return-value]
        value: T | None = None
        error: BaseException | None = None
        try:
            value = self.read()
        except BaseException as exc:
            error = exc
        with self._cond:
            self._running = False
            self._finished, self._value, self._error = number, value, error
            self.reads += 1
            self._cond.notify_all()
        if error is not None:
            raise error
        return value  # type: ignore[return-value]

    def waiting(self) -> int:
        """Callers waiting for a read to end (tests)."""
        with self._cond:
            return self._waiting
