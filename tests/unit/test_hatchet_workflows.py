"""The declared Hatchet workflows, without an engine (a client with a fake token never dials).

Spec: insertion-pipeline.md "Orchestration" (one visible task per stage; task retries 6, backoff
factor 5 capped at 60 s, six-hour schedule and execution timeouts; KI_HATCHET_DOCUMENT_CONCURRENCY
with GROUP_ROUND_ROBIN; KI_RELATE_MODEL_CONCURRENCY on relate; KI_HATCHET_SYNC_CONCURRENCY on scans;
stable idempotency keys); the engine-backed behaviour is in tests/integration/test_hatchet.py.
"""

from __future__ import annotations

import base64
import json

import pytest

from ki.config.loader import ProcessSettings
from ki.taxonomies import PIPELINE_STAGE_ORDER


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


@pytest.fixture
def workflows(monkeypatch, tmp_path):
    from hatchet_sdk import Hatchet

    from ki.workflows.dag import build_workflows

    claims = {"sub": "707d0855-80ab-4e1f-a156-f1c4546cbf52", "server_url": "http://127.0.0.1:1",
              "grpc_broadcast_address": "127.0.0.1:1"}
    for key in ("HATCHET_CLIENT_NAMESPACE", "HATCHET_CLIENT_HOST_PORT", "HATCHET_CLIENT_SERVER_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HATCHET_CLIENT_TOKEN", f"{_b64({'alg': 'ES256'})}.{_b64(claims)}.x")
    monkeypatch.setenv("HATCHET_CLIENT_TLS_STRATEGY", "none")
    monkeypatch.chdir(tmp_path)  # the SDK also reads .env files from the working directory
    settings = ProcessSettings(data_dir=tmp_path, hatchet_document_concurrency=24, relate_model_concurrency=5,
                               hatchet_sync_concurrency=3)
    return build_workflows(Hatchet(), settings)


def test_document_dag_has_one_task_per_stage_in_order(workflows):
    proto = workflows.document.to_proto()
    assert [t.readable_id for t in proto.tasks] == list(PIPELINE_STAGE_ORDER)
    for i, task in enumerate(proto.tasks):
        expected = [] if i == 0 else [PIPELINE_STAGE_ORDER[i - 1]] + (["fetch"] if i > 1 else [])
        assert list(task.parents) == expected
        assert (task.retries, task.backoff_factor, task.backoff_max_seconds) == (6, 5.0, 60)
        assert (task.timeout, task.schedule_timeout) == ("6h", "6h")
        # the engine may skip a switched-off stage (never the root nor the final task)
        skips = [c for c in task.conditions.parent_override_conditions] if task.HasField("conditions") else []
        middle = 0 < i < len(PIPELINE_STAGE_ORDER) - 1
        # ... and only once its predecessor ended (a second, AND-ed condition), so stage order holds
        want = []
        if middle:
            want = [("fetch", f"output.skip.{task.readable_id}")]
            if i > 1:
                want.append((PIPELINE_STAGE_ORDER[i - 1], "true"))
        assert [(c.parent_readable_id, c.base.expression) for c in skips] == want
        assert len({c.base.or_group_id for c in skips}) == len(skips)
    relate = next(t for t in proto.tasks if t.readable_id == "relate")
    assert [(c.expression, c.max_runs) for c in relate.concurrency] == [("'relate'", 5)]
    assert all(not t.concurrency for t in proto.tasks if t.readable_id != "relate")
    assert proto.on_failure_task.readable_id.startswith("record_failure")


def test_document_dag_concurrency_and_idempotency(workflows):
    from hatchet_sdk.contracts.v1.workflows_pb2 import ConcurrencyLimitStrategy

    proto = workflows.document.to_proto()
    assert proto.concurrency.expression == "input.batch_id + input.attempt"
    assert proto.concurrency.max_runs == 24
    assert ConcurrencyLimitStrategy.Name(proto.concurrency.limit_strategy) == "GROUP_ROUND_ROBIN"
    assert proto.idempotency.expression == "input.batch_id + ':' + input.doc_id + ':' + input.attempt"
    assert proto.idempotency.ttl_ms == 7 * 3600 * 1000


def test_access_refresh_and_sync_workflows(workflows):
    access = workflows.access_refresh.to_proto()
    assert [t.readable_id for t in access.tasks] == ["index"]
    assert access.concurrency.max_runs == 24
    sync = workflows.sync.to_proto()
    assert [t.readable_id for t in sync.tasks] == ["scan"]
    assert [(c.expression, c.max_runs) for c in sync.tasks[0].concurrency] == [("'sync'", 3)]


def test_input_ids_are_strings_for_cel():
    from ki.workflows.dag import DAG
    from ki.workflows.inputs import DocumentInput

    inp = DocumentInput(batch_id="12", doc_id="345")
    assert (inp.run_id, inp.source_object_id, inp.attempt) == (12, 345, "")
    assert DAG[0] == ("fetch", None) and DAG[-1] == ("index", "extract_decisions")


def test_no_token_fails_closed(monkeypatch):
    from ki.errors import OrchestratorUnavailable
    from ki.workflows.client import hatchet_client

    monkeypatch.delenv("HATCHET_CLIENT_TOKEN", raising=False)
    with pytest.raises(OrchestratorUnavailable, match="HATCHET_CLIENT_TOKEN"):
        hatchet_client()
