"""The declared Hatchet workflows, without an engine (a client with a fake token never dials).

Spec: insertion-pipeline.md "Orchestration" (task retries 6, backoff factor 5 capped at 60 s,
six-hour schedule and execution timeouts; KI_RELATE_MODEL_CONCURRENCY on relate;
KI_HATCHET_SYNC_CONCURRENCY on scans; stable idempotency keys) and DESIGN.md "Hatchet DAG shape and
pacing" (one task per *enabled* stage, the workflow named after the enabled set; no workflow-level
concurrency); the engine-backed behaviour is in tests/integration/orchestrator/test_hatchet_provider.py.
"""

from __future__ import annotations

import base64
import json

import pytest

from ki.config.loader import ProcessSettings
from ki.core.taxonomies import PIPELINE_STAGE_ORDER


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


FULL = "ki-insertion-f-c-cm-r-em-ed-i"


@pytest.fixture
def declare(monkeypatch, tmp_path):
    """``declare(name)`` → the SDK workflow ``name`` declared on a client that never dials."""
    from hatchet_sdk import Hatchet

    from ki.workflows.dag import build_workflow

    claims = {"sub": "707d0855-80ab-4e1f-a156-f1c4546cbf52", "server_url": "http://127.0.0.1:1",
              "grpc_broadcast_address": "127.0.0.1:1"}
    for key in ("HATCHET_CLIENT_NAMESPACE", "HATCHET_CLIENT_HOST_PORT", "HATCHET_CLIENT_SERVER_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HATCHET_CLIENT_TOKEN", f"{_b64({'alg': 'ES256'})}.{_b64(claims)}.x")
    monkeypatch.setenv("HATCHET_CLIENT_TLS_STRATEGY", "none")
    monkeypatch.chdir(tmp_path)  # the SDK also reads .env files from the working directory
    settings = ProcessSettings(data_dir=tmp_path, hatchet_document_concurrency=24, relate_model_concurrency=5,
                               hatchet_sync_concurrency=3)
    client = Hatchet()
    return lambda name: build_workflow(client, settings, name)


def _chain(proto) -> list[tuple[str, list[str]]]:
    return [(t.readable_id, list(t.parents)) for t in proto.tasks]


def test_full_document_dag_has_one_task_per_stage_in_order(declare):
    proto = declare(FULL).to_proto()
    assert _chain(proto) == [(s, [PIPELINE_STAGE_ORDER[i - 1]] if i else [])
                             for i, s in enumerate(PIPELINE_STAGE_ORDER)]
    for task in proto.tasks:
        assert (task.retries, task.backoff_factor, task.backoff_max_seconds) == (6, 5.0, 60)
        assert (task.timeout, task.schedule_timeout) == ("6h", "6h")
        # no engine-side skips any more: a switched-off stage has no task at all
        assert not task.HasField("conditions") or not list(task.conditions.parent_override_conditions)
    relate = next(t for t in proto.tasks if t.readable_id == "relate")
    assert [(c.expression, c.max_runs) for c in relate.concurrency] == [("'relate'", 5)]
    assert all(not t.concurrency for t in proto.tasks if t.readable_id != "relate")
    assert proto.on_failure_task.readable_id.startswith("record_failure")


def test_dag_declares_only_the_enabled_stages(declare):
    """fetch, convert, index: three tasks in a chain, no relate concurrency, same task options."""
    proto = declare("ki-insertion-f-c-i").to_proto()
    assert _chain(proto) == [("fetch", []), ("convert", ["fetch"]), ("index", ["convert"])]
    assert all(not t.concurrency for t in proto.tasks)
    assert all((t.retries, t.timeout) == (6, "6h") for t in proto.tasks)
    one = declare("ki-insertion-em").to_proto()
    assert _chain(one) == [("extract_metadata", [])]


def test_no_workflow_level_concurrency_and_stable_idempotency(declare):
    """KI_HATCHET_DOCUMENT_CONCURRENCY is the batch ledger's (the conveyor), not a workflow key."""
    for name in (FULL, "ki-insertion-f-c-i", "ki-access-refresh"):
        proto = declare(name).to_proto()
        assert not proto.HasField("concurrency") and not list(proto.concurrency_arr), name
        assert proto.idempotency.expression == "input.batch_id + ':' + input.doc_id + ':' + input.attempt"
        assert proto.idempotency.ttl_ms == 7 * 3600 * 1000


