"""Seeding and unlocking: a scan seeds fetch pending and every later stage waiting; a completion unlocks
only the next waiting row; the buckets.

Spec: insertion-pipeline.md "Processing states and console buckets" (claim query, ``_unlock_next``,
``stage_bucket``).
"""

from __future__ import annotations

from collections import Counter

from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.core import errors
from ki.core.taxonomies import (
    DISABLED_BY_CONFIGURATION,
    MODEL_STAGES,
    PIPELINE_STAGE_ORDER,
    STAGE_BUCKET_SQL,
    WAITING_FOR_PREVIOUS_STAGE,
    stage_bucket,
)
from ki.domain.context import StageOutcome, unlock_plan
from ki.orchestration.execute import run_stage_for_object
from ki.stages import STAGE_HANDLERS
from ki.store import claims as q
from ki.store.status import bucket_counts
from tests.helpers.state import (
    AFTER_FETCH,
    all_rows,
    buckets,
    complete_fenced,
    configure,
    expected_done_buckets,
    make_source,
    rows,
    run_all,
    sql,
)


def test_scan_seeds_fetch_pending_and_every_later_stage_waiting(ctx, src):
    ids = make_source(ctx, src, 3)
    assert len(ids) == 3
    for oid in ids:
        r = rows(ctx, oid)
        assert list(sorted(r)) == sorted(PIPELINE_STAGE_ORDER)
        assert (r["fetch"]["status"], r["fetch"]["last_error"], r["fetch"]["attempts"]) == ("pending", None, 0)
        for stage in AFTER_FETCH:
            assert r[stage]["status"] == "skipped"
            assert r[stage]["last_error"] == {"reason": WAITING_FOR_PREVIOUS_STAGE}
            assert r[stage]["reason"] == WAITING_FOR_PREVIOUS_STAGE
            assert r[stage]["attempts"] == 0
            assert r[stage]["producer_version"] is None
    with ctx.db.engine.connect() as conn:
        counts = bucket_counts(conn)
    assert counts["fetch"]["pending"] == 3
    for stage in AFTER_FETCH:
        assert counts[stage]["waiting"] == 3
        assert sum(counts[stage].values()) == 3
    # a rescan of unchanged files seeds nothing twice
    scan_source(ctx, register_local_source(ctx, src))
    assert len(all_rows(ctx)) == 3 * len(PIPELINE_STAGE_ORDER)


def test_completion_unlocks_only_the_next_waiting_row(ctx, src):
    (oid,) = make_source(ctx, src, 1)
    assert run_stage_for_object(ctx, "fetch", oid).kind == "done"
    r = rows(ctx, oid)
    assert r["fetch"]["status"] == "done"
    assert r["fetch"]["producer_version"] == "mvp-1"
    assert r["fetch"]["completions"] == 1
    assert r["fetch"]["claim_token"] is None
    assert r["fetch"]["last_error"] is None
    assert (r["convert"]["status"], r["convert"]["last_error"], r["convert"]["attempts"]) == ("pending", None, 0)
    assert all(r[s]["reason"] == WAITING_FOR_PREVIOUS_STAGE for s in PIPELINE_STAGE_ORDER[2:])

    # _unlock_next (complete_claim's unlock) does nothing to a row that is not waiting: fetch
    # finishes again (its row put back to pending here) while convert is already pending
    fetch_plan = unlock_plan(ctx.config.pipeline, "fetch")
    assert fetch_plan == q.UnlockPlan((), "convert")
    sql(ctx, "UPDATE processing_state SET status = 'pending' WHERE source_object_id = :id AND stage = 'fetch'", id=oid)
    before = rows(ctx, oid)
    assert complete_fenced(ctx, oid, "fetch", fetch_plan) == q.Completion(passed=0)
    after = rows(ctx, oid)
    assert (after["fetch"]["status"], after["fetch"]["completions"]) == ("done", 2)
    assert {s: row for s, row in after.items() if s != "fetch"} == {s: row for s, row in before.items() if s != "fetch"}

    # with only classify_matter switched on, finishing convert flips exactly that row
    configure(ctx, stages__classify_matter__enabled=True)
    ctx.reload_config()
    assert run_stage_for_object(ctx, "convert", oid).kind == "done"
    r = rows(ctx, oid)
    assert (r["classify_matter"]["status"], r["classify_matter"]["attempts"]) == ("pending", 0)
    assert all(r[s]["reason"] == WAITING_FOR_PREVIOUS_STAGE for s in PIPELINE_STAGE_ORDER[3:])
    # switched-off stages after a finished one are recorded on the way, in the same statement
    # (skipped/disabled_by_configuration with their producer_version, never claimed), and the
    # next enabled stage becomes pending
    configure(ctx, stages__classify_matter__enabled=False)
    ctx.reload_config()
    assert run_stage_for_object(ctx, "classify_matter", oid).kind == "skipped"  # pending already: claimed
    r = rows(ctx, oid)
    assert r["classify_matter"]["reason"] == DISABLED_BY_CONFIGURATION
    for s in ("relate", "extract_metadata", "extract_decisions"):
        assert (r[s]["status"], r[s]["reason"], r[s]["attempts"], r[s]["completions"]) == (
            "skipped", DISABLED_BY_CONFIGURATION, 0, 0)
        assert r[s]["producer_version"] == ctx.config.pipeline.producer_version(s)
    assert (r["index"]["status"], r["index"]["attempts"]) == ("pending", 0)

    # and nothing after the last stage: finishing index unlocks nothing
    assert unlock_plan(ctx.config.pipeline, "extract_decisions") == q.UnlockPlan((), "index")
    index_plan = unlock_plan(ctx.config.pipeline, "index")
    assert index_plan == q.UnlockPlan((), None)
    assert complete_fenced(ctx, oid, "index", index_plan) == q.Completion(passed=0)
    after = rows(ctx, oid)
    assert (after["index"]["status"], after["index"]["completions"]) == ("done", 1)
    assert {s: row for s, row in after.items() if s != "index"} == {s: row for s, row in r.items() if s != "index"}

    # stages that are waiting are not claimable
    (other,) = make_source(ctx, src, 1, prefix="other")
    assert run_stage_for_object(ctx, "index", other).kind == "not_claimed"
    assert rows(ctx, other)["index"]["attempts"] == 0
    # a done stage is not claimed again (a replayed task is harmless)
    assert run_stage_for_object(ctx, "fetch", oid).kind == "not_claimed"
    assert rows(ctx, oid)["fetch"]["completions"] == 2  # the run plus the finish above


