"""Depth-first claim order (docs/design-decisions.md "Depth-first claim order"), on real PostgreSQL.

Within a lane the claim takes the eligible row of the latest stage first, oldest first within that stage:
a document under way is finished before a new one is fetched, so documents become searchable at a steady
rate and the documents half processed stay bounded; no stage starves under a flood of new files; the
claim is one statement whose every probe descends ``ix_processing_state_lane_stage``.
"""

from __future__ import annotations

from collections import Counter

from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.store import claims as q
from ki.store.lanes import LaneSchedule, probe_order
from tests.helpers.state import complete_fenced, make_source, sql


def _claim_and_finish(ctx, schedule: LaneSchedule) -> q.Claim | None:
    """One claim as the local runner makes it, recorded done with the configuration's unlock plan."""
    with ctx.db.engine.begin() as conn:
        claims = q.claim_next(conn, worker=ctx.worker_id, run_id=None, lanes=schedule.next_order())
    if not claims:
        return None
    (claim,) = claims
    with ctx.db.engine.begin() as conn:
        assert q.complete_claim(conn, claim, status="done", producer_version="t", last_error=None,
                                unlock=ctx.plan(claim.stage).unlock) is not None
    return claim


def test_a_documents_later_stage_is_claimed_before_a_new_documents_fetch(ctx, src):
    ids = make_source(ctx, src, 5)
    schedule = LaneSchedule()
    # doc 3 was fetched: its convert row is the newest row of all, yet it goes before every other fetch
    assert complete_fenced(ctx, ids[3], "fetch", ctx.plan("fetch").unlock) is not None
    taken = [_claim_and_finish(ctx, schedule) for _ in range(4)]
    # (the model stages are off here: convert unlocks index)
    assert [(c.source_object_id, c.stage) for c in taken] == [
        (ids[3], "convert"), (ids[3], "index"), (ids[0], "fetch"), (ids[0], "convert")]
    # oldest first within a stage: two convert rows owed, the older one goes first
    assert complete_fenced(ctx, ids[1], "fetch", ctx.plan("fetch").unlock) is not None
    assert complete_fenced(ctx, ids[2], "fetch", ctx.plan("fetch").unlock) is not None
    sql(ctx, "UPDATE processing_state SET updated_at = now() - interval '1 min' "
             "WHERE source_object_id = :id AND stage = 'convert'", id=ids[2])
    with ctx.db.engine.begin() as conn:
        claims = [q.claim_next(conn, worker="w", run_id=None, lanes=schedule.next_order())[0] for _ in range(3)]
    # ids[0]'s index (the latest stage) first, then the converts oldest first
    assert [(c.source_object_id, c.stage) for c in claims] == [
        (ids[0], "index"), (ids[2], "convert"), (ids[1], "convert")]


def test_a_failed_later_stage_waits_for_its_retry_and_a_paused_one_is_passed_over(ctx, src):
    ids = make_source(ctx, src, 3)
    assert complete_fenced(ctx, ids[1], "fetch", ctx.plan("fetch").unlock) is not None
    # the later stage failed, retry not due yet: not eligible, so the fetch of a new document goes first
    sql(ctx, "UPDATE processing_state SET status = 'failed', next_retry_at = now() + interval '1 h' "
             "WHERE source_object_id = :id AND stage = 'convert'", id=ids[1])
    with ctx.db.engine.begin() as conn:
        (claim,) = q.claim_next(conn, worker="w", run_id=None, lanes=("backfill",))
    assert (claim.source_object_id, claim.stage) == (ids[0], "fetch")
    # due now: it goes first again; paused (its dependency's breaker open), it is passed over
    sql(ctx, "UPDATE processing_state SET next_retry_at = now() - interval '1 s' "
             "WHERE source_object_id = :id AND stage = 'convert'", id=ids[1])
    with ctx.db.engine.begin() as conn:
        (paused,) = q.claim_next(conn, worker="w", run_id=None, lanes=("backfill",), paused=["convert"])
        (due,) = q.claim_next(conn, worker="w", run_id=None, lanes=("backfill",))
    assert (paused.source_object_id, paused.stage) == (ids[2], "fetch")
    assert (due.source_object_id, due.stage) == (ids[1], "convert")


