"""The gateway goes down for real mid-run: its socket closes, then it listens again (issue 14 item 9).

A real ``launch_insertion`` (local provider, 4 workers, the tests' embedded PostgreSQL) runs the model
stages of 40 documents on the loopback gateway (``tests/helpers/gateway_stub.py``). After 30 answers the
gateway's listening socket is closed (connections refused, as when the gateway process dies) for 20 s,
then it listens on the same port again. With the breaker's defaults (3 faults, HTTP probes 1 s → 10 s,
TCP connect checks every 2 s):

* the requests that met the outage are bounded by the workers in flight plus the faults that opened the
  breaker (calls made while it is open fail fast without a request; the probes are bare TCP connects
  until the port accepts), and every failed attempt of a model-stage row is one of those or a call that
  failed fast;
* the pause says the port refuses TCP connections while it lasts, nothing is quarantined, every row is
  done, the pause is gone;
* the first request reaches the gateway within 10 s of its socket listening again (the server's own
  clock), after at most a few bare connects.

Cost: about 35-60 s (20 s of outage; 40 documents through all stages).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from ki.adapters.breaker import BREAKERS, MODEL_STAGES
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.store.pauses import read_pauses
from tests.helpers.gateway_stub import GatewayStub
from tests.helpers.outage import SocketOutage, gateway_refusing, note_estate, stage_answer, wait_until

pytestmark = pytest.mark.timeout(400)

WORKERS, DOCUMENTS, FAILURES = 4, 40, 3
DOWN_AFTER, DOWN_SECONDS, CONNECT_EVERY = 30, 20.0, 2.0


def _estate(root: Path, n: int) -> Path:
    return note_estate(root, n, folders=5, folder="Mandat {f:02d}", name="Vermerk {i:03d}.txt",
                       text="Aktenvermerk {i}: Telefonat mit dem Mandanten über die Forderung Nr. 5{i:03d}.")


def _wait(condition, seconds: float) -> bool:
    return wait_until(condition, seconds, step=0.05)


def test_a_closed_gateway_socket_is_probed_by_tcp_connects_and_resumes(make_ctx, data_dir, tmp_path,
                                                                       monkeypatch):
    for name in ("KI_BREAKER_FAILURES", "KI_BREAKER_PROBE_SECONDS", "KI_BREAKER_PROBE_MAX_SECONDS",
                 "KI_BREAKER_CONNECT_PROBE_SECONDS"):
        monkeypatch.delenv(name, raising=False)  # the defaults: 3, 1 s → 10 s, connects every 2 s
    set_config_value(data_dir, "pipeline.retry_base_seconds", 0.2)
    with GatewayStub(default=stage_answer) as stub:
        monkeypatch.setenv("KI_LLM_BASE_URL", stub.url)
        monkeypatch.setenv("KI_LLM_MODEL", "stub-model")
        ctx = make_ctx(workers=WORKERS, infrastructure_retry_max_seconds=1)
        scan_source(ctx, register_local_source(ctx, _estate(tmp_path / "estate", DOCUMENTS)))
        outage = SocketOutage(stub)
        result: dict = {}
        runner = threading.Thread(target=lambda: result.update(
            summary=launch_insertion(ctx, workers=WORKERS, wait_for_retries_seconds=120)), name="insert")
        runner.start()
        try:
            assert _wait(lambda: stub.count >= DOWN_AFTER or not runner.is_alive(), 180), "no gateway traffic"
            assert runner.is_alive(), "the run finished before the outage"
            outage.down()
            shown: list = []
            assert _wait(gateway_refusing(ctx, shown), DOWN_SECONDS - 2), shown
            _wait(lambda: False, DOWN_SECONDS - (time.monotonic() - outage.down_at))
        finally:
            if outage.up_at is None:
                outage.up()
        runner.join(timeout=300)
        assert not runner.is_alive()
        arrivals = [r.at for r in stub.requests]

    assert result["summary"].status == "completed", result["summary"]
    assert outage.accepted_while_down() == 0  # the socket was really closed
    (episode,) = [e for e in BREAKERS.episodes if e.dependency == "gateway"]
    # what met the dead gateway: the requests in flight (one per worker) and the faults opening the breaker
    assert 1 <= episode.requests <= WORKERS + FAILURES, episode
    assert episode.probes == 0, episode  # no HTTP probe while the port refused
    expected_connects = DOWN_SECONDS / CONNECT_EVERY
    assert expected_connects / 3 <= episode.connects_refused <= expected_connects + 3, episode
    with ctx.db.engine.connect() as conn:
        rows = conn.execute(text("SELECT stage, status, attempts FROM processing_state WHERE stage = ANY(:s)"),
                            {"s": list(MODEL_STAGES)}).all()
        assert read_pauses(conn) == []
    assert len(rows) == DOCUMENTS * len(MODEL_STAGES) and {r.status for r in rows} <= {"done", "skipped"}, rows
    # a failed attempt is a request that met the outage or a call that failed fast: nothing else was claimed
    assert sum(r.attempts for r in rows) - len(rows) <= episode.requests + episode.failed_fast <= 2 * WORKERS + FAILURES
    resumed = outage.first_after_up(arrivals)
    assert resumed is not None and resumed <= 10.0, resumed  # within 10 s of the socket listening again
    assert 1 <= outage.connects_until_first_request(arrivals) <= 4  # the request's own + the probe's bare connect
