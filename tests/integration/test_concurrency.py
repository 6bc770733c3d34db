"""Exactly-once under real concurrency: several OS processes, kill -9, and fencing.

DESIGN.md "Leases with fencing" (a completion commits only while the row holds the
claim token; stale-claim recovery runs at the start of a run and periodically during
it) and "Exactly once" (one committed completion per (document, stage); a handler may
run again after a lost claim, its second commit is refused). Every runner here is a
separate OS process (``tests/helpers/run_worker.py``) on the same PostgreSQL database.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.core.taxonomies import DISABLED_BY_CONFIGURATION, PIPELINE_STAGE_ORDER, WAITING_FOR_PREVIOUS_STAGE
from ki.orchestration.execute import execute_claim
from ki.stages import STAGE_HANDLERS
from ki.store import claims as q
from ki.store import stale_claims

HELPER = Path(__file__).resolve().parents[1] / "helpers" / "run_worker.py"


def _write_docs(root: Path, n: int) -> dict[str, str]:
    """``n`` tiny distinct text documents; returns external_id → sha256."""
    root.mkdir(parents=True, exist_ok=True)
    hashes = {}
    for i in range(n):
        name = f"d{i // 100:02d}/doc-{i:04d}.txt"
        body = f"Aktennotiz {i}\nVertrag Nummer {i:04d} zwischen Partei A{i} und Partei B{i}.\n".encode()
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        hashes[name] = hashlib.sha256(body).hexdigest()
    return hashes


def _enabled(ctx) -> list[str]:
    return [s for s in PIPELINE_STAGE_ORDER if ctx.config.pipeline.stage(s).enabled]


def _spawn(db_url: str, data_dir: Path, *, workers: int, start_file: Path | None = None,
           extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KI_")}
    env.update(extra_env or {})
    cmd = [sys.executable, str(HELPER), "--db-url", db_url, "--data-dir", str(data_dir), "--workers", str(workers)]
    if start_file is not None:
        cmd += ["--start-file", str(start_file)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen, timeout: float) -> tuple[dict, str]:
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        pytest.fail(f"runner process {proc.pid} did not finish in {timeout} s\n{stderr[-3000:]}")
    assert proc.returncode == 0, f"runner {proc.pid} exited {proc.returncode}\n{stderr[-3000:]}"
    return json.loads(stdout.strip().splitlines()[-1]), stderr


def _state_rows(ctx) -> list:
    with ctx.db.engine.connect() as conn:
        return conn.execute(text("""
            SELECT so.external_id, ps.stage, ps.status, ps.reason, ps.completions, ps.attempts, ps.run_id,
                   ps.last_error, ps.claim_token
            FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
            ORDER BY so.external_id, ps.stage""")).fetchall()


def _handler_skip(r) -> bool:
    """The handler's own verdict "nothing to do" (e.g. extract_decisions' no_revision_evidence): a completion."""
    return r.status == "skipped" and r.reason not in (DISABLED_BY_CONFIGURATION, WAITING_FOR_PREVIOUS_STAGE)


def _assert_exactly_once(ctx, expected_objects: int) -> None:
    """Every enabled (object, stage) row is done with completions == 1 (or skipped by its handler); disabled ones
    skipped, never done."""
    rows = _state_rows(ctx)
    enabled = set(_enabled(ctx))
    assert len(rows) == expected_objects * len(PIPELINE_STAGE_ORDER)
    bad = [(r.external_id, r.stage, r.status, r.reason, r.completions) for r in rows
           if (r.stage in enabled and not _handler_skip(r) and (r.status != "done" or r.completions != 1))
           or (r.stage not in enabled and (r.status, r.reason, r.completions)
               != ("skipped", DISABLED_BY_CONFIGURATION, 0))]
    assert not bad, f"{len(bad)} rows are not exactly-once, e.g. {bad[:10]}"
    assert all(r.claim_token is None for r in rows)


# The claim machinery is what is under test: the model stages (whose rules read whole folders)
# are switched off so 500 documents in one folder stay a few minutes of work on 2 cores.
MODEL_STAGES_OFF = {f"KI_PIPELINE__STAGES__{s.upper()}__ENABLED": "false"
                    for s in ("classify_matter", "relate", "extract_metadata", "extract_decisions")}


@pytest.mark.slow
def test_three_processes_complete_every_stage_exactly_once(make_ctx, db_url, data_dir, tmp_path, monkeypatch):
    for key, value in MODEL_STAGES_OFF.items():
        monkeypatch.setenv(key, value)
    ctx = make_ctx()
    hashes = _write_docs(tmp_path / "estate", 500)
    source_id = register_local_source(ctx, tmp_path / "estate")
    report = scan_source(ctx, source_id)
    assert report.new == 500

    start = tmp_path / "go"
    procs = [_spawn(db_url, data_dir, workers=3, start_file=start, extra_env=MODEL_STAGES_OFF) for _ in range(3)]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("go.ready.*"))) < len(procs):
        for p in procs:
            if p.poll() is not None:
                pytest.fail(f"runner {p.pid} exited early: {p.communicate()[1][-3000:]}")
        assert time.monotonic() < deadline, "runner processes did not get ready"
        time.sleep(0.02)
    start.touch()  # all three start claiming at the same instant
    results = [_result(p, timeout=300)[0] for p in procs]

    assert [r["status"] for r in results] == ["completed"] * 3
    enabled = _enabled(ctx)
    total = {k: sum(r["counters"][k] for r in results) for k in ("done", "skipped", "retried", "quarantined",
                                                                   "claim_lost")}
    # each (object, stage) was executed and committed by exactly one process
    handler_skips = sum(_handler_skip(r) for r in _state_rows(ctx) if r.stage in enabled)
    assert total["done"] == 500 * len(enabled) - handler_skips
    assert total["skipped"] == 500 * (len(PIPELINE_STAGE_ORDER) - len(enabled)) + handler_skips
    assert total["retried"] == total["quarantined"] == total["claim_lost"] == 0
    _assert_exactly_once(ctx, 500)

    with ctx.db.engine.connect() as conn:
        blobs = dict(conn.execute(text("SELECT content_hash, size FROM blob")).fetchall())
        artifacts = conn.execute(text(
            "SELECT content_hash, count(*) FROM artifact WHERE kind = 'structured_json' GROUP BY content_hash"
        )).fetchall()
        stored = dict(conn.execute(text("SELECT external_id, content_hash FROM source_object")).fetchall())
        runs = conn.execute(text("SELECT count(DISTINCT run_id) FROM processing_state")).scalar_one()
        chunked = conn.execute(text("SELECT count(DISTINCT source_object_id) FROM chunk")).scalar_one()
    assert stored == hashes
    assert set(blobs) == set(hashes.values())  # each blob once
    assert len(artifacts) == len(hashes) and all(n == 1 for _, n in artifacts)
    assert chunked == 500
    assert all(ctx.blobs.exists(h) for h in hashes.values())
    assert runs >= 2, "the work was not shared between the processes"


@pytest.mark.slow
def test_kill_9_mid_stage_is_recovered_by_the_next_runner(make_ctx, db_url, data_dir, tmp_path):
    ctx = make_ctx()
    _write_docs(tmp_path / "estate", 12)
    slow_id = "d00/doc-0005.txt"
    source_id = register_local_source(ctx, tmp_path / "estate")
    scan_source(ctx, source_id)
    with ctx.db.engine.connect() as conn:
        slow_oid = conn.execute(text("SELECT id FROM source_object WHERE external_id = :e"),
                                {"e": slow_id}).scalar_one()

    first = _spawn(db_url, data_dir, workers=2, extra_env={"KI_TEST_SLOW_FETCH": f"{slow_id}:300"})
    try:
        deadline = time.monotonic() + 60
        while True:
            with ctx.db.engine.connect() as conn:
                row = conn.execute(text("SELECT status, claimed_by, attempts FROM processing_state "
                                        "WHERE source_object_id = :o AND stage = 'fetch'"), {"o": slow_oid}).one()
            if row.status == "running":
                break
            assert first.poll() is None, f"first runner exited: {first.communicate()[1][-3000:]}"
            assert time.monotonic() < deadline, "the slow fetch was never claimed"
            time.sleep(0.05)
        assert row.claimed_by.split(":")[1] == str(first.pid) and row.attempts == 1
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == -signal.SIGKILL

    second = _spawn(db_url, data_dir, workers=2, extra_env={"KI_PIPELINE__CLAIM_TIMEOUT_SECONDS": "2",
                                                            "KI_TEST_WATCH_ID": slow_id})
    result, stderr = _result(second, timeout=60)
    assert result["status"] == "completed"
    assert result["stale_recovered"] >= 1, stderr[-2000:]
    # the second runner ran the recovered row itself: its previous attempt ended as StaleClaim
    # naming the killed worker, and this is attempt 2
    assert len(result["watched"]) == 1, result["watched"]
    seen = result["watched"][0]
    assert seen["claim_attempts"] == 2 and seen["status"] == "running"
    assert seen["last_error"]["class"] == "StaleClaim"
    assert f":{first.pid}" in seen["last_error"]["message"]

    with ctx.db.engine.connect() as conn:
        row = conn.execute(text("SELECT status, attempts, completions, run_id FROM processing_state "
                                "WHERE source_object_id = :o AND stage = 'fetch'"), {"o": slow_oid}).one()
    assert (row.status, row.attempts, row.completions, row.run_id) == ("done", 2, 1, result["run_id"])
    _assert_exactly_once(ctx, 12)


@pytest.mark.slow
def test_a_killed_runner_of_this_host_is_recovered_at_once_not_after_the_timeout(make_ctx, db_url, data_dir,
                                                                              tmp_path):
    """Issue 14 item 2: the claim names host, pid and start time; the next runner sees the pid gone and
    recovers the row at once (the default claim_timeout_seconds, 900 s, is never waited for)."""
    ctx = make_ctx()
    _write_docs(tmp_path / "estate", 4)
    slow_id = "d00/doc-0002.txt"
    scan_source(ctx, register_local_source(ctx, tmp_path / "estate"))
    first = _spawn(db_url, data_dir, workers=2, extra_env={"KI_TEST_SLOW_FETCH": f"{slow_id}:300"})
    try:
        deadline = time.monotonic() + 60
        while True:
            with ctx.db.engine.connect() as conn:
                held = conn.execute(text("SELECT ps.claimed_by FROM processing_state ps JOIN source_object so "
                                         "ON so.id = ps.source_object_id WHERE so.external_id = :e "
                                         "AND ps.stage = 'fetch' AND ps.status = 'running'"),
                                    {"e": slow_id}).scalar()
            if held:
                break
            assert first.poll() is None, f"first runner exited: {first.communicate()[1][-3000:]}"
            assert time.monotonic() < deadline, "the slow fetch was never claimed"
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    host, pid, start = held.split(":")
    assert int(pid) == first.pid and int(start) > 0
    started = time.monotonic()
    second = _spawn(db_url, data_dir, workers=2, extra_env={"KI_TEST_WATCH_ID": slow_id})
    result, stderr = _result(second, timeout=120)
    assert result["status"] == "completed"
    assert time.monotonic() - started < 100  # at load 30; the claim timeout is 900 s
    seen = result["watched"][0]
    assert seen["claim_attempts"] == 2
    assert seen["last_error"]["message"] == f"worker {held} is gone (its process ended): claim recovered at once"
    _assert_exactly_once(ctx, 4)


def test_late_commit_of_a_recovered_claim_is_refused(ctx, tmp_path, monkeypatch):
    real_fetch = STAGE_HANDLERS["fetch"]
    root = tmp_path / "src"
    root.mkdir()
    (root / "memo.txt").write_text("Vermerk zur Kündigung des Mietvertrags.\n", encoding="utf-8")
    source_id = register_local_source(ctx, root)
    scan_source(ctx, source_id)
    with ctx.db.engine.connect() as conn:
        oid = conn.execute(text("SELECT id FROM source_object")).scalar_one()

    def row():
        with ctx.db.engine.connect() as conn:
            return conn.execute(text("SELECT status, attempts, completions, claim_token, claimed_by, last_error "
                                     "FROM processing_state WHERE source_object_id = :o AND stage = 'fetch'"),
                                {"o": oid}).one()

    with ctx.db.engine.begin() as conn:
        first = q.claim_row(conn, oid, "fetch", worker="host-a:1", run_id=None)
    assert first is not None
    with ctx.db.engine.begin() as conn:  # worker A falls silent
        conn.execute(text("UPDATE processing_state SET heartbeat_at = now() - interval '1 hour' WHERE id = :id"),
                     {"id": first.row_id})
        assert stale_claims.recover_stale_claims(conn, timeout_seconds=60, max_attempts={"fetch": 3}) == 1
    assert row().status == "failed" and row().last_error["class"] == "StaleClaim"
    with ctx.db.engine.begin() as conn:
        second = q.claim_row(conn, oid, "fetch", worker="host-b:2", run_id=None)
    assert second is not None and second.token != first.token and second.attempts == 2

    # while B holds the row, A can neither renew nor record a success or a failure
    with ctx.db.engine.begin() as conn:
        assert q.renew_claim(conn, first) is False
        assert q.complete_claim(conn, first, status="done", producer_version="mvp-1", last_error=None) is None

    def failing_fetch(stage_ctx):
        raise RuntimeError("A's late attempt failed")

    monkeypatch.setitem(STAGE_HANDLERS, "fetch", failing_fetch)
    assert execute_claim(ctx, first).kind == "claim_lost"
    monkeypatch.setitem(STAGE_HANDLERS, "fetch", real_fetch)
    held = row()
    assert (held.status, held.claimed_by, held.attempts) == ("running", "host-b:2", 2)
    assert held.last_error["class"] == "StaleClaim"  # A's failure was not written either

    # B finishes through the real executor
    assert execute_claim(ctx, second).kind == "done"
    after_b = row()
    assert (after_b.status, after_b.completions, after_b.claim_token) == ("done", 1, None)

    # A wakes up, runs its handler to the end and tries to commit: refused, nothing changes
    late = execute_claim(ctx, first)
    assert late.kind == "claim_lost"
    with ctx.db.engine.begin() as conn:
        assert q.complete_claim(conn, first, status="done", producer_version="mvp-1", last_error=None) is None
    final = row()
    assert (final.status, final.attempts, final.completions) == ("done", 2, 1)
    with ctx.db.engine.connect() as conn:
        nxt = conn.execute(text("SELECT status, completions FROM processing_state "
                                "WHERE source_object_id = :o AND stage = 'convert'"), {"o": oid}).one()
    assert (nxt.status, nxt.completions) == ("pending", 0)  # unlocked once, by B
