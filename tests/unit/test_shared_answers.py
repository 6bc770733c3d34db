"""ki.api.shared_answers: one computation per key for every concurrent reader, a bounded life, exact invalidation.

Real threads; the clock is injected (no sleeps): readers block on an event the computation holds until the test
has seen every reader waiting.
"""

from __future__ import annotations

import threading

import pytest

from ki.api.shared_answers import SharedAnswers
from tests.helpers.outage import wait_until


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _readers(answers: SharedAnswers, key, compute, n: int) -> tuple[list, list[threading.Thread]]:
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(answers.get(key, compute).value)) for _ in range(n)]
    for t in threads:
        t.start()
    return got, threads


def test_concurrent_readers_share_one_computation():
    answers: SharedAnswers[int] = SharedAnswers(5.0, clock=Clock())
    release, calls = threading.Event(), []

    def compute() -> int:
        calls.append(1)
        release.wait(30)
        return 42

    got, threads = _readers(answers, "k", compute, 16)
    assert wait_until(lambda: answers.waiting("k") == 15, 30, step=0.01), "the followers never joined the leader"
    release.set()
    for t in threads:
        t.join(30)
    assert got == [42] * 16 and len(calls) == 1 and answers.computed == 1


def test_an_answer_lives_ttl_seconds_then_is_computed_again():
    clock = Clock()
    answers: SharedAnswers[int] = SharedAnswers(1.0, clock=clock)
    n = iter(range(100))
    first = answers.get("k", lambda: next(n))
    clock.now += 1.0
    assert answers.get("k", lambda: next(n)) is first and answers.fresh("k") is first
    clock.now += 0.001
    assert answers.fresh("k") is None
    assert answers.get("k", lambda: next(n)).value == 1
    assert answers.get("other", lambda: next(n)).value == 2  # keys are apart
    assert answers.computed == 3


def test_invalidate_forgets_and_a_computation_in_flight_stores_nothing():
    answers: SharedAnswers[str] = SharedAnswers(60.0, clock=Clock())
    assert answers.get("k", lambda: "old").value == "old"
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(30)
        return "read before the change"

    answers.invalidate()
    got, threads = _readers(answers, "k", slow, 1)
    assert started.wait(30)
    answers.invalidate()  # the change lands while that read is still computing
    assert answers.get("k", lambda: "read after the change").value == "read after the change"
    release.set()
    threads[0].join(30)
    assert got == ["read before the change"]  # its own reader gets it ...
    assert answers.get("k", lambda: "never").value == "read after the change"  # ... nobody later does


def test_an_error_reaches_every_waiting_reader_and_is_not_kept():
    answers: SharedAnswers[int] = SharedAnswers(60.0, clock=Clock())
    release = threading.Event()

    def failing() -> int:
        release.wait(30)
        raise RuntimeError("database down")

    errors: list[str] = []

    def read() -> None:
        try:
            answers.get("k", failing)
        except RuntimeError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=read) for _ in range(5)]
    for t in threads:
        t.start()
    assert wait_until(lambda: answers.waiting("k") == 4, 30, step=0.01)
    release.set()
    for t in threads:
        t.join(30)
    assert errors == ["database down"] * 5
    assert answers.get("k", lambda: 7).value == 7  # the failure was not stored


def test_at_most_max_entries_are_kept_the_oldest_computed_dropped_first():
    answers: SharedAnswers[int] = SharedAnswers(60.0, max_entries=3, clock=Clock())
    for k in range(5):
        answers.get(k, lambda k=k: k)
    assert [answers.fresh(k) is not None for k in range(5)] == [False, False, True, True, True]


def test_bad_settings_are_refused():
    with pytest.raises(ValueError):
        SharedAnswers(0)
    with pytest.raises(ValueError):
        SharedAnswers(1, max_entries=0)