def test_full_object_with_run_stage_for_object(ctx, src):
    (oid,) = make_source(ctx, src, 1)
    # the switched-off model stages are recorded when convert finishes, never claimed
    assert run_all(ctx, oid) == {s: ("not_claimed" if s in MODEL_STAGES else "done") for s in PIPELINE_STAGE_ORDER}
    assert buckets(ctx, oid) == expected_done_buckets()
    r = rows(ctx, oid)
    for stage in PIPELINE_STAGE_ORDER:
        assert r[stage]["producer_version"] == ctx.config.pipeline.producer_version(stage)
        assert r[stage]["attempts"] == (0 if stage in MODEL_STAGES else 1)
    with ctx.db.engine.connect() as conn:
        chunks = conn.execute(text("SELECT count(*) FROM chunk WHERE source_object_id = :id"), {"id": oid}).scalar()
    assert chunks >= 1


def test_bucket_counts_equal_stage_bucket_in_python(ctx, src, monkeypatch):
    ids = make_source(ctx, src, 8)
    configure(ctx, retry_base_seconds=60)
    real_convert = STAGE_HANDLERS["convert"]

    def convert(sctx):
        if sctx.obj.id == ids[1]:
            raise errors.UnsupportedDocument("corrupt", reason="corrupt")
        if sctx.obj.id == ids[2]:
            raise RuntimeError("transient")
        if sctx.obj.id == ids[3]:
            return StageOutcome(status="skipped", reason="no_text")
        return real_convert(sctx)

    monkeypatch.setitem(STAGE_HANDLERS, "convert", convert)
    for oid in ids[:5]:
        run_all(ctx, oid)
    # ids[5]: fetched only; ids[6]: fetch held by a worker; ids[7]: untouched
    run_stage_for_object(ctx, "fetch", ids[5])
    with ctx.db.engine.begin() as conn:
        assert q.claim_row(conn, ids[6], "fetch", worker="w", run_id=None) is not None

    table = all_rows(ctx)
    python = Counter((r["stage"], stage_bucket(r["status"], r["reason"])) for r in table)
    with ctx.db.engine.connect() as conn:
        counts = bucket_counts(conn)
        # the same CASE expression as text (GET /api/status uses it) agrees row by row
        per_row = {
            r.id: r.bucket for r in conn.execute(text(f"SELECT id, {STAGE_BUCKET_SQL} AS bucket FROM processing_state"))
        }
    for r in table:
        assert per_row[r["id"]] == stage_bucket(r["status"], r["reason"])
    for stage in PIPELINE_STAGE_ORDER:
        for bucket, n in counts[stage].items():
            assert n == python.get((stage, bucket), 0), (stage, bucket)
    # the fixture really produced every bucket
    seen = {b for (_, b) in python}
    assert seen == {"pending", "running", "done", "failed", "waiting", "disabled", "skipped", "quarantined"}
    assert counts["fetch"] == {"pending": 1, "running": 1, "done": 6, "failed": 0, "waiting": 0, "disabled": 0,
                               "skipped": 0, "quarantined": 0}
    assert counts["convert"]["quarantined"] == 1
    assert counts["convert"]["failed"] == 1
    assert counts["convert"]["skipped"] == 1
    assert counts["convert"]["done"] == 2
    assert counts["convert"]["pending"] == 1
    assert counts["convert"]["waiting"] == 2
