"""The lifecycle deadline: a handler that runs past ``pipeline.stages.<stage>.timeout_seconds`` is
abandoned, its row fails with ``StageTimeout`` (claimable again, the late result refused by the fencing
token) and the run goes idle; whose fault the timeout is decides whether it ever quarantines.

Spec: work-queue.md "Lifecycle deadline" and "Poison messages"; docs/design-decisions.md
"Whose fault is a fault that only one file meets". The deadlines here are 1 s (the smallest setting).
"""

from __future__ import annotations

import threading
import time

import pytest

from ki.adapters.observability.metrics import STAGE_EXECUTIONS, counter_value
from ki.orchestration.runner import PipelineRunner
from ki.stages import STAGE_HANDLERS
from tests.helpers.state import configure, make_source, rows, run_when_due, sql

RUN_LIMIT_SECONDS = 60.0


class Hang:
    """A fetch handler that blocks the objects in ``hung`` until :meth:`release` (at most 60 s), and runs
    the real fetch for every other object. ``returned`` counts hung calls that came back."""

    def __init__(self, hung: set[int]):
        self.hung = hung
        self.gate = threading.Event()
        self.entered = 0
        self.returned = 0
        self.real = STAGE_HANDLERS["fetch"]

    def __call__(self, sctx):
        if sctx.claim.source_object_id not in self.hung:
            return self.real(sctx)
        self.entered += 1
        try:
            self.gate.wait(RUN_LIMIT_SECONDS)
            return self.real(sctx)
        finally:
            self.returned += 1

    def release(self) -> None:
        """Let every hung call return, and wait (≤ 10 s) until they have."""
        self.gate.set()
        deadline = time.monotonic() + 10
        while self.returned < self.entered and time.monotonic() < deadline:
            time.sleep(0.02)


def _run(ctx, **kwargs) -> tuple[PipelineRunner, float]:
    """Run until idle on a thread; fail unless it ends within RUN_LIMIT_SECONDS. Returns (runner, seconds)."""
    runner = PipelineRunner(ctx, workers=2, **kwargs)
    box: dict = {}
    started = time.monotonic()
    thread = threading.Thread(target=lambda: box.setdefault("counters", runner.run_until_idle()), daemon=True)
    thread.start()
    thread.join(RUN_LIMIT_SECONDS)
    assert not thread.is_alive(), "the run never went idle"
    assert "counters" in box
    return runner, time.monotonic() - started


@pytest.fixture
def hang(monkeypatch):
    made: list[Hang] = []

    def make(hung: set[int]) -> Hang:
        h = Hang(hung)
        monkeypatch.setitem(STAGE_HANDLERS, "fetch", h)
        made.append(h)
        return h

    yield make
    for h in made:
        h.release()


def test_a_handler_past_its_deadline_is_abandoned_and_the_run_goes_idle(ctx, src, hang):
    oids = make_source(ctx, src, 3)
    configure(ctx, stages__fetch__timeout_seconds=1, retry_base_seconds=30)
    stuck = hang({oids[0]})
    timeouts = counter_value(STAGE_EXECUTIONS, "fetch", "timeout")
    runner, seconds = _run(ctx)
    assert counter_value(STAGE_EXECUTIONS, "fetch", "timeout") == timeouts + 1  # ki_stage_executions_total
    r = rows(ctx, oids[0])["fetch"]
    assert r["status"] == "failed" and r["claim_token"] is None and r["next_retry_at"] is not None
    assert r["last_error"]["class"] == "StageTimeout"
    assert "ran past its deadline of 1 s" in r["last_error"]["message"]
    assert "the handler was abandoned here" in r["last_error"]["traceback"]
    assert "gate.wait" in r["last_error"]["traceback"]  # where it hung
    assert r["last_error"]["details"]["timeout_seconds"] == 1.0
    assert runner.counters.retried == 1
    for oid in oids[1:]:  # the others finished on the replacement worker
        assert {x["status"] for x in rows(ctx, oid).values()} <= {"done", "skipped"}
    assert seconds < 20
    # the hung handler comes back late: its result is refused, the row keeps the timeout
    stuck.release()
    assert (stuck.entered, stuck.returned) == (1, 1)
    assert rows(ctx, oids[0])["fetch"]["status"] == "failed"
    assert rows(ctx, oids[0])["fetch"]["last_error"]["class"] == "StageTimeout"
    # claimable again: the next attempt (a fast one) completes it
    sql(ctx, "UPDATE processing_state SET next_retry_at = now() WHERE id = :id", id=r["id"])
    assert run_when_due(ctx, "fetch", oids[0]).kind == "done"


def test_a_file_that_times_out_while_others_pass_is_quarantined_timeout(ctx, src, hang):
    oids = make_source(ctx, src, 4)
    configure(ctx, stages__fetch__timeout_seconds=1, stages__fetch__max_attempts=2, retry_base_seconds=0.05)
    hang({oids[0]})
    _run(ctx, wait_for_retries_seconds=30)
    r = rows(ctx, oids[0])["fetch"]
    assert r["status"] == "quarantined"
    assert r["last_error"]["reason"] == "timeout"
    details = r["last_error"]["details"]
    assert details["timeout_seconds"] == 1.0 and details["others_succeeded"] >= 1
    assert details["stages"] == ["fetch"]
    assert r["attempts"] - r["last_error"]["infrastructure_attempts"] == 2
    for oid in oids[1:]:
        assert rows(ctx, oid)["fetch"]["status"] == "done"


def test_a_stage_that_times_out_for_every_file_never_quarantines(ctx, src, hang):
    oids = make_source(ctx, src, 2)
    configure(ctx, stages__fetch__timeout_seconds=1, stages__fetch__max_attempts=1, retry_base_seconds=0.05)
    hang(set(oids))
    _run(ctx, wait_for_retries_seconds=3)  # both time out again and again, nobody passes
    for oid in oids:
        r = rows(ctx, oid)["fetch"]
        assert r["status"] == "failed", r["last_error"]
        assert r["last_error"]["class"] == "StageTimeout"
        assert r["last_error"]["reason"] is None  # the stage's fault, not the file's
        assert r["last_error"]["infrastructure"] == "fetch timed out after 1 s"
        assert r["attempts"] == r["last_error"]["infrastructure_attempts"] >= 2  # none held against the file
