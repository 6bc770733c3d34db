"""``/metrics`` after real runs: counters equal the run's counters, gauges equal the bucket counts.

The app is the real ``ki serve`` app on a real PostgreSQL, the run a real insertion of the small estate
(two files every converter refuses, so quarantines are counted too). The process's counters are global
(as in ``ki serve``), so each test compares the change across its own run.
"""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ki.core.taxonomies import PIPELINE_STAGE_ORDER
from ki.store.status import bucket_counts
from tests.helpers.console import insert_estate, small_estate
from tests.integration import test_api

pytestmark = pytest.mark.timeout(600)

console = test_api.console  # the fixture: (client, tokens, ctx) of the console app on a fresh database


def scrape(client, headers=None) -> dict[str, dict[tuple, float]]:
    """``{sample name: {sorted label items: value}}`` of one ``GET /metrics``."""
    response = client.get("/metrics", headers=headers or {})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def by_label(samples: dict[tuple, float], label: str) -> dict[str, float]:
    """Sum ``samples`` by one label's value."""
    out: dict[str, float] = {}
    for labels, value in samples.items():
        key = dict(labels)[label]
        out[key] = out.get(key, 0.0) + value
    return out


def delta(after: dict[tuple, float], before: dict[tuple, float]) -> dict[tuple, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0)}


def test_counters_equal_the_run_and_gauges_equal_the_buckets(console, shared, tmp_path):
    client, tokens, ctx = console
    reader = tokens.header("reader")
    before = scrape(client, reader)
    summary = insert_estate(ctx, small_estate(shared, tmp_path))
    assert summary.status == "completed"
    after = scrape(client, reader)

    executions = delta(after["ki_stage_executions_total"], before.get("ki_stage_executions_total", {}))
    outcomes = by_label(executions, "outcome")
    run = client.get("/api/runs", headers=reader).json()["runs"][0]
    assert run["status"] == "completed"
    assert outcomes.get("done", 0) == run["done"] > 0
    assert outcomes.get("quarantined", 0) == run["quarantined"] == 2
    assert outcomes.get("retried", 0) == run["retried"]
    assert outcomes.get("skipped", 0) == run["skipped"]
    assert sum(outcomes.values()) == run["processed"]
    quarantines = delta(after["ki_quarantines_total"], before.get("ki_quarantines_total", {}))
    assert by_label(quarantines, "stage") == {"convert": 2.0}
    assert sum(quarantines.values()) == 2

    # every stage that ran observed its durations; the histogram count equals its executions
    durations = delta(after["ki_stage_duration_seconds_count"], before.get("ki_stage_duration_seconds_count", {}))
    assert by_label(durations, "stage") == by_label(executions, "stage")
    # every claim observed how long its row had waited (runnable -> claimed): one per execution
    waits = delta(after["ki_queue_wait_seconds_count"], before.get("ki_queue_wait_seconds_count", {}))
    assert by_label(waits, "stage") == by_label(executions, "stage")
    waited = delta(after["ki_queue_wait_seconds_sum"], before.get("ki_queue_wait_seconds_sum", {}))
    assert 0 <= sum(waited.values()) < 600 * sum(waits.values())
    assert set(by_label(durations, "stage")) == set(PIPELINE_STAGE_ORDER)
    last = by_label(after["ki_stage_last_success_timestamp_seconds"], "stage")
    assert set(last) == set(PIPELINE_STAGE_ORDER) and min(last.values()) > 1.7e9

    # gauges: the bucket counts of the one bucket query, every stage and bucket present
    with ctx.db.engine.connect() as conn:
        counts = bucket_counts(conn)
    rows = {(dict(k)["stage"], dict(k)["bucket"]): v for k, v in after["ki_processing_state_rows"].items()}
    assert rows == {(s, b): float(n) for s, buckets in counts.items() for b, n in buckets.items()}
    assert rows[("convert", "quarantined")] == 2.0 and rows[("fetch", "done")] == 11.0
    assert "ki_queue_oldest_runnable_age_seconds" not in after  # nothing runnable after a finished run
    assert "ki_dependency_paused" not in after


def test_auth_rules_and_the_open_switch(console, monkeypatch):
    client, tokens, _ = console
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer ki_nope"}).status_code == 401
    assert client.get("/metrics", headers=tokens.header("searcher")).status_code == 403
    text = client.get("/metrics", headers=tokens.header("reader")).text
    assert "# TYPE ki_stage_executions_total counter" in text
    assert "# TYPE ki_processing_state_rows gauge" in text
    monkeypatch.setenv("KI_METRICS_OPEN", "true")
    assert client.get("/metrics").status_code == 200
    monkeypatch.setenv("KI_METRICS_OPEN", "false")
    assert client.get("/metrics").status_code == 401


def test_runnable_rows_show_their_queue_age_and_lane(console, shared, tmp_path):
    """Rows owed but not claimed (a scan without a run) are runnable: counted per stage and lane, with age."""
    client, tokens, ctx = console
    from ki.adapters.sources.scan import register_local_source, scan_source

    source_id = register_local_source(ctx, small_estate(shared, tmp_path))
    scan_source(ctx, source_id)
    samples = scrape(client, tokens.header("reader"))
    runnable = {dict(k)["stage"]: v for k, v in samples["ki_queue_runnable_rows"].items()}
    assert runnable == {"fetch": 11.0}
    ages = {(dict(k)["stage"], dict(k)["lane"]): v for k, v in samples["ki_queue_oldest_runnable_age_seconds"].items()}
    assert list(ages) == [("fetch", "backfill")] and 0.0 <= ages[("fetch", "backfill")] < 600
