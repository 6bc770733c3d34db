"""A stage deadline under the Hatchet provider: a model stage whose gateway request never comes back for one
document is abandoned at ``pipeline.stages.classify_matter.timeout_seconds``; the row records ``StageTimeout``
as under the local provider, the task stops waiting for the hung handler (its slot is freed), and — the other
documents passing the same stage meanwhile — the document is quarantined ``timeout`` after its budget while
the run completes.

A real engine (the session's hatchet-lite), a real ``ki worker`` subprocess and the loopback gateway
(``tests/helpers/gateway_stub.py``), which delays its answers for that one document by 30 s.
Cost: about 30-60 s (the session's engine start is shared with the other Hatchet tests).
"""

from __future__ import annotations

import dataclasses

import pytest

from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.core.taxonomies import PIPELINE_STAGE_ORDER
from tests.helpers.gateway_stub import GatewayStub
from tests.helpers.hatchet_harness import configure, q, scan
from tests.helpers.outage import note_estate, stage_answer

pytestmark = [pytest.mark.hatchet, pytest.mark.timeout(300)]

DOCUMENTS, SLOTS, HUNG_SECONDS = 6, 4, 30.0


def test_a_hung_model_request_times_out_and_the_run_completes(hx, make_ctx, tmp_path, monkeypatch):
    root = note_estate(tmp_path / "share", DOCUMENTS, folders=1, folder="Mandat {f:02d}", name="Vermerk {i:03d}.txt",
                       text="Aktenvermerk {i}: Telefonat mit dem Mandanten über die Forderung Nr. 7{i:03d}.")
    hung: dict[str, str] = {}

    def answer(req):
        reply = stage_answer(req)
        doc, stage, _ = req.trace
        if stage == "classify_matter" and doc is not None and doc == hung.get("doc"):
            return dataclasses.replace(reply, delay=HUNG_SECONDS)  # accepted, never answered in time
        return reply

    with GatewayStub(default=answer) as stub:
        monkeypatch.setenv("KI_LLM_BASE_URL", stub.url)  # the worker inherits the environment
        monkeypatch.setenv("KI_LLM_MODEL", "stub-model")
        ctx = make_ctx(infrastructure_retry_max_seconds=1)
        configure(ctx.settings.data_dir, "hatchet", stages=list(PIPELINE_STAGE_ORDER), retry_base_seconds=0.2)
        set_config_value(ctx.settings.data_dir, "pipeline.stages.classify_matter.timeout_seconds", 3)
        set_config_value(ctx.settings.data_dir, "pipeline.stages.classify_matter.max_attempts", 2)
        scan(ctx, root)
        first = q(ctx, "SELECT id FROM source_object WHERE path LIKE '%Vermerk 000.txt'")[0][0]
        hung["doc"] = str(first)
        hx.start_worker(slots=SLOTS)
        ctx.reload_config()
        run_id = launch_insertion(ctx, trigger="test").run_id
        hx.wait_run(ctx, run_id, timeout=240)
        row = q(ctx, "SELECT status, reason, last_error, attempts FROM processing_state "
                     "WHERE source_object_id = :o AND stage = 'classify_matter'", o=first)[0]
        others = q(ctx, "SELECT status, count(*) FROM processing_state WHERE source_object_id <> :o "
                        "AND stage = 'classify_matter' GROUP BY status", o=first)
    assert (row.status, row.reason) == ("quarantined", "timeout"), row.last_error
    assert row.last_error["class"] == "StageTimeout" and row.last_error["details"]["timeout_seconds"] == 3.0
    assert row.last_error["details"]["others_succeeded"] >= 1
    assert "the handler was abandoned here" in row.last_error["traceback"]
    assert dict(others) == {"done": DOCUMENTS - 1}
    run = q(ctx, "SELECT status FROM pipeline_runs WHERE id = :r", r=run_id)[0]
    assert run.status == "completed"