def test_no_stage_starves_under_a_flood_of_new_files(ctx, src):
    """One worker; every 6 claims 6 new files arrive (twice what it can finish): every stage keeps its
    share of the claims, at most one document is ever half processed, and documents finish at a steady
    rate from the start (each 3 claims after the first finish one)."""
    ids = make_source(ctx, src, 30)  # 30 owed at the start
    sid = register_local_source(ctx, src)
    schedule = LaneSchedule()
    stages: list[str] = []
    finished_at: list[int] = []
    half_done_max = 0
    for n in range(60):
        if n and n % 6 == 0:  # the flood: 6 more files, in the same lane as the rest
            for i in range(6):
                (src / f"flood{n:03d}-{i}.txt").write_text(f"Eingang {n}/{i}: Schriftsatz\n", encoding="utf-8")
            assert scan_source(ctx, sid).new == 6
            sql(ctx, "UPDATE processing_state SET lane = 'backfill'")
        claim = _claim_and_finish(ctx, schedule)
        assert claim is not None
        stages.append(claim.stage)
        if claim.stage == "index":
            finished_at.append(n)
        with ctx.db.engine.connect() as conn:
            half_done = conn.execute(text("""
                SELECT count(DISTINCT source_object_id) FROM processing_state
                WHERE source_object_id IN (SELECT source_object_id FROM processing_state
                                           WHERE stage = 'fetch' AND status = 'done')
                  AND stage = 'index' AND status <> 'done'""")).scalar_one()
        half_done_max = max(half_done_max, half_done)
    counts = Counter(stages)
    assert counts == {"fetch": 20, "convert": 20, "index": 20}, counts
    assert half_done_max == 1
    assert finished_at == list(range(2, 60, 3))
    # the documents owed first were the ones finished (oldest first within a stage)
    with ctx.db.engine.connect() as conn:
        done = conn.execute(text("SELECT source_object_id FROM processing_state WHERE stage = 'index' "
                                 "AND status = 'done' ORDER BY source_object_id")).scalars().all()
    assert len(done) == 20 and set(done) <= set(ids)  # none of the flood's files was finished first


def test_the_claim_descends_the_lane_stage_index_and_walks_no_other_rows(ctx, src):
    """49,000 rows, most of them owed fetches of the lane probed first: the plan probes (lane, stage)
    pairs through ix_processing_state_lane_stage, and the empty pairs cost no rows."""
    make_source(ctx, src, 1)
    sql(ctx, """INSERT INTO source_object (source_id, external_id, path, size, mtime_ns)
                SELECT (SELECT min(id) FROM source), 'gen' || g, '/gen/' || g, 1, 1
                FROM generate_series(1, 7000) g""")
    sql(ctx, """INSERT INTO processing_state (source_object_id, stage, status, last_error, lane)
                SELECT so.id, st, CASE WHEN st = 'fetch' THEN 'pending' ELSE 'skipped' END,
                       CASE WHEN st = 'fetch' THEN NULL
                            ELSE '{"reason": "waiting_for_previous_stage"}'::jsonb END, 'backfill'
                FROM source_object so CROSS JOIN unnest(CAST(:st AS text[])) st
                WHERE so.external_id LIKE 'gen%'""",
        st=["fetch", "convert", "classify_matter", "relate", "extract_metadata", "extract_decisions", "index"])
    sql(ctx, "UPDATE processing_state SET status = 'pending', last_error = NULL "
             "WHERE stage = 'convert' AND source_object_id % 500 = 0")
    sql(ctx, "ANALYZE processing_state")
    lanes = ("backfill", "live", "retry", "rerun")
    pair_lanes, pair_stages = probe_order(lanes)
    model_lanes, model_stages = probe_order(lanes, model_only=True)
    with ctx.db.engine.connect() as conn:
        plan = "\n".join(r[0] for r in conn.execute(
            text("EXPLAIN (ANALYZE, FORMAT TEXT) " + str(q.CLAIM_IN_LANES_SQL.text)),
            {"token": "00000000-0000-0000-0000-000000000000", "worker": "w", "run_id": None, "limit": 1,
             "lanes": pair_lanes, "stages": pair_stages, "model_lanes": model_lanes,
             "model_stages": model_stages}))
        conn.rollback()
    assert plan.count("Index Scan using ix_processing_state_lane_stage") == 2, plan  # model and general probe
    assert "Seq Scan on processing_state" not in plan and "ix_processing_state_claimable" not in plan, plan
    removed = [int(line.split(":")[1]) for line in plan.splitlines() if "Rows Removed by Filter" in line]
    assert sum(removed) <= 5, plan  # no probe walks the 7,000 owed fetches or another stage's rows
