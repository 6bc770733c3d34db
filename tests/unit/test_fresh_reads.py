"""ki.api.shared_answers.FreshReads: a caller gets a read begun after it called; callers arriving together share one.

Real threads, no sleeps: the first read blocks on an event until the test has seen the later callers waiting.
"""

from __future__ import annotations

import threading

import pytest

from ki.api.shared_answers import FreshReads
from tests.helpers.outage import wait_until


def test_a_caller_never_gets_a_read_begun_before_it_called():
    release, calls = threading.Event(), []

    def read() -> int:
        calls.append(1)
        if len(calls) == 1:
            release.wait(30)
        return len(calls)  # the read's number

    reads: FreshReads[int] = FreshReads(read)
    got: dict[str, int] = {}
    first = threading.Thread(target=lambda: got.__setitem__("first", reads.get()))
    first.start()
    assert wait_until(lambda: len(calls) == 1, 10)
    later = [threading.Thread(target=lambda n=n: got.__setitem__(n, reads.get())) for n in ("b", "c", "d")]
    for t in later:
        t.start()
    assert wait_until(lambda: reads.waiting() == 3, 10)
    release.set()
    for t in (first, *later):
        t.join(10)
    # the read in flight when b, c and d called is not theirs: they share the next one
    assert got == {"first": 1, "b": 2, "c": 2, "d": 2}
    assert reads.reads == 2
    assert reads.get() == 3  # nothing in flight: a caller reads afresh, never the last result


def test_an_error_reaches_the_callers_of_that_read_only():
    outcomes = iter([ValueError("the database is gone"), 7])

    def read() -> int:
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    reads: FreshReads[int] = FreshReads(read)
    with pytest.raises(ValueError, match="gone"):
        reads.get()
    assert reads.get() == 7
