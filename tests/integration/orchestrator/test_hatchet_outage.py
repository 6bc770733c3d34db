"""The gateway goes down mid-run of an insertion on the Hatchet provider (issue 14 item 9).

A real engine (the session's hatchet-lite) and a real ``ki worker`` subprocess (8 slots) run every stage
of 20 notes, the model stages on the loopback gateway (``tests/helpers/gateway_stub.py``). After 16
answers the gateway's listening socket is closed (a dead gateway process) for 15 s, then it listens on
the same port again. With the breaker's defaults the worker's stage tasks wait in ``drive_stage`` while
the gateway is paused (``ClaimGate.admit``):

* the pause is recorded (and says the port refuses TCP connections) while the socket is closed;
* no attempt is spent while paused: the model-stage rows' attempts do not move from 2 s after the pause
  was recorded until the socket listens again, and the gateway receives no request meanwhile;
* nothing is quarantined; the run completes after the gateway returns, within 10 s of it listening
  again the first request arrives; every (document, stage) is committed exactly once; the pause is gone.

Found on the way (not the outage's doing): a relate that a later classification re-opens (lane
``rerun``) after its document's DAG ended stayed pending when the Hatchet run completed (1 of 20, every
run). Now the next member's end puts that member back on the conveyor (``conveyor.reopen_finished``,
a new idempotency key per re-opening): the run completes with no row left pending.

Cost: about 40-80 s (15 s of outage; the session's engine start is shared with the other Hatchet tests).
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from ki.adapters.breaker import MODEL_STAGES
from ki.app.launch import launch_insertion
from ki.core.taxonomies import PIPELINE_STAGE_ORDER
from ki.store.pauses import read_pauses
from tests.helpers.gateway_stub import GatewayStub
from tests.helpers.hatchet_harness import configure, q, scan
from tests.helpers.outage import SocketOutage, gateway_refusing, note_estate, stage_answer, wait_until

pytestmark = [pytest.mark.hatchet, pytest.mark.timeout(300)]

DOCUMENTS, SLOTS, DOWN_AFTER, DOWN_SECONDS = 20, 8, 16, 15.0


def _model_attempts(ctx) -> int:
    return q(ctx, "SELECT coalesce(sum(attempts), 0) FROM processing_state WHERE stage = ANY(:s)",
             s=list(MODEL_STAGES))[0][0]


def _quarantined(ctx) -> int:
    return q(ctx, "SELECT count(*) FROM processing_state WHERE status = 'quarantined'")[0][0]


def test_a_gateway_outage_pauses_the_hatchet_tasks_and_the_run_completes(hx, make_ctx, tmp_path, monkeypatch):
    for name in ("KI_BREAKER_FAILURES", "KI_BREAKER_PROBE_SECONDS", "KI_BREAKER_PROBE_MAX_SECONDS",
                 "KI_BREAKER_CONNECT_PROBE_SECONDS"):
        monkeypatch.delenv(name, raising=False)  # the defaults: 3 faults, 1 s → 10 s, TCP checks every 2 s
    root = note_estate(tmp_path / "share", DOCUMENTS, folders=4, folder="Mandat {f:02d}", name="Vermerk {i:03d}.txt",
                       text="Aktenvermerk {i}: Telefonat mit dem Mandanten über die Forderung Nr. 7{i:03d}.")
    with GatewayStub(default=stage_answer) as stub:
        monkeypatch.setenv("KI_LLM_BASE_URL", stub.url)  # the worker inherits the environment
        monkeypatch.setenv("KI_LLM_MODEL", "stub-model")
        ctx = make_ctx(infrastructure_retry_max_seconds=1)
        configure(ctx.settings.data_dir, "hatchet", stages=list(PIPELINE_STAGE_ORDER), retry_base_seconds=0.2)
        hx.start_worker(slots=SLOTS)
        scan(ctx, root)
        ctx.reload_config()
        run_id = launch_insertion(ctx, trigger="test").run_id
        outage = SocketOutage(stub)
        try:
            assert wait_until(lambda: stub.count >= DOWN_AFTER, 180, step=0.05), \
                f"{stub.count} gateway requests\n{hx.diagnostics(ctx)}"
            outage.down()
            shown: list = []
            assert wait_until(gateway_refusing(ctx, shown), DOWN_SECONDS - 4, step=0.1), (shown, hx.diagnostics(ctx))
            time.sleep(2.0)  # the requests in flight when the socket closed have failed by now
            attempts_paused = _model_attempts(ctx)
            wait_until(lambda: False, DOWN_SECONDS - 0.5 - (time.monotonic() - outage.down_at), step=0.2)
            attempts_before_up = _model_attempts(ctx)
            quarantined_during = _quarantined(ctx)
        finally:
            if outage.up_at is None:
                outage.up()
        hx.wait_run(ctx, run_id, timeout=240)
        arrivals = [r.at for r in stub.requests]
        # a relate a later classification re-opens (order independence, relate_basis: lane ``rerun``) after its
        # document's DAG ended is put back on the conveyor by the next member's end (conveyor.reopen_finished):
        # the run completes with nothing left pending (before: 1 of 20 left pending, every time)
        left = q(ctx, "SELECT stage, status, lane FROM processing_state WHERE status NOT IN ('done', 'skipped')")
        assert left == [], left

    assert attempts_before_up == attempts_paused  # paused rows were not claimed: no attempt spent
    assert quarantined_during == 0 and _quarantined(ctx) == 0
    assert outage.accepted_while_down() == 0  # the socket was really closed
    resumed = outage.first_after_up(arrivals)
    assert resumed is not None and resumed <= 10.0, resumed
    rows = q(ctx, "SELECT stage, status, completions, attempts, lane FROM processing_state")
    assert len(rows) == DOCUMENTS * len(PIPELINE_STAGE_ORDER)
    assert {r.status for r in rows} <= {"done", "skipped"}, Counter((r.stage, r.status) for r in rows)
    # each stage committed once; a row re-opened by a rerun (lane ``rerun``: a relate whose basis a later
    # classification changed, inside the run or after its DAG passed it) once more per opening
    assert all(r.completions == 1 for r in rows if r.status == "done" and r.lane != "rerun"), rows
    assert all(r.completions >= 1 for r in rows if r.status == "done" and r.lane == "rerun"), rows
    # (a file classified again into another matter re-runs relate and every later stage in lane ``rerun``)
    assert {r.stage for r in rows if r.lane == "rerun"} <= set(PIPELINE_STAGE_ORDER[PIPELINE_STAGE_ORDER.index(
        "relate"):]), Counter((r.stage, r.lane) for r in rows)
    model = [r for r in rows if r.stage in MODEL_STAGES]
    # the failed attempts: requests in flight when the socket closed and the faults that opened the breaker
    assert sum(r.attempts for r in model) - len(model) <= SLOTS + 3, Counter(r.attempts for r in model)
    with ctx.db.engine.connect() as conn:
        assert read_pauses(conn) == []
    run = q(ctx, "SELECT status, quarantined FROM pipeline_runs WHERE id = :r", r=run_id)[0]
    assert run.status == "completed" and run.quarantined == 0
