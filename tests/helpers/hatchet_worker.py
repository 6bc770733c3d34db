"""Run ``ki worker`` in its own OS process, with optional test fault injection.

Used by tests/integration/orchestrator/test_hatchet_provider.py and bench/hatchet.py (a worker must not be a daemon
process: the SDK's ``worker.start()`` spawns processes of its own).

Usage::

    python tests/helpers/hatchet_worker.py [--slots N] [--name NAME]

Everything else reaches the worker the way it reaches ``ki worker``: ``KI_DATABASE_URL``,
``KI_DATA_DIR``, ``KI_*`` settings and ``HATCHET_CLIENT_*`` (token, address, namespace).

Fault injection (tests only, read from the environment):

* ``KI_TEST_FAIL_ONCE=<stage>:<external_id>`` — the handler of that stage raises a retryable
  error on its first attempt for that object (the row fails with a retry due later);
* ``KI_TEST_SLOW=<stage>:<seconds>[,<stage>:<seconds>...]`` — that stage's handler sleeps before running (so a test
  can kill a worker or restart the engine mid-stage);
* ``KI_TEST_LOG=<path>`` — every handler call appends ``pid stage object attempt`` to this file
  (and a ``FAILED <class>: <message>`` line when the handler raises).
"""

from __future__ import annotations

import argparse
import logging
import os
import time


def _install_faults() -> None:
    from ki.core.errors import RetryableStageError
    from ki.stages import STAGE_HANDLERS

    fail_stage, _, fail_id = (os.environ.get("KI_TEST_FAIL_ONCE") or "").partition(":")
    slow = {stage: float(seconds) for stage, _, seconds in
            (item.partition(":") for item in (os.environ.get("KI_TEST_SLOW") or "").split(",") if item)}
    log_path = os.environ.get("KI_TEST_LOG")

    def wrap(stage, original):
        def handler(ctx):
            if log_path:
                with open(log_path, "a", encoding="utf-8") as f:
                    f.write(f"{os.getpid()} {stage} {ctx.obj.id} {ctx.claim.attempts}\n")
            if stage in slow:
                time.sleep(slow[stage])
            if stage == fail_stage and ctx.obj.external_id == fail_id and ctx.claim.attempts == 1:
                raise RetryableStageError(f"injected failure of {stage} for {fail_id}")
            try:
                return original(ctx)
            except Exception as exc:
                if log_path:
                    with open(log_path, "a", encoding="utf-8") as f:
                        f.write(f"{os.getpid()} {stage} {ctx.obj.id} {ctx.claim.attempts} "
                                f"FAILED {type(exc).__name__}: {str(exc)[:200]!r}\n")
                raise

        return handler

    for stage, original in list(STAGE_HANDLERS.items()):
        STAGE_HANDLERS[stage] = wrap(stage, original)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--slots", type=int, default=None)
    parser.add_argument("--name", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    _install_faults()
    from ki.app.launch import hand_off_to_insertion
    from ki.workflows.worker import run_worker

    run_worker(hand_off=hand_off_to_insertion, slots=args.slots, name=args.name)


if __name__ == "__main__":
    main()
