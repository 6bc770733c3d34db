"""Issue 14 item 7d: each conversion runs in a worker process under a memory and a wall-clock budget.

Real worker processes (``python -m ki.adapters.convert.isolation``) run real converters and the misbehaving
ones of ``tests/helpers/hostile.py``; nothing is mocked. About 10 s (worker starts dominate).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ki.adapters.convert import isolation
from ki.adapters.convert.router import convert_bytes
from ki.config.settings import KiConfig
from ki.core.errors import ClaimLost, UnsupportedDocument

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def workers(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", f"{REPO}:{__import__('os').environ.get('PYTHONPATH', '')}")
    isolation.reset_pools()
    made = []

    def make(memory_mb: int = 512, seconds: float = 30) -> isolation.WorkerPool:
        pool = isolation.WorkerPool(isolation.Budget(memory_mb, seconds))
        made.append(pool)
        return pool

    yield make
    for pool in made:
        pool.close()
    isolation.reset_pools()


def test_a_worker_is_reused_and_returns_the_document(workers) -> None:
    pool = workers()
    first = pool.run("tests.helpers.hostile:echo", b"one", "a.txt")
    second = pool.run("tests.helpers.hostile:echo", b"two", "b.txt")
    assert (first.text, second.text) == ("one", "two")
    assert first.metadata["pid"] == second.metadata["pid"]


def test_a_large_parent_does_not_count_as_the_workers_memory(workers) -> None:
    """Linux keeps ``ru_maxrss`` across exec: a worker of a 400 MB parent must still measure only itself."""
    ballast = bytearray(400 * 1024 * 1024)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touch every page: resident in this process
    pool = workers(memory_mb=512)
    first = pool.run("tests.helpers.hostile:echo", b"one", "a.txt")
    with pytest.raises(UnsupportedDocument) as info:
        pool.run("tests.helpers.hostile:allocate_then_fail", b"", "broken.docx", megabytes=5)
    second = pool.run("tests.helpers.hostile:echo", b"two", "b.txt")
    assert pool.last_peak_mb < 256, pool.last_peak_mb
    assert info.value.reason == "corrupt", info.value.details
    assert first.metadata["pid"] == second.metadata["pid"]
    del ballast


def test_memory_over_the_budget_is_too_large_with_the_figure(workers) -> None:
    pool = workers(memory_mb=300)
    with pytest.raises(UnsupportedDocument) as info:
        pool.run("tests.helpers.hostile:allocate", b"", "bomb.bin", megabytes=600)
    assert info.value.reason == "too_large" and info.value.details["limit_mb"] == 300
    assert "300 MB" in str(info.value)
    assert pool.run("tests.helpers.hostile:allocate", b"", "ok.bin", megabytes=50).text == "allocated 50 MiB"


def test_a_failure_near_the_memory_budget_is_too_large_not_the_failure(workers) -> None:
    """A C parser whose allocation fails reports damage ("unknown error"): past half the budget it is the budget."""
    pool = workers(memory_mb=300)
    with pytest.raises(UnsupportedDocument) as info:
        pool.run("tests.helpers.hostile:allocate_then_fail", b"", "bomb.docx", megabytes=200)
    assert info.value.reason == "too_large" and info.value.details["converter_failure"] == "corrupt"
    assert info.value.details["limit_mb"] == 300 and info.value.details["peak_mb"] > 150
    with pytest.raises(UnsupportedDocument) as info:  # a fresh worker: damage found early stays damage
        pool.run("tests.helpers.hostile:allocate_then_fail", b"", "broken.docx", megabytes=5)
    assert info.value.reason == "corrupt"


def test_wall_clock_over_the_budget_is_too_large_and_the_worker_is_killed(workers) -> None:
    pool = workers(seconds=1.0)
    with pytest.raises(UnsupportedDocument) as info:
        pool.run("tests.helpers.hostile:sleep", b"", "slow.bin", seconds=30)
    assert info.value.reason == "too_large" and info.value.details["limit_seconds"] == 1.0
    assert 1.0 <= info.value.details["elapsed_seconds"] < 5
    assert pool.run("tests.helpers.hostile:echo", b"next file", "n.txt").text == "next file"  # a new worker


def test_a_crash_is_corrupt_and_a_lost_claim_stops_the_worker(workers, monkeypatch) -> None:
    pool = workers()
    with pytest.raises(UnsupportedDocument) as info:
        pool.run("tests.helpers.hostile:crash", b"", "crash.pdf")
    assert info.value.reason == "corrupt" and info.value.details["signal"] == "SIGSEGV"
    monkeypatch.setattr(isolation, "RENEW_SECONDS", 0.2)
    with pytest.raises(ClaimLost):
        pool.run("tests.helpers.hostile:sleep", b"", "long.bin", renew=lambda: False, seconds=20)


def test_converter_errors_cross_the_process_boundary_as_they_were() -> None:
    config = KiConfig()
    with pytest.raises(UnsupportedDocument) as info:
        convert_bytes(b"%PDF-1.4 not really", "x.pdf", config)
    assert info.value.reason == "corrupt" and info.value.details["err_code"] is not None
    assert convert_bytes(b"Mietvertrag vom 3. Mai", "m.txt", config).text == "Mietvertrag vom 3. Mai"


def test_the_router_applies_the_configured_budget(monkeypatch) -> None:
    isolation.reset_pools()
    config = KiConfig.model_validate({"pipeline": {"convert": {"timeout_seconds": 0.02}}})
    # ~13 MB of cp1252 text: 0.1-0.3 s in process on a fast core (5x the budget or more; a budget of 0.2 s was
    # not always exceeded on a quiet machine of session 8)
    big = ("Zeile mit Text und Umlauten äöü\n" * 400_000).encode("cp1252")
    with pytest.raises(UnsupportedDocument) as info:
        convert_bytes(big, "huge.txt", config)
    assert info.value.reason == "too_large" and info.value.details["limit_seconds"] == 0.02
    direct = KiConfig.model_validate({"pipeline": {"convert": {"isolate": False}}})
    assert convert_bytes(b"in process", "p.txt", direct).text == "in process"
    isolation.reset_pools()


def test_a_worker_a_file_made_large_is_retired_right_after_it(workers) -> None:
    """Issue 14 item 7e: an idle worker kept ~420 MB after a 120 MB text. A file that raised the worker's peak by
    more than RETIRE_GROWTH_MB, or whose bytes exceed RETIRE_INPUT_MB, retires it; small files keep reusing it."""
    pool = workers(memory_mb=2048)  # half the budget (the older rule) is far above what these files use
    first = pool.run("tests.helpers.hostile:echo", b"one", "a.txt")
    assert pool.run("tests.helpers.hostile:echo", b"two", "b.txt").metadata["pid"] == first.metadata["pid"]
    assert pool.retired == 0
    pool.run("tests.helpers.hostile:allocate", b"", "big.bin", megabytes=isolation.RETIRE_GROWTH_MB + 64)
    assert pool.retired == 1
    fresh = pool.run("tests.helpers.hostile:echo", b"three", "c.txt")
    assert fresh.metadata["pid"] != first.metadata["pid"]
    huge = b"x" * ((isolation.RETIRE_INPUT_MB << 20) + 1)
    assert pool.run("tests.helpers.hostile:echo", huge, "huge.txt").metadata["pid"] == fresh.metadata["pid"]
    assert pool.retired == 2
    after = pool.run("tests.helpers.hostile:echo", b"four", "d.txt")
    assert after.metadata["pid"] != fresh.metadata["pid"]
    assert pool.run("tests.helpers.hostile:echo", b"five", "e.txt").metadata["pid"] == after.metadata["pid"]
    assert pool.retired == 2
