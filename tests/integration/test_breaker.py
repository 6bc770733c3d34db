"""Circuit breakers per dependency in a real insertion (issue 14 item 9, ``ki.adapters.breaker``).

A real ``launch_insertion`` (local provider, 4 workers, the embedded PostgreSQL of the tests) runs the
model stages on the loopback gateway (``tests/helpers/gateway_stub.py``) or the scans' conversion on the
loopback Docling Serve (``tests/helpers/docling_stub.py``); mid-run the dependency answers 503 until the
test brings it back. With ``KI_BREAKER_FAILURES=3`` and probes every 0.2 s doubling to 0.8 s, the
dependency receives a bounded number of requests while down (without the breaker every row would retry
on its own every ≤ 1 s), the rows of its stages are not claimed (their attempts are not spent), ``ki
status`` says ``paused: <dependency> unavailable since …``, nothing is quarantined, and the run resumes
within the probe interval after the dependency answers again.

Cost: about 15-25 s each on a quiet machine (two insertions of 24 files, a ``ki status`` process each).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from ki.adapters.breaker import BREAKERS
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.store.pauses import read_pauses
from tests.helpers.docling_stub import DoclingStub, Scenario
from tests.helpers.gateway_stub import GatewayStub
from tests.helpers.outage import DoclingOutage, Outage, gateway_default

pytestmark = pytest.mark.timeout(300)

WORKERS = 4
FAILURES, PROBE, PROBE_MAX = 3, 0.2, 0.8
#: the least time the dependency stays down (s), and the most it waits for ``ki status`` to show the pause
DOWN_SECONDS, STATUS_WAIT = 3.0, 60.0


@pytest.fixture
def breaker_env(monkeypatch, data_dir):
    monkeypatch.setenv("KI_BREAKER_FAILURES", str(FAILURES))
    monkeypatch.setenv("KI_BREAKER_PROBE_SECONDS", str(PROBE))
    monkeypatch.setenv("KI_BREAKER_PROBE_MAX_SECONDS", str(PROBE_MAX))
    set_config_value(data_dir, "pipeline.retry_base_seconds", 0.2)
    from ki.app import wiring

    wiring.reset()
    yield
    wiring.reset()


def _estate(root: Path, n: int) -> Path:
    for i in range(n):
        folder = root / f"Mandat {i % 4:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"Vermerk {i:03d}.txt").write_text(
            f"Aktenvermerk {i}: Telefonat mit dem Mandanten über die Forderung Nr. {1000 + i}.\n", encoding="utf-8")
    return root


def _ki_status(env_extra: dict[str, str] | None = None) -> dict:
    """``ki status --json`` as a separate process (the test's KI_DATA_DIR / KI_DATABASE_URL)."""
    env = {**os.environ, **(env_extra or {})}
    proc = subprocess.run([str(Path(sys.executable).with_name("ki")), "status", "--json"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _ride_out(ctx, outage: Outage, dependency: str) -> dict:
    """While the run goes on: wait for the pause to be recorded, read ``ki status --json``, keep the
    dependency down at least DOWN_SECONDS, then bring it back. Returns what status showed."""
    seen: dict = {}
    deadline = time.monotonic() + STATUS_WAIT
    while time.monotonic() < deadline:
        with ctx.db.engine.connect() as conn:
            if any(p.dependency == dependency for p in read_pauses(conn)):
                break
        time.sleep(0.05)
    seen["status"] = _ki_status()
    while outage.started_at is not None and time.monotonic() - outage.started_at < DOWN_SECONDS:
        time.sleep(0.05)
    outage.stop()
    return seen


def _run_with_outage(ctx, outage: Outage, dependency: str):
    result: dict = {}

    def run() -> None:
        result["summary"] = launch_insertion(ctx, workers=WORKERS, wait_for_retries_seconds=60)

    runner = threading.Thread(target=run, name="insert")
    runner.start()
    while outage.started_at is None and runner.is_alive():
        time.sleep(0.02)
    assert outage.started_at is not None, "the run finished before the outage began"
    seen = _ride_out(ctx, outage, dependency)
    runner.join(timeout=240)
    assert not runner.is_alive()
    return result["summary"], seen


def _rows(ctx, stages: tuple[str, ...]) -> list:
    with ctx.db.engine.connect() as conn:
        return conn.execute(text("SELECT stage, status, attempts FROM processing_state WHERE stage = ANY(:s)"),
                            {"s": list(stages)}).all()


def _probes(outage: Outage) -> float:
    """The most probes the outage allows: the first ones at 0.2, 0.4 s, then one per PROBE_MAX."""
    return (outage.ended_at - outage.started_at) / PROBE_MAX + 3


def _assert_paused_shown(seen: dict, dependency: str, stages: set[str]) -> None:
    paused = {p["dependency"]: p for p in seen["status"]["paused"]}
    assert dependency in paused, seen["status"]["paused"]
    assert paused[dependency]["message"].startswith(f"paused: {dependency} unavailable since ")
    assert stages <= set(paused[dependency]["stages"])


def test_gateway_outage_pauses_the_model_stages_and_resumes(make_ctx, tmp_path, breaker_env, monkeypatch):
    model_stages = ("classify_matter", "relate", "extract_metadata", "extract_decisions")
    outage = Outage()
    with GatewayStub(default=gateway_default(outage, start_after=12)) as stub:
        monkeypatch.setenv("KI_LLM_BASE_URL", stub.url)
        monkeypatch.setenv("KI_LLM_MODEL", "stub-model")
        ctx = make_ctx(workers=WORKERS, infrastructure_retry_max_seconds=1)
        sid = register_local_source(ctx, _estate(tmp_path / "estate", 24))
        scan_source(ctx, sid)
        summary, seen = _run_with_outage(ctx, outage, "gateway")

    assert summary.status == "completed", summary
    _assert_paused_shown(seen, "gateway", {"classify_matter", "relate"})
    # bounded: the faults that open the breaker, the requests already in flight, one probe per interval
    assert 1 <= outage.dead_requests <= FAILURES + WORKERS + _probes(outage) + 2, outage
    rows = _rows(ctx, model_stages)
    assert {r.status for r in rows} <= {"done", "skipped"} and not [r for r in rows if r.status == "quarantined"]
    # a paused stage's rows were not claimed: every claim beyond each row's successful one met the outage,
    # or was claimed just before the breaker opened and its call failed fast without a request
    (episode,) = [e for e in BREAKERS.episodes if e.dependency == "gateway"]
    assert episode.failed_fast <= WORKERS, episode
    assert sum(r.attempts for r in rows) <= len(rows) + outage.dead_requests + episode.failed_fast
    with ctx.db.engine.connect() as conn:
        assert read_pauses(conn) == []  # resumed: the breaker closed
    delay = outage.resume_delay()
    assert delay is not None and delay <= PROBE_MAX + 5.0, delay  # the next probe after recovery (load slack)


def test_docling_outage_pauses_convert_and_resumes(make_ctx, data_dir, tmp_path, breaker_env, monkeypatch,
                                                   real_corpus):
    import ki.adapters.convert.router as router
    from ki.adapters.convert import docling as docling_mod

    monkeypatch.setattr(router, "ocr_enabled", lambda config: False)  # the scans go to Docling
    docling_mod.reset_cooldown()
    scan = (real_corpus / "pdf/tika_testOCR.pdf").read_bytes()
    root = tmp_path / "scans"
    root.mkdir()
    for i in range(24):  # distinct bytes after %%EOF: 24 documents, each converted
        (root / f"scan {i:02d}.pdf").write_bytes(scan + f"\n% copy {i}\n".encode())
    outage = Outage()
    with DoclingStub() as stub:
        DoclingOutage(stub, outage, Scenario(fixture="scanned_pdf"))
        set_config_value(data_dir, "components.docling_url", stub.url)
        set_config_value(data_dir, "components.docling_client_timeout_seconds", 20)
        ctx = make_ctx(workers=WORKERS, infrastructure_retry_max_seconds=1)
        sid = register_local_source(ctx, root)
        scan_source(ctx, sid)
        converted = [0]
        original = stub._record

        def start_after_six(request) -> None:
            if request.path.endswith("/v1/convert/file/async") and outage.started_at is None:
                converted[0] += 1
                if converted[0] > 6:
                    outage.start()
            original(request)

        stub._record = start_after_six
        summary, seen = _run_with_outage(ctx, outage, "docling")

    assert summary.status == "completed", summary
    _assert_paused_shown(seen, "docling", {"convert"})
    # a conversion is several requests (version, submit, poll, result): the bound counts requests
    assert 1 <= outage.dead_requests <= 3 * (FAILURES + WORKERS + _probes(outage) + 2), outage
    rows = _rows(ctx, ("convert",))
    assert len(rows) == 24 and {r.status for r in rows} == {"done"}, rows
    # as for the gateway: a conversion claimed just before the breaker opened fails fast without a request
    (episode,) = [e for e in BREAKERS.episodes if e.dependency == "docling"]
    assert episode.failed_fast <= WORKERS, episode
    assert sum(r.attempts for r in rows) <= len(rows) + outage.dead_requests + episode.failed_fast
    with ctx.db.engine.connect() as conn:
        assert read_pauses(conn) == []
    delay = outage.resume_delay()
    assert delay is not None and delay <= PROBE_MAX + 5.0, delay
