"""OpenTelemetry traces: one span per stage attempt, the gateway call a child carrying the attempt's trace id.

A real stage execution on a real PostgreSQL against the loopback gateway (``tests/helpers/gateway_stub.py``),
spans collected by the SDK's in-memory exporter; the trace id the gateway saw in ``X-Ki-Trace`` must be the
stage span's trace id, and the gateway's HTTP span its child.
"""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import text

from ki.adapters.observability import tracing
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.config.process import TracingSettings
from ki.orchestration.execute import run_stage_for_object
from ki.store.matters import get_or_create_matter
from tests.helpers.gateway_stub import GatewayStub, submit, tool_call


@pytest.fixture
def spans(ctx):
    exporter = InMemorySpanExporter()
    tracing.use_processor(SimpleSpanProcessor(exporter), engines=[ctx.db.engine], database=True)
    try:
        yield exporter
    finally:
        tracing.shutdown()


def test_one_span_per_attempt_with_the_gateway_call_as_a_child(ctx, tmp_path, monkeypatch, spans):
    root = tmp_path / "estate"
    (root / "Mandate/2024-0153 Keller").mkdir(parents=True)
    (root / "Mandate/2024-0153 Keller/Klage.txt").write_text("Klageschrift in Sachen Keller", encoding="utf-8")
    source = register_local_source(ctx, root)
    scan_source(ctx, source)
    with ctx.db.engine.connect() as conn:
        oid = conn.execute(text("SELECT id FROM source_object")).scalar_one()
        project = conn.execute(text("SELECT id FROM project")).scalar_one()
    assert run_stage_for_object(ctx, "fetch", oid).kind == "done"
    assert run_stage_for_object(ctx, "convert", oid).kind == "done"
    matter, _ = get_or_create_matter(ctx.db, project_id=project, reference="2024-0153", title="Keller")
    with GatewayStub() as stub:
        monkeypatch.setenv("KI_LLM_BASE_URL", stub.url)
        monkeypatch.setenv("KI_LLM_MODEL", "stub-model")
        stub.push(tool_call("search_matters", {"query": "2024-0153"}),
                  submit({"matter_id": matter.id, "confidence": 0.9, "evidence": "reference in the path"}))
        result = run_stage_for_object(ctx, "classify_matter", oid)
        with ctx.db.engine.connect() as conn:
            error = conn.execute(text("SELECT last_error FROM processing_state WHERE stage = 'classify_matter'")
                                 ).scalar_one()
        assert result.kind == "done", error
        chats = stub.chat_requests()

    finished = spans.get_finished_spans()
    stage_spans = [s for s in finished if s.name.startswith("ki.stage ")]
    assert [s.name for s in stage_spans] == ["ki.stage fetch", "ki.stage convert", "ki.stage classify_matter"]
    classify = stage_spans[-1]
    assert classify.attributes["ki.source_object_id"] == oid
    assert classify.attributes["ki.attempt"] == 1 and classify.attributes["ki.outcome"] == "done"
    assert classify.attributes["ki.producer_version"]
    trace_hex = format(classify.context.trace_id, "032x")
    assert len(chats) == 2 and {c.trace[2] for c in chats} == {trace_hex}  # X-Ki-Trace: the attempt's trace id
    http = [s for s in finished if s.parent is not None and s.parent.span_id == classify.context.span_id
            and s.attributes.get("http.request.method", s.attributes.get("http.method")) == "POST"]
    assert len(http) == 2 and {s.context.trace_id for s in http} == {classify.context.trace_id}
    statements = [s for s in finished if s.parent is not None and s.parent.span_id == classify.context.span_id
                  and ("db.statement" in s.attributes or "db.query.text" in s.attributes)]
    assert statements, "the attempt's database statements are its children"
    assert {s.context.trace_id for s in stage_spans[:2]}.isdisjoint({classify.context.trace_id})
    with ctx.db.engine.connect() as conn:
        ledger = conn.execute(text("SELECT DISTINCT trace_id FROM model_usage WHERE stage = 'classify_matter'")
                              ).scalars().all()
    assert ledger == [trace_hex]  # both calls of the attempt are booked under its trace id


def test_tracing_is_off_unless_the_environment_asks():
    assert not tracing.enabled()
    assert tracing.configure_from_env(TracingSettings()) is False
    assert tracing.configure_from_env(TracingSettings(traces_exporter="none",
                                                      exporter_otlp_endpoint="http://127.0.0.1:4318")) is False
    assert tracing.configure_from_env(TracingSettings(sdk_disabled=True,
                                                      exporter_otlp_endpoint="http://127.0.0.1:4318")) is False
    assert TracingSettings(exporter_otlp_traces_endpoint="http://127.0.0.1:4318/v1/traces").wanted
    assert TracingSettings(traces_exporter="otlp").wanted
    assert not tracing.enabled() and tracing.current_trace_id() is None
    with tracing.stage_span("fetch", 1, 1, "v1") as span:
        assert span is None
