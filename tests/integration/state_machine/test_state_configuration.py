"""Configuration changes: disabled stages park and are requeued when enabled; producer_version bumps
requeue exactly the earliest outdated stage.

Spec: insertion-pipeline.md "Configuration" and "producer_version semantics".
"""

from __future__ import annotations

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.core import errors
from ki.core.taxonomies import (
    DISABLED_BY_CONFIGURATION,
    INPUT_STAGE_DISABLED,
    PIPELINE_STAGE_ORDER,
    WAITING_FOR_PREVIOUS_STAGE,
)
from ki.orchestration import prepare
from ki.stages import STAGE_HANDLERS
from ki.store.status import bucket_counts
from tests.helpers.state import (
    MODEL_STAGE_LIST,
    buckets,
    configure,
    expected_done_buckets,
    make_source,
    object_ids,
    rows,
)


def test_disabled_stage_parks_rows_and_later_stages_still_run(ctx, src, monkeypatch):
    ids = make_source(ctx, src, 3)
    configure(ctx, stages__convert__enabled=False, retry_base_seconds=60)
    index_calls: list[int] = []
    real_index = STAGE_HANDLERS["index"]

    def index(sctx):
        index_calls.append(sctx.obj.id)
        return real_index(sctx)

    monkeypatch.setitem(STAGE_HANDLERS, "index", index)
    summary = launch_insertion(ctx, wait_for_retries_seconds=0)
    assert summary.status == "completed"
    # index needs convert's output: with convert off it is skipped, not run and not failed
    assert index_calls == []
    for oid in ids:
        r = rows(ctx, oid)
        assert r["fetch"]["status"] == "done"
        for stage in ["convert", *MODEL_STAGE_LIST]:
            assert (r[stage]["status"], r[stage]["reason"]) == ("skipped", DISABLED_BY_CONFIGURATION)
            assert r[stage]["producer_version"] == ctx.config.pipeline.producer_version(stage)
        assert (r["index"]["status"], r["index"]["reason"], r["index"]["attempts"]) == (
            "skipped", INPUT_STAGE_DISABLED, 1)
        assert r["index"]["last_error"]["details"] == {"disabled_inputs": ["convert"]}
    with ctx.db.engine.connect() as conn:
        counts = bucket_counts(conn)
    assert counts["convert"]["disabled"] == 3
    assert counts["classify_matter"]["disabled"] == 3

    # re-enabling requeues the parked rows and parks everything downstream again
    configure(ctx, stages__convert__enabled=True)
    requeued, parked = prepare.requeue_newly_enabled_stages(ctx)
    assert (requeued, parked) == (3, 3 * 5)
    for oid in ids:
        r = rows(ctx, oid)
        assert (r["fetch"]["status"], r["fetch"]["completions"]) == ("done", 1)
        assert (r["convert"]["status"], r["convert"]["attempts"], r["convert"]["last_error"]) == ("pending", 0, None)
        for stage in PIPELINE_STAGE_ORDER[2:]:
            assert (r[stage]["status"], r[stage]["reason"], r[stage]["producer_version"]) == (
                "skipped", WAITING_FOR_PREVIOUS_STAGE, None)
    assert prepare.requeue_newly_enabled_stages(ctx) == (0, 0)  # model stages are still disabled
    summary = launch_insertion(ctx, wait_for_retries_seconds=0)
    assert (summary.status, summary.counters.quarantined, summary.counters.retried) == ("completed", 0, 0)
    for oid in ids:
        assert buckets(ctx, oid) == expected_done_buckets()
        assert rows(ctx, oid)["fetch"]["completions"] == 1  # fetch did not run again


def test_disabled_first_stage_is_requeued_by_the_run_itself(ctx, src):
    ids = make_source(ctx, src, 2)
    configure(ctx, stages__fetch__enabled=False, stages__convert__max_attempts=1, retry_base_seconds=60)
    launch_insertion(ctx, wait_for_retries_seconds=0)
    for oid in ids:
        r = rows(ctx, oid)
        assert r["fetch"]["reason"] == DISABLED_BY_CONFIGURATION
        # convert cannot run without fetch's output: skipped as such, never quarantined
        assert (r["convert"]["status"], r["convert"]["reason"]) == ("skipped", INPUT_STAGE_DISABLED)
    configure(ctx, stages__fetch__enabled=True)
    summary = launch_insertion(ctx, wait_for_retries_seconds=0)
    assert (summary.status, summary.counters.quarantined) == ("completed", 0)
    for oid in ids:
        assert buckets(ctx, oid) == expected_done_buckets()


