"""Run one ki insertion runner in its own OS process (used by tests/integration/test_concurrency.py).

Usage::

    python tests/helpers/run_worker.py --db-url URL --data-dir DIR [--workers N] [--start-file PATH]

The database URL and data directory reach ki the way they reach a real process: through
``KI_DATABASE_URL`` and ``KI_DATA_DIR`` (any other ``KI_*`` variable, e.g.
``KI_PIPELINE__CLAIM_TIMEOUT_SECONDS``, is read by ki itself). The process opens a
``PipelineContext``, writes ``<start-file>.ready.<pid>`` and waits until ``--start-file``
exists (so several processes start claiming at the same instant), then calls
``launch_insertion`` and prints one JSON line on stdout:
``{"pid", "worker_id", "run_id", "status", "error", "counters", "stale_recovered", "watched"}``
(``stale_recovered``: rows this process's stale-claim recovery turned back to failed, at the
start of the run and periodically during it).

Fault injection (test only, read from the environment):

* ``KI_TEST_SLOW_FETCH=<external_id>:<seconds>`` — the ``fetch`` handler sleeps this long
  before fetching that one object (so a test can ``kill -9`` the process mid-stage).
* ``KI_TEST_WATCH_ID=<external_id>`` — when the ``fetch`` handler starts for that object it
  records the claim's attempt number and the row's ``last_error`` as it stands while running
  (the error of the previous attempt, e.g. ``StaleClaim`` after a recovery) in ``watched``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path


def _install_fault_injection(watched: list[dict]) -> None:
    from sqlalchemy import text

    from ki.stages import STAGE_HANDLERS

    original = STAGE_HANDLERS["fetch"]
    slow_id, slow_seconds = None, 0.0
    if os.environ.get("KI_TEST_SLOW_FETCH"):
        slow_id, _, secs = os.environ["KI_TEST_SLOW_FETCH"].rpartition(":")
        slow_seconds = float(secs)
    watch_id = os.environ.get("KI_TEST_WATCH_ID")

    def fetch(ctx):
        if watch_id and ctx.obj.external_id == watch_id:
            with ctx.pipeline.db.engine.connect() as conn:
                row = conn.execute(text("SELECT attempts, status, last_error FROM processing_state WHERE id = :id"),
                                   {"id": ctx.claim.row_id}).one()
            watched.append({"external_id": watch_id, "claim_attempts": ctx.claim.attempts,
                            "row_attempts": row.attempts, "status": row.status, "last_error": row.last_error})
        if slow_id is not None and ctx.obj.external_id == slow_id:
            time.sleep(slow_seconds)
        return original(ctx)

    STAGE_HANDLERS["fetch"] = fetch


def _count_stale_recoveries(recovered: list[int]) -> None:
    from ki.orchestration import prepare, runner

    original = prepare.recover_stale_claims

    def counting(ctx):
        n = original(ctx)
        recovered.append(n)
        return n

    prepare.recover_stale_claims = counting  # run_prepare_steps (start of the run)
    runner.recover_stale_claims = counting  # the runner's periodic recovery


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db-url", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--start-file", default=None)
    args = parser.parse_args()

    os.environ["KI_DATABASE_URL"] = args.db_url
    os.environ["KI_DATA_DIR"] = args.data_dir
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format=f"[pid {os.getpid()}] %(levelname)s %(name)s: %(message)s")

    from ki.app.launch import launch_insertion
    from ki.domain.context import PipelineContext

    watched: list[dict] = []
    recovered: list[int] = []
    _install_fault_injection(watched)
    _count_stale_recoveries(recovered)
    ctx = PipelineContext.open()
    try:
        if args.start_file:
            start = Path(args.start_file)
            Path(f"{start}.ready.{os.getpid()}").touch()
            deadline = time.monotonic() + 120
            while not start.exists():
                if time.monotonic() > deadline:
                    print("start file never appeared", file=sys.stderr)
                    return 4
                time.sleep(0.005)
        summary = launch_insertion(ctx, trigger="test", workers=args.workers, wait_for_retries_seconds=0)
        c = summary.counters
        print(json.dumps({
            "pid": os.getpid(),
            "worker_id": ctx.worker_id,
            "run_id": summary.run_id,
            "status": summary.status,
            "error": summary.error,
            "counters": {"processed": c.processed, "done": c.done, "skipped": c.skipped, "retried": c.retried,
                         "quarantined": c.quarantined, "claim_lost": c.claim_lost},
            "stale_recovered": sum(recovered),
            "watched": watched,
        }, default=str), flush=True)
    finally:
        ctx.db.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
