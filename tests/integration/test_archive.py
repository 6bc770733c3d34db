"""Cold history (``ki archive``; ki.orchestration.archive, ki.store.archive) on real runs and a real kill -9.

1. A real estate is inserted (one corrupt PDF quarantines), two of its files are deleted and tombstoned by three
   scans; an archival pass 31 days on (the injected ``now``), in batches of 3, moves the finished runs with their
   members, the attempt history and the 14 state rows of the two tombstoned files: every table's live + archived
   rows equal what was there before, no row is in both, the bucket counts are identical, and the cold history
   keeps public ids and provenance. ``GET /v1/work-items/{id}`` of an archived item restores its file's rows (same
   ids, same public ids, the whole attempt history); archived again, a retry of it restores and releases it.
2. ``ki archive`` killed with SIGKILL during a pass over 200,000 attempt entries: every entry is live or archived,
   exactly once; the next pass moves the rest.
Cost: ~40-80 s.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.api.app import create_app
from ki.app.launch import launch_insertion
from ki.orchestration.archive import archive_history
from ki.store.status import bucket_counts
from tests.helpers.console import make_tokens

KI = Path(sys.executable).parent / "ki"
MODEL_STAGES_OFF = {"pipeline": {"stages": {s: {"enabled": False} for s in
                                            ("classify_matter", "relate", "extract_metadata", "extract_decisions")}}}
TABLES = ("processing_state", "work_item_attempt", "pipeline_runs", "pipeline_run_object", "audit_log")


def _counts(conn) -> dict[str, tuple[int, int]]:
    return {t: (conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one(),
                conn.execute(text(f"SELECT count(*) FROM {t}_archive")).scalar_one()) for t in TABLES}


def _in_both(conn) -> int:
    return sum(conn.execute(text(f"SELECT count(*) FROM {t} l JOIN {t}_archive a USING ({key})")).scalar_one()
               for t, key in (("processing_state", "id"), ("work_item_attempt", "id"), ("pipeline_runs", "id"),
                              ("audit_log", "id"), ("pipeline_run_object", "run_id, source_object_id")))


def test_archive_keeps_counts_and_a_read_or_retry_restores(make_ctx, data_dir, tmp_path):
    (data_dir / "config.json").write_text(json.dumps(MODEL_STAGES_OFF))
    root = tmp_path / "akten"
    root.mkdir()
    for i in range(5):
        (root / f"brief-{i}.txt").write_text(f"Schreiben {i} an die Mandantschaft.\n", encoding="utf-8")
    (root / "kaputt.pdf").write_bytes(b"%PDF-1.4\n this is no PDF at all\n")
    ctx = make_ctx(workers=2, insert_wait_retry_seconds=0)
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    assert launch_insertion(ctx).status == "completed"
    with ctx.db.engine.connect() as conn:
        broken = conn.execute(text(
            "SELECT ps.work_item_id, ps.id, ps.source_object_id FROM processing_state ps JOIN source_object so "
            "ON so.id = ps.source_object_id WHERE so.external_id = 'kaputt.pdf' AND ps.status = 'quarantined'")).one()
    (root / "kaputt.pdf").unlink()
    (root / "brief-0.txt").unlink()
    for _ in range(ctx.config.pipeline.deletion_confirmations):
        scan_source(ctx, sid)
    assert launch_insertion(ctx).status == "completed"
    with ctx.db.engine.begin() as conn:
        gone = conn.execute(text("SELECT count(*) FROM source_object WHERE deleted_at IS NOT NULL")).scalar_one()
        conn.execute(text("INSERT INTO audit_log (actor, action, details) VALUES ('cli', 'test_entry', '{}')"))
        before, buckets = _counts(conn), bucket_counts(conn)
        history_before = conn.execute(text("SELECT count(*) FROM work_item_attempt WHERE processing_state_id = :r"),
                                      {"r": broken.id}).scalar_one()
    assert gone == 2 and history_before >= 1

    report = archive_history(ctx, now=datetime.now(UTC) + timedelta(days=31), batch_size=3)
    with ctx.db.engine.connect() as conn:
        after, buckets_after = _counts(conn), bucket_counts(conn)
        assert _in_both(conn) == 0
        archived_objects = conn.execute(text("SELECT count(DISTINCT source_object_id) FROM processing_state_archive"
                                             )).scalar_one()
        live_of_gone = conn.execute(text("SELECT count(*) FROM processing_state ps JOIN source_object so ON so.id = "
                                         "ps.source_object_id WHERE so.deleted_at IS NOT NULL")).scalar_one()
    assert buckets_after == buckets  # exact: the archived rows are still counted
    for t in TABLES:
        assert sum(after[t]) == before[t][0], (t, before[t], after[t])  # nothing lost, nothing doubled
    assert report.state_rows == 14 and archived_objects == 2 and live_of_gone == 0
    assert report.runs == before["pipeline_runs"][0] and after["pipeline_runs"] == (0, report.runs)
    assert report.audit_entries == 1 and report.attempts > 0 and report.batches > 5

    tokens = make_tokens(ctx.db.engine)
    admin = {"Authorization": f"Bearer {tokens.values['admin']}"}
    app = create_app(ctx)
    with TestClient(app) as client:
        item = client.get(f"/v1/work-items/work_item:{broken.work_item_id}", headers=admin)
        assert item.status_code == 200, item.text
        body = item.json()
        assert body["id"] == f"work_item:{broken.work_item_id}" and body["status"] == "failed"
        assert len(body["history"]) == history_before
        with ctx.db.engine.connect() as conn:
            back = conn.execute(text("SELECT id, work_item_id FROM processing_state WHERE source_object_id = :o"),
                                {"o": broken.source_object_id}).all()
            assert bucket_counts(conn) == buckets
        assert len(back) == 7 and (broken.id, broken.work_item_id) in {(r.id, r.work_item_id) for r in back}

        again = archive_history(ctx, now=datetime.now(UTC) + timedelta(days=31), batch_size=50)
        assert again.state_rows == 7
        retried = client.post(f"/v1/work-items/work_item:{broken.work_item_id}/retry", headers=admin)
        assert retried.status_code == 200, retried.text
        # the retry launched a run (in a thread of the app's): it ends once the released row is taken again
        assert app.state.ki.launcher.wait_idle(120)
    with ctx.db.engine.connect() as conn:
        row = conn.execute(text("SELECT status, attempts, work_item_id, last_error FROM processing_state "
                                "WHERE id = :r"), {"r": broken.id}).one()
        assert conn.execute(text("SELECT count(*) FROM processing_state_archive WHERE source_object_id = :o"),
                            {"o": broken.source_object_id}).scalar_one() == 0
        outcomes = list(conn.execute(text("SELECT outcome FROM work_item_attempt WHERE processing_state_id = :r "
                                          "ORDER BY id"), {"r": broken.id}).scalars())
    # released (a fresh budget) and run once more by the retry's run: the file is gone, so the stage is skipped
    assert (row.work_item_id, row.status, row.attempts) == (broken.work_item_id, "skipped", 1), row.last_error
    assert len(outcomes) > history_before and outcomes[0] == "quarantined" and outcomes[-1] == "skipped", outcomes


def test_kill_9_during_archival_loses_nothing(make_ctx, db_url, data_dir):
    ctx = make_ctx()
    n = 200_000
    with ctx.db.engine.begin() as conn:
        conn.execute(text("""
            INSERT INTO work_item_attempt (processing_state_id, source_object_id, stage, attempt, outcome, started_at,
                                           finished_at, worker, duration_seconds)
            SELECT g % 5000, g % 5000, 'fetch', 1, 'done', now() - interval '90 days', now() - interval '90 days',
                   'bench', 0.01
            FROM generate_series(1, :n) g"""), {"n": n})
    env = {k: v for k, v in os.environ.items() if not k.startswith("KI_")} | {
        "KI_DATA_DIR": str(data_dir), "KI_DATABASE_URL": db_url}
    proc = subprocess.Popen([str(KI), "archive", "--batch-size", "1000"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while True:
            with ctx.db.engine.connect() as conn:
                moved = conn.execute(text("SELECT count(*) FROM work_item_attempt_archive")).scalar_one()
            if moved >= 5000:
                break
            assert proc.poll() is None, f"ki archive ended before it was killed: {proc.stderr.read()[-2000:]}"
            assert time.monotonic() < deadline, "ki archive moved nothing"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with ctx.db.engine.connect() as conn:
        live, cold = (conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()
                      for t in ("work_item_attempt", "work_item_attempt_archive"))
        both = conn.execute(text("SELECT count(*) FROM work_item_attempt l JOIN work_item_attempt_archive a "
                                 "USING (id)")).scalar_one()
        unfinished = conn.execute(text("SELECT count(*) FROM archive_log WHERE finished_at IS NULL")).scalar_one()
    assert live + cold == n and both == 0 and 0 < cold < n, (live, cold)
    assert unfinished == 1  # the killed pass never closed its log row
    finished = subprocess.run([str(KI), "archive", "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert json.loads(finished.stdout)["attempts"] == live
    with ctx.db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM work_item_attempt")).scalar_one() == 0
        assert conn.execute(text("SELECT count(*) FROM work_item_attempt_archive")).scalar_one() == n