def test_access_refresh_and_sync_workflows(declare):
    access = declare("ki-access-refresh").to_proto()
    assert _chain(access) == [("index", [])]
    sync = declare("ki-sync").to_proto()
    assert [t.readable_id for t in sync.tasks] == ["scan"]
    assert [(c.expression, c.max_runs) for c in sync.tasks[0].concurrency] == [("'sync'", 3)]


def _labels(task) -> dict[str, tuple[str, bool, int]]:
    return {k: (v.str_value, v.required, v.weight) for k, v in task.worker_labels.items()}


def test_the_model_stage_reserve_is_worker_labels(declare):
    """With a model stage, model tasks prefer ``ki-pool=model`` workers and every other task requires a
    ``ki-pool=general`` one (ki.workflows.pools); DAGs without a model stage carry no labels."""
    proto = declare(FULL).to_proto()
    for task in proto.tasks:
        if task.readable_id in ("classify_matter", "relate", "extract_metadata", "extract_decisions"):
            assert _labels(task) == {"ki-pool": ("model", False, 1)}, task.readable_id
        else:
            assert _labels(task) == {"ki-pool": ("general", True, 0)}, task.readable_id
    for name in ("ki-insertion-f-c-i", "ki-access-refresh", "ki-sync"):
        assert all(not t.worker_labels for t in declare(name).to_proto().tasks), name


def test_reserve_slots_follow_the_local_reserve(monkeypatch):
    from ki.core.errors import ConfigurationError
    from ki.workflows.pools import reserve_slots, worker_pool

    full = tuple(PIPELINE_STAGE_ORDER)
    assert [reserve_slots(n, full, None) for n in (1, 2, 4, 8, 16)] == [0, 1, 1, 2, 4]  # a quarter, rounded up
    assert reserve_slots(8, full, 3) == 3 and reserve_slots(8, full, 99) == 7  # never every slot
    assert reserve_slots(8, ("fetch", "convert", "index"), 3) == 0  # no model stage: no reserve
    monkeypatch.delenv("KI_WORKER_POOL", raising=False)
    assert worker_pool() == "general"
    monkeypatch.setenv("KI_WORKER_POOL", "Model")
    assert worker_pool() == "model"
    monkeypatch.setenv("KI_WORKER_POOL", "gpu")
    with pytest.raises(ConfigurationError, match="KI_WORKER_POOL"):
        worker_pool()


def test_workflow_names_are_derived_from_the_enabled_set():
    from itertools import combinations

    from ki.config.settings import KiConfig
    from ki.workflows.dag import STAGE_CODES, document_stages, document_workflow_name, workflow_stages

    assert len(set(STAGE_CODES.values())) == len(PIPELINE_STAGE_ORDER)
    assert document_workflow_name(PIPELINE_STAGE_ORDER) == FULL
    assert document_workflow_name(("fetch", "convert", "index")) == "ki-insertion-f-c-i"
    # every subset round-trips, and distinct sets get distinct names
    names = set()
    for k in range(1, len(PIPELINE_STAGE_ORDER) + 1):
        for subset in combinations(PIPELINE_STAGE_ORDER, k):
            name = document_workflow_name(subset)
            assert workflow_stages(name) == subset
            names.add(name)
    assert len(names) == 2 ** len(PIPELINE_STAGE_ORDER) - 1
    assert workflow_stages("ki-access-refresh") == ("index",)
    for bad in ("ki-insertion", "ki-insertion-", "ki-insertion-i-f", "ki-insertion-x", "ki-sync", "other-f"):
        with pytest.raises(ValueError):
            workflow_stages(bad)
    with pytest.raises(ValueError):
        document_workflow_name(("index", "fetch"))

    config = KiConfig()
    for stage in PIPELINE_STAGE_ORDER:
        config.pipeline.stage(stage).enabled = stage in ("fetch", "convert", "index")
    assert document_stages(config) == ("fetch", "convert", "index")
    for stage in PIPELINE_STAGE_ORDER:
        config.pipeline.stage(stage).enabled = False
    assert document_stages(config) == ("index",)  # nothing enabled: the final task alone drives the rows


def test_input_ids_are_strings_for_cel():
    from ki.workflows.inputs import DocumentInput

    inp = DocumentInput(batch_id="12", doc_id="345")
    assert (inp.run_id, inp.source_object_id, inp.attempt) == (12, 345, "")


def test_no_token_fails_closed(monkeypatch):
    from ki.core.errors import OrchestratorUnavailable
    from ki.workflows.client import hatchet_client

    monkeypatch.delenv("HATCHET_CLIENT_TOKEN", raising=False)
    with pytest.raises(OrchestratorUnavailable, match="HATCHET_CLIENT_TOKEN"):
        hatchet_client()
