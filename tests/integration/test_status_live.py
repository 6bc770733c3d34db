"""``ki status`` while work is under way: active runs with their rate and ETA, the runnable queue, waiting reasons.

The rows are real rows of a real PostgreSQL, put in the states a run leaves them in (claimed and completed by
the run, owed, waiting on the stage before, failed with a retry not yet due), then read through the real
``ki status --json`` command and :func:`ki.cli.live.live_report`.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from sqlalchemy import text

from ki.cli.live import duration, live_report
from ki.store.requeue import seed_rows
from ki.store.runs import create_run
from tests.helpers.postgres import insert_objects


def seeded(ctx, n: int) -> list[int]:
    """``n`` objects with their seven stage rows (fetch pending, the rest waiting), as a scan leaves them."""
    oids = insert_objects(ctx, n)
    with ctx.db.engine.begin() as conn:
        seed_rows(conn, oids)
    return oids


def _states(ctx, oids: list[int], run_id: int) -> None:
    """Six objects: three fetched by the run (one 90 s ago), one owed, one waiting on fetch, one retry due later."""
    a, b, c, d, e, f = oids
    with ctx.db.engine.begin() as conn:
        conn.execute(text("UPDATE processing_state SET status = 'done', run_id = :r, updated_at = now() "
                          "WHERE stage = 'fetch' AND source_object_id = ANY(:o)"), {"r": run_id, "o": [a, b]})
        conn.execute(text("UPDATE processing_state SET status = 'done', run_id = :r, "
                          "updated_at = now() - interval '90 seconds' WHERE stage = 'fetch' AND source_object_id = :o"),
                     {"r": run_id, "o": c})
        conn.execute(text("UPDATE processing_state SET status = 'pending', updated_at = now() - interval '300 seconds' "
                          "WHERE stage = 'fetch' AND source_object_id = :o"), {"o": d})
        conn.execute(text("UPDATE processing_state SET status = 'failed', next_retry_at = now() + interval '1 hour', "
                          "attempts = 1 WHERE stage = 'fetch' AND source_object_id = :o"), {"o": f})


def test_active_run_rate_eta_queue_and_waiting(ctx):
    oids = seeded(ctx, 6)
    with ctx.db.engine.begin() as conn:
        run_id = create_run(conn, kind="insertion", label="test", provider="local", status="running", source_id=None,
                            trigger="cli")
    _states(ctx, oids, run_id)
    report = live_report(ctx)
    (run,) = report["runs"]
    assert run["id"] == run_id and run["status"] == "running"
    assert run["per_second"] == round(2 / 60, 2)  # two executions in the last minute (the third was 90 s ago)
    assert run["owed"] > 0 and run["eta_seconds"] == round(run["owed"] / (2 / 60))
    queue = {q["stage"]: q for q in report["queue"]}
    assert queue["fetch"]["runnable"] == 2 and list(queue["fetch"]["lanes"]) == ["backfill"]  # d and e
    assert queue["fetch"]["oldest_seconds"] >= 299
    waiting = {(w["stage"], w["reason"]): w["rows"] for w in report["waiting"]}
    assert waiting[("fetch", "run_after")] == 1
    assert waiting[("convert", "waiting_for_previous_stage")] == waiting[("index", "waiting_for_previous_stage")] == 6

    shown = subprocess.run([sys.executable, "-m", "ki.cli", "status", "--json"], capture_output=True, text=True,
                           timeout=300)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert [r["id"] for r in data["runs"]] == [run_id]
    assert {(w["stage"], w["reason"]) for w in data["waiting"]} == set(waiting)
    text_out = subprocess.run([sys.executable, "-m", "ki.cli", "status"], capture_output=True, text=True, timeout=300)
    assert f"run {run_id} insertion (local, running)" in text_out.stdout
    assert "retry not yet due" in text_out.stdout and "on the stage before" in text_out.stdout
    assert "runnable: fetch" in text_out.stdout


def test_status_watch_refreshes_until_interrupted(ctx):
    seeded(ctx, 2)
    proc = subprocess.Popen([sys.executable, "-m", "ki.cli", "status", "--watch", "--interval", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = ""
    deadline = time.monotonic() + 240
    try:
        while seen.count("documents by stage") < 3 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen += line
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert seen.count("documents by stage") >= 3, seen + err
    assert proc.returncode == 0 and "Traceback" not in err


def test_durations_read_like_a_person_writes_them():
    assert [duration(s) for s in (None, 9.4, 252, 3 * 3600 + 5 * 60)] == ["-", "9 s", "4 min 12 s", "3 h 05 min"]


def test_status_starts_without_the_ocr_runtime_the_http_client_or_the_orm(ctx):
    """``ki status`` is a report: it finds the OCR wheel and models without importing onnxruntime, and reads its
    counts without the ORM or an HTTP client (``python -X importtime`` lists every module the process imported)."""
    from ki.adapters.convert.ocr_engine import ocr_installed, probe_engine

    seeded(ctx, 1)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "ki.cli", "status", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "ki.store.status" in imported
    assert imported & {"onnxruntime", "rapidocr", "httpx", "ki.store.models", "sqlalchemy.orm"} == set()
    converters = {c["name"]: c["available"] for c in json.loads(proc.stdout)["converters"]}
    assert converters["ocr"] is ocr_installed() is probe_engine().ok is True  # the cheap answer is the probe's
