"""The model-stage capacity reserve under Hatchet: worker labels and a reserve worker (``ki.workflows.pools``).

A real engine and one ``ki worker`` (4 slots, every stage enabled, the model stages on the loopback gateway):
with ``pipeline.lanes.model_workers`` at its default (a quarter: 1 slot), the worker serves 3 slots as
``ki-pool=general`` and starts a reserve worker process with 1 slot as ``ki-pool=model``. 12 notes are
launched at once with a slow convert (3 s), so the general slots are full of converts while the documents
that got through convert wait for their model stages:

* the engine lists both workers with their labels and slots;
* no fetch, convert or index attempt ever ran in the reserve process, and at most 3 ran at once;
* model-stage attempts ran in the reserve process, also while all 3 general slots were converting (without
  the reserve they would wait for a convert to end);
* the run completes, every row done once;
* ``kill -9`` of the general worker alone ends its reserve worker too (it dies with its parent).
"""

from __future__ import annotations

import os
import signal
from datetime import datetime

import pytest

from ki.app.launch import launch_insertion
from ki.core.taxonomies import MODEL_STAGES, PIPELINE_STAGE_ORDER
from ki.workflows.client import hatchet_client
from tests.helpers.gateway_stub import GatewayStub
from tests.helpers.hatchet_harness import configure, q, scan
from tests.helpers.outage import note_estate, stage_answer, wait_until

pytestmark = [pytest.mark.hatchet, pytest.mark.timeout(300)]

DOCUMENTS, SLOTS = 12, 4


def _pid(worker: str | None) -> int:
    return int((worker or "::").split(":")[1] or 0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _workers(namespace: str) -> list[tuple[str, int | None, dict[str, str | None]]]:
    """The namespace's active workers as the engine shows them: (name, default slots, labels), by name."""
    client = hatchet_client()
    out = []
    for row in client.workers.list().rows or []:
        if row.name.startswith(namespace) and str(row.status).endswith("ACTIVE"):
            worker = client.workers.get(row.metadata.id)
            slots = (worker.slot_config or {}).get("default")
            out.append((worker.name, slots.limit if slots else None,
                        {label.key: label.value for label in worker.labels or []}))
    return sorted(out, key=lambda w: w[0])


def _rss_mib(pid: int) -> float:
    """Resident memory of process ``pid`` and its children (the SDK's action listener), MiB."""
    import psutil

    proc = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20


def _overlap(at: datetime, spans: list[tuple[datetime, datetime]]) -> int:
    return sum(1 for start, end in spans if start <= at < end)


def test_model_stages_get_a_reserve_worker_that_general_tasks_never_use(hx, make_ctx, tmp_path, monkeypatch):
    root = note_estate(tmp_path / "share", DOCUMENTS, folders=3, folder="Akte {f}", name="Notiz {i:03d}.txt",
                       text="Notiz {i}: Rückruf des Mandanten wegen Rechnung 7{i:03d}.")
    with GatewayStub(default=stage_answer) as stub:
        monkeypatch.setenv("KI_LLM_BASE_URL", stub.url)  # the workers inherit the environment
        monkeypatch.setenv("KI_LLM_MODEL", "stub-model")
        ctx = make_ctx(hatchet_document_concurrency=DOCUMENTS)
        configure(ctx.settings.data_dir, "hatchet", stages=list(PIPELINE_STAGE_ORDER))
        # every general slot may convert at once (CPU slots as many as general slots, whatever the cores)
        general = hx.start_worker(slots=SLOTS, env={"KI_TEST_SLOW": "convert:3", "KI_WORKER_CPU_SLOTS": str(SLOTS - 1)})
        hx.wait_workers_active(2)
        shown = _workers(hx.namespace)
        scan(ctx, root)
        ctx.reload_config()
        run_id = launch_insertion(ctx, trigger="test").run_id
        hx.wait_run(ctx, run_id, timeout=240)

        attempts = q(ctx, "SELECT stage, worker, started_at, finished_at, outcome FROM work_item_attempt "
                          "WHERE run_id = :r", r=run_id)
        reserve_pids = {_pid(a.worker) for a in attempts} - {general.pid}
        assert len(reserve_pids) == 1, ({_pid(a.worker) for a in attempts}, general.pid)
        (reserve,) = reserve_pids
        rss_mib = _rss_mib(reserve)
        # set by the general worker before it started the reserve (ki.workflows.worker: OpenMP threads sleep)
        assert b"OMP_WAIT_POLICY=PASSIVE" in open(f"/proc/{reserve}/environ", "rb").read().split(b"\0")
        os.kill(general.pid, signal.SIGKILL)  # the general worker alone: its reserve must not outlive it
        reserve_ended = wait_until(lambda: not _alive(reserve), 60, step=0.2)

    assert [s[1:] for s in shown] == [(SLOTS - 1, {"ki-pool": "general"}), (1, {"ki-pool": "model"})], shown
    general_spans = [(a.started_at, a.finished_at) for a in attempts if a.stage not in MODEL_STAGES]
    model = [a for a in attempts if a.stage in MODEL_STAGES]
    assert all(_pid(a.worker) == general.pid for a in attempts if a.stage not in MODEL_STAGES)
    assert max(_overlap(start, general_spans) for start, _ in general_spans) <= SLOTS - 1
    on_reserve = [a for a in model if _pid(a.worker) == reserve]
    assert on_reserve, "no model stage ran on the reserve"  # (once the converts end, the general slots take some)
    converting = [(a.started_at, a.finished_at) for a in attempts if a.stage == "convert"]
    beside_full = [a for a in on_reserve if _overlap(a.started_at, converting) == SLOTS - 1]
    assert beside_full, "no model stage ran while every general slot was converting"
    rows = q(ctx, "SELECT stage, status, completions FROM processing_state")
    assert len(rows) == DOCUMENTS * len(PIPELINE_STAGE_ORDER)
    assert {r.status for r in rows} <= {"done", "skipped"}, rows
    assert reserve_ended, f"the reserve worker {reserve} outlived its general worker"
    print(f"\nworkers {shown}; model attempts {len(on_reserve)}/{len(model)} on the reserve, "
          f"{len(beside_full)} while every general slot converted; reserve worker {rss_mib:.0f} MiB resident")
