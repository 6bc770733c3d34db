"""Lanes as Hatchet run priorities, on a real engine (hatchet-lite v0.105.0).

Spec: DESIGN.md "Lanes" (live > retry > backfill > rerun) and docs/design-decisions.md "Lanes as Hatchet run
priorities": each document DAG is triggered at the priority of the most urgent lane of its owed rows, so a file
that changes while a backfill's DAGs wait in the engine's queue is run before them, not after.
"""

from __future__ import annotations

import pytest

from ki.adapters.sources.scan import scan_source
from ki.app.launch import launch_insertion
from ki.store import conveyor
from ki.workflows.dag import LANE_PRIORITY
from tests.helpers.hatchet_harness import configure, q, scan, write_docs
from tests.helpers.outage import wait_until

pytestmark = [pytest.mark.hatchet, pytest.mark.timeout(300)]

BACKFILL = 30
SLOTS = 2


def test_a_live_file_runs_before_the_backfills_queued_dags(hx, make_ctx, tmp_path):
    """A backfill of 30 documents, all 30 DAGs queued in the engine at once (window 64) for one worker with 2
    slots and a slow first stage; after 3 fetches a file arrives in the share and its own batch is launched.
    Its fetch (priority 3) starts ahead of every backfill fetch still queued (priority 1), except what the two
    slots had taken, and its batch finishes before the backfill does. Under FIFO it would start after all of
    them (measured: after 25 of 25)."""
    root = tmp_path / "share"
    write_docs(root, BACKFILL)
    ctx = make_ctx(hatchet_document_concurrency=64)
    configure(ctx.settings.data_dir, "hatchet")
    hx.start_worker(slots=SLOTS, env={"KI_TEST_SLOW": "fetch:0.8"})
    sid = scan(ctx, root)
    assert {r[0] for r in q(ctx, "SELECT DISTINCT lane FROM processing_state")} == {"backfill"}
    ctx.reload_config()
    backfill = launch_insertion(ctx, trigger="test").run_id

    fetched = "SELECT count(*) FROM work_item_attempt WHERE run_id = :r AND stage = 'fetch'"
    assert wait_until(lambda: q(ctx, fetched, r=backfill)[0][0] >= 3, 180), hx.diagnostics(ctx)
    (root / "m0" / "doc0000.txt").write_text("Aktennotiz 0, geändert: neue Frist.\n", encoding="utf-8")
    (root / "m0" / "eilig.txt").write_text("Eilige Aktennotiz: Frist morgen.\n", encoding="utf-8")
    scan_source(ctx, sid)
    live = {r[0] for r in q(ctx, "SELECT id FROM source_object WHERE path LIKE '%eilig.txt'")}
    with ctx.db.engine.connect() as conn:
        assert conveyor.member_lanes(conn, list(live)) == {oid: "live" for oid in live}
    assert LANE_PRIORITY["live"] > LANE_PRIORITY["retry"] > LANE_PRIORITY["backfill"] >= LANE_PRIORITY["rerun"]
    launched_at = q(ctx, "SELECT now()")[0][0]
    live_run = launch_insertion(ctx, trigger="test").run_id
    assert {r[0] for r in q(ctx, "SELECT source_object_id FROM pipeline_run_object WHERE run_id = :r",
                             r=live_run)} == live  # doc0000 changed too, but it belongs to the running backfill

    hx.wait_run(ctx, live_run, timeout=240)
    hx.wait_run(ctx, backfill, timeout=240)
    # each document's first task (the slow stage: every backfill fetch is queued in the engine at priority 1)
    started = dict(q(ctx, "SELECT source_object_id, min(started_at) FROM work_item_attempt WHERE stage = 'fetch' "
                          "GROUP BY 1"))
    ended = dict(q(ctx, "SELECT run_id, max(finished_at) FROM pipeline_run_object GROUP BY 1"))
    (live_oid,) = live
    members = [r[0] for r in q(ctx, "SELECT source_object_id FROM pipeline_run_object WHERE run_id = :r", r=backfill)]
    # from the moment the engine acknowledged the live DAG (the launch's prepare steps take a while first)
    (acknowledged,) = [r[0] for r in q(ctx, "SELECT acknowledged_at FROM pipeline_run_object WHERE run_id = :r",
                                       r=live_run)]
    waiting = sorted(started[m] for m in members if started[m] > acknowledged)
    assert len(waiting) >= 15, (len(waiting), acknowledged)
    ahead = sum(1 for t in waiting if t < started[live_oid])
    assert ahead <= SLOTS, (ahead, len(waiting))  # at most what the slots had taken when it was triggered
    # its later tasks wait in other stages' queues, where Hatchet's priority does not reach across queues
    # (docs/design-decisions.md "Lanes as Hatchet run priorities"): the batch still ends before the backfill
    assert ended[live_run] < ended[backfill]
    print(f"\nlive file's first task after {ahead} of the {len(waiting)} backfill documents still waiting; "
          f"live batch done {(ended[live_run] - launched_at).total_seconds():.1f} s after its launch, the "
          f"backfill {(ended[backfill] - launched_at).total_seconds():.1f} s")
