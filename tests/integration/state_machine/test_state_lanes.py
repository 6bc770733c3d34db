"""Claim lanes (DESIGN.md "Lanes"; spec work-queue.md "Lease-Based Claiming", 1. Poll), on real PostgreSQL.

Every statement that makes a row owed records why (``live``, ``retry``, ``rerun``, ``backfill``); a live
change arriving during a backfill is claimed before the remaining backfill (a bounded number of claims
after it arrives, and finished while most of the backfill is still owed); no lane starves under a flood
of another; the workers reserved for the model stages claim model-stage rows first.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

from sqlalchemy import text
from typer.testing import CliRunner

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.cli.app import app as cli_app
from ki.core.taxonomies import CLAIM_LANES
from ki.orchestration import prepare
from ki.orchestration.runner import PipelineRunner
from ki.store import claims as q
from ki.store.lanes import LaneSchedule, lane_counts
from ki.store.requeue import release_rows
from tests.helpers.state import complete_fenced, configure, make_source, rows, sql


def _lanes(ctx, oid: int) -> dict[str, str]:
    return {stage: r["lane"] for stage, r in rows(ctx, oid).items()}


def test_every_statement_that_makes_a_row_owed_records_its_lane(ctx, src):
    first = make_source(ctx, src, 3)  # the source's first full scan: its backfill
    assert set(_lanes(ctx, first[0]).values()) == {"backfill"}
    # a later scan: a new file and changed bytes are live changes
    (src / "doc000.txt").write_text("andere Bytes, geänderter Vertrag\n", encoding="utf-8")
    with ctx.db.engine.begin() as conn:  # doc000 was fetched once (a content hash to differ from)
        conn.execute(text("UPDATE source_object SET content_hash = 'old', size = 1 WHERE id = :id"), {"id": first[0]})
    (src / "new.txt").write_text("Neuer Schriftsatz\n", encoding="utf-8")
    sid = register_local_source(ctx, src)
    report = scan_source(ctx, sid)
    assert (report.new, report.changed) == (1, 1)
    with ctx.db.engine.connect() as conn:
        new_id = conn.execute(text("SELECT id FROM source_object WHERE external_id = 'new.txt'")).scalar_one()
    assert set(_lanes(ctx, new_id).values()) == {"live"}
    assert set(_lanes(ctx, first[0]).values()) == {"live"}
    assert _lanes(ctx, first[1])["fetch"] == "backfill"  # untouched rows keep theirs
    # a stage unlocked by its predecessor takes the predecessor's lane
    assert complete_fenced(ctx, new_id, "fetch", q.UnlockPlan(next_stage="convert")) is not None
    assert rows(ctx, new_id)["convert"]["status"] == "pending"
    assert rows(ctx, new_id)["convert"]["lane"] == "live"
    # an operator's retry of a quarantined row: retry
    sql(ctx, "UPDATE processing_state SET status = 'quarantined', last_error = '{\"reason\": \"x\"}' "
             "WHERE source_object_id = :id AND stage = 'fetch'", id=first[1])
    with ctx.db.engine.begin() as conn:
        released = release_rows(conn, [rows(ctx, first[1])["fetch"]["id"]], actor="test")
    assert [r.stage for r in released] == ["fetch"]
    assert rows(ctx, first[1])["fetch"]["lane"] == "retry"
    # a rerun token (version bump) requeues done rows: rerun
    sql(ctx, "UPDATE processing_state SET status = 'done', producer_version = '0' "
             "WHERE source_object_id = :id AND stage = 'fetch'", id=first[2])
    prepare.requeue_outdated_stages(ctx)
    assert rows(ctx, first[2])["fetch"]["status"] == "pending"
    assert rows(ctx, first[2])["fetch"]["lane"] == "rerun"
    with ctx.db.engine.connect() as conn:
        counts = lane_counts(conn)
    assert counts["live"]["owed"] >= 2 and counts["retry"]["owed"] == 1 and counts["rerun"]["owed"] >= 1
    shown = CliRunner().invoke(cli_app, ["status", "--json"])  # ki status shows them
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["lanes"] == counts
    table = CliRunner().invoke(cli_app, ["status"], env={"COLUMNS": "200"})
    assert f"lanes: live {counts['live']['owed']} owed · retry 1 owed" in table.output, table.output
    # a bulk arrival (more than pipeline.lanes.live_max_files documents in one scan) is a backfill
    configure(ctx, lanes__live_max_files=2)
    for i in range(3):
        (src / f"bulk{i}.txt").write_text(f"Anlage {i}\n", encoding="utf-8")
    assert scan_source(ctx, sid).new == 3
    with ctx.db.engine.connect() as conn:
        bulk = conn.execute(text("SELECT id FROM source_object WHERE external_id LIKE 'bulk%'")).scalars().all()
    assert [set(_lanes(ctx, oid).values()) for oid in bulk] == [{"backfill"}] * 3


def _owe(ctx, src, n: int, lane: str, prefix: str) -> list[int]:
    """``n`` objects whose fetch row is owed in ``lane`` (their scan seeds them; the lane is then set)."""
    ids = make_source(ctx, src, n, prefix=prefix)
    sql(ctx, "UPDATE processing_state SET lane = :lane WHERE source_object_id = ANY(:ids)", lane=lane, ids=ids)
    return ids


def test_no_lane_starves_and_each_gets_its_weighted_share(ctx, src):
    by_lane = {lane: set(_owe(ctx, src, 40, lane, lane)) for lane in CLAIM_LANES}
    schedule = LaneSchedule()  # live 8, retry 4, rerun 2, backfill 1
    taken: list[str] = []
    with ctx.db.engine.begin() as conn:
        for _ in range(30):
            (claim,) = q.claim_next(conn, worker="w", run_id=None, lanes=schedule.next_order())
            taken.append(next(lane for lane, ids in by_lane.items() if claim.source_object_id in ids))
    assert Counter(taken) == {"live": 16, "retry": 8, "rerun": 4, "backfill": 2}
    # backfill's turns come spread out, not at the end: one in each 15 claims
    assert [i // 15 for i, lane in enumerate(taken) if lane == "backfill"] == [0, 1]
    # a lane that is empty gives its turn away: only backfill left → every claim is backfill's
    sql(ctx, "UPDATE processing_state SET status = 'done' WHERE lane <> 'backfill'")
    with ctx.db.engine.begin() as conn:
        got = [q.claim_next(conn, worker="w", run_id=None, lanes=schedule.next_order()) for _ in range(10)]
    assert all(len(c) == 1 and c[0].source_object_id in by_lane["backfill"] for c in got)


def test_the_workers_reserved_for_the_model_stages_claim_them_first(ctx, src):
    backfill = make_source(ctx, src, 20, prefix="b")
    # one document reached classify_matter again (a rerun: the lane the general claim probes last); it is the
    # newest row of all
    sql(ctx, "UPDATE processing_state SET status = 'done' WHERE source_object_id = :id AND stage = 'fetch'",
        id=backfill[5])
    sql(ctx, "UPDATE processing_state SET status = 'pending', last_error = NULL, lane = 'rerun', "
             "updated_at = now() + interval '1 s' WHERE source_object_id = :id AND stage = 'classify_matter'",
        id=backfill[5])
    order = ("backfill", "live", "retry", "rerun")
    with ctx.db.engine.begin() as conn:
        general = q.claim_next(conn, worker="g", run_id=None, lanes=order)
        reserved = q.claim_next(conn, worker="m", run_id=None, lanes=order, model_first=True)
        reserved_again = q.claim_next(conn, worker="m", run_id=None, lanes=order, model_first=True)
    assert [c.stage for c in general] == ["fetch"]
    assert [(c.source_object_id, c.stage) for c in reserved] == [(backfill[5], "classify_matter")]
    # no model-stage row left: the reserved worker fills its permit from the general queue
    assert [c.stage for c in reserved_again] == ["fetch"]


def test_a_live_change_is_not_stuck_behind_the_backfill(make_ctx, src):
    """A real run: 150 documents of backfill (fetch, convert, index); after 30 claims a file is changed and
    a new one dropped in (a sync: live). Both are claimed within a few claims of arriving and finish while
    most of the backfill is still owed. (~20-40 s at load 10.)"""
    ctx = make_ctx(workers=2)
    ids = make_source(ctx, src, 150)
    runner = PipelineRunner(ctx, workers=2)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (runner.run_until_idle(), done.set()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while runner.counters.processed < 30 and time.monotonic() < deadline:
        time.sleep(0.02)
    (src / "live.txt").write_text("Eilt: Fristverlängerung beantragt\n", encoding="utf-8")
    report = scan_source(ctx, register_local_source(ctx, src))
    assert report.new == 1
    with ctx.db.engine.connect() as conn:
        live_id = conn.execute(text("SELECT id FROM source_object WHERE external_id = 'live.txt'")).scalar_one()
        seeded = conn.execute(text("SELECT updated_at FROM processing_state WHERE source_object_id = :id "
                                   "AND stage = 'fetch'"), {"id": live_id}).scalar_one()
    thread.join(timeout=300)
    assert done.is_set(), "the run did not finish"
    with ctx.db.engine.connect() as conn:
        history = conn.execute(text("""
            SELECT source_object_id, stage, started_at, finished_at FROM work_item_attempt
            WHERE outcome = 'done' ORDER BY started_at, id""")).fetchall()
    assert {r.stage for r in history if r.source_object_id == live_id} == {"fetch", "convert", "index"}
    after = [r for r in history if r.started_at >= seeded]
    position = next(i for i, r in enumerate(after) if r.source_object_id == live_id)
    # bounded position: a few claims (the scan's transaction started before it committed the row, and the
    # other worker claims meanwhile); oldest-first order put it 148 claims later
    assert position <= 12, f"the live file's first claim came {position} claims after it was owed"
    live_finished = max(r.finished_at for r in history if r.source_object_id == live_id)
    backfill_left = [r for r in after if r.source_object_id in set(ids)]
    later = sum(1 for r in backfill_left if r.started_at > live_finished)
    assert later > len(backfill_left) / 2, (later, len(backfill_left))
