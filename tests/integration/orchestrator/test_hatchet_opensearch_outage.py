"""The real OpenSearch node stops mid-run of an insertion on the Hatchet provider and comes back.

A real engine (the session's hatchet-lite) and a real ``ki worker`` subprocess (6 slots) index 30 notes into
this test's own index on the session's OpenSearch node (``components.opensearch_url``; model stages off; the
index handler slowed by 1 s so the run is still indexing when the node goes). Once 6 index rows are done the
node is stopped (SIGTERM: its JVM ends, the port refuses connections), kept down for at least 8 s after the
pause is recorded, then started again on the same port and the same data. With the breaker's defaults the
worker's index tasks wait in ``drive_stage`` while OpenSearch is paused (``ClaimGate.admit``):

* the pause is recorded and says the node's port refuses TCP connections;
* no attempt is spent while paused: the index rows' attempts do not move from 2 s after the pause was
  recorded until the node is started again;
* no Hatchet task spends a retry: every task of every document's DAG ends at retry count 0 (the row-level
  policy waits out the outage inside the task, Hatchet's retries stay for transport faults);
* nothing is quarantined; indexing resumes within 20 s of the node answering again (a TCP connect every
  2 s while the port refuses; HTTP probes back off 1 s → 10 s while the starting node answers 503); the
  run completes, every index row is committed exactly once, the index holds exactly the record's chunks,
  and the pause is gone.

Cost: about 60-120 s, most of it the node's restart (a JVM start) and the engine's start when it is the
session's first Hatchet test.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from ki.app.launch import launch_insertion
from ki.store.pauses import read_pauses
from tests.helpers.hatchet_harness import configure, engine_run, indexed_and_recorded, opensearch_index, q, scan
from tests.helpers.outage import gateway_refusing, note_estate, wait_until

pytestmark = [pytest.mark.hatchet, pytest.mark.opensearch, pytest.mark.timeout(600)]

DOCUMENTS, SLOTS, STOP_AFTER, HELD_SECONDS, FAILURES = 30, 6, 6, 8.0, 3


def _index_rows(ctx) -> list:
    return q(ctx, "SELECT status, attempts, completions, updated_at FROM processing_state WHERE stage = 'index'")


def _done(ctx) -> int:
    return sum(r.status == "done" for r in _index_rows(ctx))


def test_an_opensearch_outage_pauses_the_hatchet_index_tasks_and_the_run_completes(
        hx, make_ctx, data_dir, tmp_path, monkeypatch, opensearch_node):
    for name in ("KI_BREAKER_PROBE_SECONDS", "KI_BREAKER_PROBE_MAX_SECONDS", "KI_BREAKER_CONNECT_PROBE_SECONDS"):
        monkeypatch.delenv(name, raising=False)  # the defaults: 1 s → 10 s, TCP checks every 2 s
    monkeypatch.setenv("KI_BREAKER_FAILURES", str(FAILURES))  # the worker inherits the environment
    monkeypatch.setenv("KI_OPENSEARCH_REFRESH_INTERVAL", "100ms")
    root = note_estate(tmp_path / "share", DOCUMENTS, folders=3, folder="Akte {f}", name="Notiz {i:03d}.txt",
                       text="Notiz {i}: Rückruf des Mandanten wegen Rechnung 7{i:03d}; Frist bis Monatsende.")
    ctx = make_ctx()
    configure(data_dir, "hatchet", retry_base_seconds=0.2)
    backend = opensearch_index(ctx, opensearch_node.url)
    hx.start_worker(slots=SLOTS, env={"KI_TEST_SLOW": "index:1.0"})
    scan(ctx, root)
    run_id = launch_insertion(ctx, trigger="test").run_id
    shown: list = []
    try:
        assert wait_until(lambda: _done(ctx) >= STOP_AFTER, 240, step=0.1), hx.diagnostics(ctx)
        assert _done(ctx) < DOCUMENTS, "the run indexed everything before the node stopped"
        opensearch_node.stop()
        stopped_at = time.monotonic()
        assert wait_until(gateway_refusing(ctx, shown, "opensearch"), 60, step=0.1), (shown, hx.diagnostics(ctx))
        paused_at = time.monotonic()
        assert _done(ctx) < DOCUMENTS, "no index row left to pause"
        time.sleep(2.0)  # the index requests in flight when the node stopped have failed by now
        attempts_paused = sum(r.attempts for r in _index_rows(ctx))
        wait_until(lambda: False, HELD_SECONDS - (time.monotonic() - paused_at), step=0.2)
        attempts_before_up = sum(r.attempts for r in _index_rows(ctx))
        quarantined_during = q(ctx, "SELECT count(*) FROM processing_state WHERE status = 'quarantined'")[0][0]
        done_while_down = _done(ctx)
    finally:
        opensearch_node.ready_timeout = max(opensearch_node.ready_timeout, 240.0)
        opensearch_node.restart(same_port=True)  # the session's node comes back where every test expects it
    answering_at = time.monotonic()
    resumed = wait_until(lambda: _done(ctx) > done_while_down, 60, step=0.1)
    resume_seconds = time.monotonic() - answering_at
    hx.wait_run(ctx, run_id, timeout=300)

    assert resumed and resume_seconds <= 20.0, (resume_seconds, hx.diagnostics(ctx))
    assert attempts_before_up == attempts_paused  # paused rows were not claimed: no attempt spent
    assert quarantined_during == 0
    assert paused_at - stopped_at < 60
    rows = _index_rows(ctx)
    assert len(rows) == DOCUMENTS and {r.status for r in rows} == {"done"}, Counter(r.status for r in rows)
    assert all(r.completions == 1 for r in rows), rows
    # the failed attempts: the requests in flight when the node stopped (one per slot at most), the faults
    # that opened the breaker, and the HTTP probes the starting node answered 503
    assert sum(r.attempts for r in rows) - len(rows) <= FAILURES + SLOTS + 6, Counter(r.attempts for r in rows)
    all_rows = q(ctx, "SELECT stage, status, completions FROM processing_state")
    assert {r.status for r in all_rows} <= {"done", "skipped"}, Counter((r.stage, r.status) for r in all_rows)
    # no task spent a Hatchet retry on the dead dependency: the row's policy waited inside the task
    for (wid,) in q(ctx, "SELECT workflow_run_id FROM pipeline_run_object WHERE run_id = :r", r=run_id):
        details = engine_run(wid, ready=lambda d: all(str(t.status).endswith("COMPLETED") for t in d.tasks))
        assert [t.retry_count for t in details.tasks] == [0] * len(details.tasks), (
            wid, [(t.display_name, t.retry_count) for t in details.tasks])
    with ctx.db.engine.connect() as conn:
        assert read_pauses(conn) == []
    run = q(ctx, "SELECT status, quarantined FROM pipeline_runs WHERE id = :r", r=run_id)[0]
    assert run.status == "completed" and run.quarantined == 0
    indexed, chunks = indexed_and_recorded(ctx, backend)
    assert indexed == chunks > 0, (indexed, chunks)
    print(f"\npaused {paused_at - stopped_at:.1f} s after the stop; resumed {resume_seconds:.1f} s after the "
          f"node answered; attempts {Counter(r.attempts for r in rows)}")
