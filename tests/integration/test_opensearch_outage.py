"""The real OpenSearch node stops mid-run and comes back (issue 14 item 9, ``ki.adapters.breaker``).

A real ``launch_insertion`` (local provider, 4 workers, the tests' embedded PostgreSQL) indexes 30
documents into this test's own index on the session's OpenSearch node (``components.opensearch_url``;
the model stages by rules). Once a few index rows are done the node is stopped (SIGTERM: its JVM ends)
and, once the pause is seen, started again on the same port and the same data. Meanwhile the index
rows wait paused (``paused: opensearch unavailable since …``, the node's port refusing TCP connections)
without spending attempts, nothing is quarantined, and after the restart every row is indexed: the
index holds exactly the record's chunks.

Cost: about 40-90 s on a quiet machine, most of it the node's restart (a JVM start); 277 s at load ~20-25
with the session node's first start included.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from ki.adapters.breaker import BREAKERS
from ki.adapters.search.factory import backend_for
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.store.pauses import read_pauses
from tests.helpers.outage import note_estate, wait_until

pytestmark = [pytest.mark.opensearch, pytest.mark.timeout(600)]

WORKERS, DOCUMENTS, FAILURES, STOP_AFTER = 4, 30, 3, 6


def _estate(root: Path, n: int) -> Path:
    return note_estate(root, n, folders=3, folder="Akte {f}", name="Notiz {i:03d}.txt",
                       text="Notiz {i}: Rückruf des Mandanten wegen Rechnung 7{i:03d}; Frist bis Monatsende.")


def _wait(condition, seconds: float) -> bool:
    return wait_until(condition, seconds, step=0.1)


def _index_rows(ctx) -> list:
    with ctx.db.engine.connect() as conn:
        return conn.execute(text("SELECT status, attempts FROM processing_state WHERE stage = 'index'")).all()


def test_an_opensearch_node_that_stops_pauses_index_and_everything_is_indexed_after_restart(
        make_ctx, data_dir, tmp_path, monkeypatch, opensearch_node):
    monkeypatch.setenv("KI_OPENSEARCH_REFRESH_INTERVAL", "100ms")
    monkeypatch.setenv("KI_BREAKER_FAILURES", str(FAILURES))
    set_config_value(data_dir, "pipeline.retry_base_seconds", "0.2")
    set_config_value(data_dir, "components.opensearch_url", opensearch_node.url)
    ctx = make_ctx(workers=WORKERS, infrastructure_retry_max_seconds=1)
    backend = backend_for(ctx.db, ctx.config)
    assert backend.name == "opensearch"
    backend.drop_index()
    scan_source(ctx, register_local_source(ctx, _estate(tmp_path / "estate", DOCUMENTS)))
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(
        summary=launch_insertion(ctx, workers=WORKERS, wait_for_retries_seconds=300)), name="insert")
    runner.start()
    shown: list = []
    try:
        assert _wait(lambda: sum(r.status == "done" for r in _index_rows(ctx)) >= STOP_AFTER
                     or not runner.is_alive(), 240), "no index row finished"
        assert runner.is_alive(), "the run finished before the node stopped"
        opensearch_node.stop()
        stopped_at = time.monotonic()

        def paused() -> bool:
            with ctx.db.engine.connect() as conn:
                shown[:] = [p for p in read_pauses(conn) if p.dependency == "opensearch"]
            return bool(shown) and "refuses TCP connections" in shown[0].reason

        # the pause shows unless the run got everything indexed before the node went
        assert _wait(lambda: paused() or not runner.is_alive(), 120), shown
        assert runner.is_alive() and shown, "the run finished before the outage paused it"
        waiting = [r for r in _index_rows(ctx) if r.status != "done"]
        assert waiting, "no index row left to pause"
    finally:
        opensearch_node.ready_timeout = max(opensearch_node.ready_timeout, 240.0)
        opensearch_node.restart(same_port=True)  # the session's node comes back where every test expects it
    down_seconds = time.monotonic() - stopped_at
    runner.join(timeout=400)
    assert not runner.is_alive()

    assert result["summary"].status == "completed", result["summary"]
    rows = _index_rows(ctx)
    assert len(rows) == DOCUMENTS and {r.status for r in rows} == {"done"}, rows
    (episode,) = [e for e in BREAKERS.episodes if e.dependency == "opensearch"]
    # while it was down: the rows in flight and the faults that opened the breaker failed, the rest waited
    assert sum(r.attempts for r in rows) - len(rows) <= episode.faults <= FAILURES + 2 * WORKERS + episode.probes
    assert episode.connects_refused >= 1, episode  # its port was probed by bare TCP connects
    with ctx.db.engine.connect() as conn:
        assert read_pauses(conn) == []
        chunks = conn.execute(text("SELECT count(*) FROM chunk WHERE NOT is_deleted")).scalar_one()
    backend.client.indices.refresh(index=backend.index)
    assert backend.client.count(index=backend.index)["count"] == chunks > 0
    backend.drop_index()
    assert down_seconds > 1.0