# --- producer_version bumps ----------------------------------------------------------------------


def test_rerun_token_requeues_exactly_the_earliest_outdated_stage(ctx, src, monkeypatch):
    ids = make_source(ctx, src, 3)
    poisoned = ids[2]
    real_convert = STAGE_HANDLERS["convert"]

    def convert(sctx):
        if sctx.obj.id == poisoned:
            raise errors.UnsupportedDocument("corrupt", reason="corrupt")
        return real_convert(sctx)

    monkeypatch.setitem(STAGE_HANDLERS, "convert", convert)
    launch_insertion(ctx, wait_for_retries_seconds=0)
    # a file that arrives later is only seeded (fetch pending, the rest waiting)
    (src / "late.txt").write_text("Nachtrag zum Vertrag.\n", encoding="utf-8")
    sid = register_local_source(ctx, src)
    scan_source(ctx, sid)
    (late,) = object_ids(ctx, sid, "late")
    done_ids = ids[:2]
    for oid in done_ids:
        assert buckets(ctx, oid) == expected_done_buckets()
    before_poisoned = rows(ctx, poisoned)
    before_late = rows(ctx, late)

    # bump convert and index: per object, only convert (the earliest) is requeued
    configure(ctx, stages__convert__rerun_token="tok", stages__index__rerun_token="tok2")
    requeued, parked = prepare.requeue_outdated_stages(ctx)
    assert requeued == 2
    assert parked == 2 * 5  # classify_matter .. index, per done object
    for oid in done_ids:
        r = rows(ctx, oid)
        assert (r["fetch"]["status"], r["fetch"]["producer_version"]) == ("done", "mvp-1")
        assert (r["convert"]["status"], r["convert"]["attempts"], r["convert"]["last_error"]) == ("pending", 0, None)
        for stage in PIPELINE_STAGE_ORDER[2:]:
            assert (r[stage]["status"], r[stage]["reason"], r[stage]["producer_version"]) == (
                "skipped", WAITING_FOR_PREVIOUS_STAGE, None)
    # quarantined rows are not reclaimed; waiting rows (no recorded version) are untouched
    assert rows(ctx, poisoned) == before_poisoned
    assert rows(ctx, late) == before_late
    assert prepare.requeue_outdated_stages(ctx) == (0, 0)  # idempotent

    monkeypatch.setitem(STAGE_HANDLERS, "convert", real_convert)
    summary = launch_insertion(ctx, wait_for_retries_seconds=0)
    assert summary.status == "completed"
    for oid in [*done_ids, late]:
        r = rows(ctx, oid)
        assert buckets(ctx, oid) == expected_done_buckets()
        assert r["convert"]["producer_version"] == "mvp-1+tok"
        assert r["index"]["producer_version"] == "mvp-1+tok2"
        assert r["fetch"]["producer_version"] == "mvp-1"
    for oid in done_ids:
        r = rows(ctx, oid)
        assert (r["fetch"]["completions"], r["convert"]["completions"], r["index"]["completions"]) == (1, 2, 2)
    assert rows(ctx, poisoned)["convert"]["status"] == "quarantined"


def test_version_bump_of_a_later_stage_leaves_earlier_stages_alone(ctx, src):
    (oid,) = make_source(ctx, src, 1)
    launch_insertion(ctx, wait_for_retries_seconds=0)
    configure(ctx, stages__index__rerun_token="again")
    summary = launch_insertion(ctx, wait_for_retries_seconds=0)  # the run's prepare step requeues
    assert (summary.counters.processed, summary.counters.done) == (1, 1)
    r = rows(ctx, oid)
    assert (r["fetch"]["completions"], r["convert"]["completions"], r["index"]["completions"]) == (1, 1, 2)
    assert r["index"]["producer_version"] == "mvp-1+again"
