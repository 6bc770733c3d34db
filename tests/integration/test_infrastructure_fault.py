"""An outage during a run costs time, never documents.

Spec: insertion-pipeline.md "Retry policy and quarantine" ("Why infrastructure
faults are exempt"): a saturated or restarting gateway / an unmounted share says
nothing about a file, so no document may be quarantined by it, however many
attempts it takes. The fault is injected into our own fetch stage (a wrapper in
``STAGE_HANDLERS`` that raises, then calls the real handler); the store is real.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.core.errors import SourceUnavailable
from ki.core.taxonomies import PIPELINE_STAGE_ORDER, stage_bucket
from ki.domain.context import PipelineContext, StageContext
from ki.stages import STAGE_HANDLERS
from ki.store.status import bucket_counts

# The outage is injected into fetch; the model stages are switched off so the assertions are about
# fetch's rows and the run stays short.
MODEL_STAGES = ("classify_matter", "relate", "extract_metadata", "extract_decisions")


@pytest.fixture(autouse=True)
def _model_stages_off(monkeypatch):
    for stage in MODEL_STAGES:
        monkeypatch.setenv(f"KI_PIPELINE__STAGES__{stage.upper()}__ENABLED", "false")

N_DOCS = 30
MAX_ATTEMPTS = 2  # low on purpose: infrastructure faults must ignore it


def make_corpus(ctx: PipelineContext, root: Path, n: int) -> list[int]:
    root.mkdir(parents=True)
    for i in range(n):
        (root / f"akte-{i:02d}.txt").write_text(
            f"Aktenvermerk {i}: Besprechung mit der Gegenseite über Klausel {i}.\n", encoding="utf-8")
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    with ctx.db.engine.connect() as conn:
        return [r.id for r in conn.execute(text("SELECT id FROM source_object WHERE source_id = :s ORDER BY id"),
                                           {"s": sid})]


def state_rows(ctx: PipelineContext) -> list:
    with ctx.db.engine.connect() as conn:
        return conn.execute(text("SELECT source_object_id, stage, status, reason, attempts, last_error "
                                 "FROM processing_state")).all()


class FlakyFetch:
    """Raises ``exc_factory()`` while ``failing()`` says so, then calls the real fetch handler.

    Records how many times each object failed.
    """

    def __init__(self, real, exc_factory, failing):
        self.real = real
        self.exc_factory = exc_factory
        self.failing = failing
        self.failures: Counter[int] = Counter()
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, sctx: StageContext):
        with self.lock:
            self.calls += 1
            fail = self.failing(self.calls)
            if fail:
                self.failures[sctx.obj.id] += 1
        if fail:
            raise self.exc_factory()
        return self.real(sctx)


def for_first_calls(n: int):
    return lambda call: call <= n


def for_first_seconds(seconds: float):
    """Fail for ``seconds`` of wall time, and in any case every document's first fetch (a slow machine
    must not let a document slip past the outage)."""
    start = time.monotonic()
    return lambda call: call <= N_DOCS or time.monotonic() - start < seconds


REQUEST = httpx.Request("POST", "http://gateway.invalid/v1/embeddings")

FAULTS = {
    "source-unavailable-2s": (
        lambda: SourceUnavailable("share unmounted", infrastructure="source root missing: /mnt/akten"),
        lambda: for_first_seconds(2.0),
        "source root missing: /mnt/akten",
    ),
    "connect-error-first-75-calls": (
        lambda: httpx.ConnectError("connection refused", request=REQUEST),
        lambda: for_first_calls(75),
        "transport error: ConnectError",
    ),
    "http-503-first-100-calls": (
        lambda: httpx.HTTPStatusError("busy", request=REQUEST, response=httpx.Response(503, request=REQUEST)),
        lambda: for_first_calls(100),
        "gateway answered HTTP 503",
    ),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_outage_during_fetch_quarantines_nothing(make_ctx, tmp_path, monkeypatch, fault):
    exc_factory, failing_factory, infrastructure = FAULTS[fault]
    monkeypatch.setenv("KI_PIPELINE__RETRY_BASE_SECONDS", "0.02")
    ctx = make_ctx(workers=4, infrastructure_retry_max_seconds=0.25)
    set_config_value(ctx.settings.data_dir, "pipeline.stages.fetch.max_attempts", MAX_ATTEMPTS)
    ids = make_corpus(ctx, tmp_path / "akten", N_DOCS)
    flaky = FlakyFetch(STAGE_HANDLERS["fetch"], exc_factory, failing_factory())
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", flaky)

    # the outage is visible on the rows while it lasts: infrastructure reason, never quarantined
    seen_infrastructure: set[str] = set()

    def on_tick(status):
        with ctx.db.engine.connect() as conn:
            for (reason,) in conn.execute(text(
                    "SELECT DISTINCT last_error->>'infrastructure' FROM processing_state "
                    "WHERE status = 'failed'")):
                seen_infrastructure.add(reason)
            assert conn.execute(text("SELECT count(*) FROM processing_state WHERE status = 'quarantined'")
                                ).scalar() == 0

    started = time.monotonic()
    summary = launch_insertion(ctx, trigger="test", wait_for_retries_seconds=30, on_tick=on_tick)
    elapsed = time.monotonic() - started
    assert ctx.config.pipeline.retry_base_seconds == 0.02  # the env pin took effect
    assert summary.status == "completed"

    total_failures = sum(flaky.failures.values())
    assert total_failures >= N_DOCS  # every document met the outage at least once
    affected = set(flaky.failures)
    assert affected == set(ids)
    assert max(flaky.failures.values()) > MAX_ATTEMPTS  # the attempt limit was really crossed

    c = summary.counters
    n_model = len(MODEL_STAGES)
    n_done = len(PIPELINE_STAGE_ORDER) - n_model
    assert c.quarantined == 0
    assert c.retried == total_failures
    assert (c.done, c.skipped) == (N_DOCS * n_done, N_DOCS * n_model)
    assert c.processed == N_DOCS * len(PIPELINE_STAGE_ORDER) + total_failures

    rows = state_rows(ctx)
    assert len(rows) == N_DOCS * len(PIPELINE_STAGE_ORDER)
    for r in rows:
        bucket = stage_bucket(r.status, r.reason)
        assert bucket == ("disabled" if r.stage in MODEL_STAGES else "done"), r
        if r.stage == "fetch":
            assert r.attempts == flaky.failures[r.source_object_id] + 1
            assert r.last_error is None  # the outage is history once the stage is done
        else:  # switched-off stages are recorded on the way, never claimed
            assert r.attempts == (0 if r.stage in MODEL_STAGES else 1)
    assert any(r.stage == "fetch" and r.attempts > MAX_ATTEMPTS for r in rows)
    assert seen_infrastructure <= {infrastructure}

    with ctx.db.engine.connect() as conn:
        counts = bucket_counts(conn)
        run = conn.execute(text("SELECT status, processed, retried, quarantined FROM pipeline_runs WHERE id = :id"),
                           {"id": summary.run_id}).one()
        chunks = conn.execute(text("SELECT count(DISTINCT source_object_id) FROM chunk")).scalar()
    assert counts["fetch"]["done"] == N_DOCS and counts["fetch"]["quarantined"] == 0
    assert tuple(run) == ("completed", c.processed, total_failures, 0)
    assert chunks == N_DOCS
    assert elapsed < 30  # backoff is capped: the outage delays the run by about its own length


def test_outage_rows_carry_the_infrastructure_reason_while_waiting(make_ctx, tmp_path, monkeypatch):
    """Mid-outage snapshot: failed rows name the outage and are past their attempt limit, none quarantined."""
    # backoff of 1 s: long enough for a run that does not wait for retries to end between attempts
    # (an outage retried every few milliseconds keeps a run busy for as long as the outage lasts)
    monkeypatch.setenv("KI_PIPELINE__RETRY_BASE_SECONDS", "1")
    ctx = make_ctx(workers=2, infrastructure_retry_max_seconds=1)
    set_config_value(ctx.settings.data_dir, "pipeline.stages.fetch.max_attempts", 1)
    ids = make_corpus(ctx, tmp_path / "akten", 5)
    flaky = FlakyFetch(STAGE_HANDLERS["fetch"],
                       lambda: SourceUnavailable("share gone", infrastructure="source root missing: /mnt/akten"),
                       lambda call: True)
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", flaky)
    # a run that does not wait for retries ends with every fetch failed, awaiting retry
    summary = launch_insertion(ctx, wait_for_retries_seconds=0)
    assert summary.counters.quarantined == 0
    rows = [r for r in state_rows(ctx) if r.stage == "fetch"]
    assert {r.source_object_id for r in rows} == set(ids)
    for r in rows:
        assert r.status == "failed"
        assert r.attempts >= 1
        assert r.attempts == flaky.failures[r.source_object_id]
        assert r.last_error["class"] == "SourceUnavailable"
        assert r.last_error["infrastructure"] == "source root missing: /mnt/akten"
        assert r.last_error["reason"] == "source_missing"
        assert r.last_error["deterministic"] is False
    # the share comes back: the next run finishes everything, still nothing quarantined
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", flaky.real)
    summary = launch_insertion(ctx, wait_for_retries_seconds=5)
    assert summary.counters.quarantined == 0
    for r in state_rows(ctx):
        assert stage_bucket(r.status, r.reason) == ("disabled" if r.stage in MODEL_STAGES else "done")
