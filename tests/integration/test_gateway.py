"""The model-gateway client and the agent loop against a real loopback HTTP gateway.

Spec: insertion-pipeline.md "Retry policy and quarantine" (error table, ProviderPermanentError
note and cooldown), "Agentic stages: Classify and Relate" (submit_result, feedback, trace ids)
and "Failure modes"; DESIGN.md "Model gateway" (tests run a real HTTP server on loopback).
The stub (tests/helpers/gateway_stub.py) is a real server; the database is a real PostgreSQL.
"""

from __future__ import annotations

import json
import time
from decimal import Decimal
from pathlib import Path

import pytest
from pydantic import BaseModel, Field
from sqlalchemy import text as sql_text

import ki.stages
from ki.adapters.agents.gateway import (
    HEADER_DOC,
    HEADER_STAGE,
    HEADER_TRACE,
    GatewayClient,
    active_cooldowns,
    model_for_stage,
    reset_cooldowns,
)
from ki.adapters.agents.loop import SUBMIT_TOOL, AgentState, Tool, chat_agent, run_policy
from ki.adapters.agents.usage import cost_usd, ledger_sink, record_usage
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.config.settings import KiConfig
from ki.core.errors import (
    ConfigurationError,
    GatewayRequestRejected,
    GatewayUnavailable,
    ModelOutputInvalid,
    ProviderPermanentError,
    ToolError,
)
from ki.core.retry import Treatment, classify_error
from ki.core.taxonomies import PIPELINE_STAGE_ORDER
from ki.domain.context import StageContext, StageOutcome
from ki.orchestration.execute import run_stage_for_object
from tests.helpers.gateway_stub import (
    GatewayStub,
    Reply,
    forbidden,
    insufficient_quota,
    malformed,
    model_not_found,
    rate_limited,
    server_error,
    sleep,
    status,
    submit,
    text,
    tool_call,
    tool_calls,
    unauthorized,
    unavailable,
    vector_for,
)

API_KEY = "sk-test-0123456789abcdefWXYZ"
MODEL = "stub-model"


@pytest.fixture
def stub():
    with GatewayStub() as s:
        yield s


def client_for(stub: GatewayStub, **kw) -> GatewayClient:
    kw.setdefault("timeout_seconds", 5)
    return GatewayClient(stub.url, API_KEY, **kw)


# --- a small agent: look things up, submit an id that must have been seen ------------------------


class LookupArgs(BaseModel):
    query: str = Field(description="what to look for")


class Answer(BaseModel):
    matter_id: str
    confidence: float = Field(ge=0, le=1)


CATALOG = {"acme": [{"id": "M-7", "title": "Acme ./. Beta"}], "beta": [{"id": "M-9", "title": "Beta GmbH"}]}


def lookup(args: LookupArgs) -> dict:
    if args.query == "boom":
        raise ToolError("search backend says: query too short")
    return {"results": CATALOG.get(args.query, [])}


LOOKUP = Tool("search_matters", "Rank existing matters for a query.", LookupArgs, lookup)


def id_was_seen(result: BaseModel, state: AgentState) -> str | None:
    if not state.appeared(result.matter_id, key="id", tool="search_matters"):
        return f"matter_id {result.matter_id!r} did not appear in any search_matters result; do not invent ids"
    return None


def run_agent(client: GatewayClient, **kw) -> object:
    args = dict(model=MODEL, system="You assign files to matters.", user="File: /acme/letter.txt",
                tools=[LOOKUP], result_model=Answer, validators=[id_was_seen], doc_id=42, stage="classify_matter")
    args.update(kw)
    return chat_agent(client, **args)


def tool_messages(req) -> list[dict]:
    return [m for m in req.body["messages"] if m["role"] == "tool"]


# --- the loop ------------------------------------------------------------------------------------


def test_tool_loop_submits_and_tags_every_call_with_one_trace(stub):
    stub.push(tool_call("search_matters", {"query": "acme"}), submit({"matter_id": "M-7", "confidence": 0.9}))
    with client_for(stub) as client:
        res = run_agent(client)
    assert res.result == Answer(matter_id="M-7", confidence=0.9)
    reqs = stub.chat_requests()
    assert len(reqs) == 2
    trace = res.provenance["trace_id"]
    assert res.provenance == {"trace_id": trace, "model": MODEL, "turns": 2, "tool_calls": 1}
    assert len(trace) == 32 and int(trace, 16) >= 0
    for req in reqs:
        assert req.path == "/v1/chat/completions"
        assert req.headers["authorization"] == f"Bearer {API_KEY}"
        assert req.trace == ("42", "classify_matter", trace)
        assert (req.headers[HEADER_DOC.lower()], req.headers[HEADER_STAGE.lower()],
                req.headers[HEADER_TRACE.lower()]) == ("42", "classify_matter", trace)
        assert req.body["metadata"] == {"ki_doc": "42", "ki_stage": "classify_matter", "ki_trace": trace}
        assert req.body["user"] == f"doc:42 stage:classify_matter trace:{trace}"
        assert req.body["model"] == MODEL
        names = [t["function"]["name"] for t in req.body["tools"]]
        assert names == ["search_matters", SUBMIT_TOOL]
        submit_spec = req.body["tools"][1]["function"]
        assert submit_spec["parameters"] == Answer.model_json_schema()
        assert req.body["tools"][0]["function"]["parameters"] == LookupArgs.model_json_schema()
        assert "tool_choice" not in req.body  # only the last allowed turn forces submit_result
    # the second turn carries the assistant's tool call and the tool's JSON result
    second = reqs[1].body["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assert second[2]["tool_calls"][0]["function"]["name"] == "search_matters"
    assert second[3]["tool_call_id"] == second[2]["tool_calls"][0]["id"]
    assert json.loads(second[3]["content"]) == {"results": CATALOG["acme"]}
    assert res.state.results_of("search_matters") == [{"results": CATALOG["acme"]}]
    assert res.usage == {"prompt_tokens": 22, "completion_tokens": 14, "total_tokens": 36}


def test_trace_ids_differ_across_agent_runs(stub):
    stub.default = lambda req: submit({"matter_id": "M-7", "confidence": 1}) if tool_messages(req) else \
        tool_call("search_matters", {"query": "acme"})
    with client_for(stub) as client:
        first = run_agent(client)
        second = run_agent(client)
    t1, t2 = first.provenance["trace_id"], second.provenance["trace_id"]
    assert t1 != t2
    traces = [r.trace[2] for r in stub.chat_requests()]
    assert traces == [t1, t1, t2, t2]


def test_schema_invalid_submission_is_fed_back_and_corrected(stub):
    stub.push(
        tool_call("search_matters", {"query": "acme"}),
        submit({"matter_id": "M-7", "confidence": 7}),  # out of range
        submit('{"matter_id": "M-7", "confid'),  # truncated JSON
        submit({"matter_id": "M-7", "confidence": 0.7}),
    )
    with client_for(stub) as client:
        res = run_agent(client)
    assert res.result.confidence == 0.7
    assert res.provenance["turns"] == 4
    assert res.state.submissions == 3
    assert len(res.state.rejections) == 2
    feedback = json.loads(tool_messages(stub.chat_requests()[2])[-1]["content"])
    assert feedback["accepted"] is False
    assert "does not match the schema" in feedback["errors"][0] and "confidence" in feedback["errors"][0]
    feedback = json.loads(tool_messages(stub.chat_requests()[3])[-1]["content"])
    assert "does not match the schema" in feedback["errors"][0]


def test_invented_id_is_rejected_by_the_validator_then_corrected(stub):
    stub.push(
        tool_call("search_matters", {"query": "acme"}),
        submit({"matter_id": "M-1234", "confidence": 0.9}),  # invented
        submit({"matter_id": "M-7", "confidence": 0.9}),
    )
    with client_for(stub) as client:
        res = run_agent(client)
    assert res.result.matter_id == "M-7"
    assert res.state.rejections == [
        "matter_id 'M-1234' did not appear in any search_matters result; do not invent ids"]
    feedback = json.loads(tool_messages(stub.chat_requests()[2])[-1]["content"])
    assert feedback["errors"] == res.state.rejections
    assert "submit_result" in feedback["instruction"]


def test_tool_errors_bad_arguments_and_unknown_tools_are_fed_back(stub):
    stub.push(
        tool_calls(("search_matters", {"query": "boom"}), ("search_matters", '{"query": '),
                   ("search_matters", {"q": "acme"}), ("no_such_tool", {})),
        tool_calls(("search_matters", {"query": "beta"}), (SUBMIT_TOOL, {"matter_id": "M-9", "confidence": 1})),
    )
    with client_for(stub) as client:
        res = run_agent(client)
    assert res.result.matter_id == "M-9"
    errors = [json.loads(m["content"])["error"] for m in tool_messages(stub.chat_requests()[1])]
    assert "query too short" in errors[0]
    assert "not valid JSON" in errors[1]
    assert "invalid arguments for search_matters" in errors[2] and "query" in errors[2]
    assert "unknown tool 'no_such_tool'" in errors[3]
    assert [r.error is None for r in res.state.tool_results] == [False, False, False, False, True]
    # the submission in the same turn is judged after the turn's other tool calls ran
    assert res.provenance["turns"] == 2 and res.provenance["tool_calls"] == 2


def test_a_model_that_never_submits_raises_model_output_invalid(stub):
    stub.default = text("I think it is matter M-7.")
    with client_for(stub) as client, pytest.raises(ModelOutputInvalid) as info:
        run_agent(client, max_turns=4)
    reqs = stub.chat_requests()
    assert len(reqs) == 4
    assert "never called submit_result" in str(info.value) and "4 turns" in str(info.value)
    assert classify_error(info.value).treatment is Treatment.retry
    # each plain answer is followed by a reminder; the last turn forces submit_result
    assert reqs[1].body["messages"][-1]["role"] == "user" and SUBMIT_TOOL in reqs[1].body["messages"][-1]["content"]
    assert reqs[-1].body["tool_choice"] == {"type": "function", "function": {"name": SUBMIT_TOOL}}
    assert all("tool_choice" not in r.body for r in reqs[:-1])
    assert len({r.trace[2] for r in reqs}) == 1


def test_a_model_that_never_converges_raises_model_output_invalid(stub):
    stub.default = submit({"matter_id": "M-404", "confidence": 0.5})
    with client_for(stub) as client, pytest.raises(ModelOutputInvalid) as info:
        run_agent(client, max_turns=3)
    assert "3 submission(s) rejected" in str(info.value) and "M-404" in str(info.value)
    assert stub.count == 3


# --- error classification ------------------------------------------------------------------------


@pytest.mark.parametrize("reply,code", [
    (unavailable(), 503), (server_error(), 500), (rate_limited(), 429), (status(502, "bad gateway"), 502),
    (status(504, "gateway timeout"), 504), (status(408, "request timeout"), 408), (status(425, "too early"), 425),
])
def test_outage_statuses_are_infrastructure(stub, reply, code):
    stub.push(reply, reply)
    with client_for(stub) as client, pytest.raises(GatewayUnavailable) as info:
        run_agent(client)
    verdict = classify_error(info.value)
    assert verdict.treatment is Treatment.infrastructure
    assert verdict.infrastructure == f"gateway answered HTTP {code}"
    assert info.value.status == code
    # no cooldown for outages: the next call reaches the gateway
    with client_for(stub) as client, pytest.raises(GatewayUnavailable):
        run_agent(client)
    assert stub.count == 2


def test_timeout_is_infrastructure(stub):
    stub.push(sleep(3.0))
    with client_for(stub, timeout_seconds=0.3) as client:
        started = time.monotonic()
        with pytest.raises(GatewayUnavailable) as info:
            run_agent(client)
        assert time.monotonic() - started < 2.5
    verdict = classify_error(info.value)
    assert verdict.treatment is Treatment.infrastructure
    assert verdict.infrastructure.startswith("gateway timed out (ReadTimeout")


def test_connection_refused_is_infrastructure():
    with GatewayStub() as s:
        url = s.url
    with GatewayClient(url, API_KEY, timeout_seconds=2) as client, pytest.raises(GatewayUnavailable) as info:
        run_agent(client)
    verdict = classify_error(info.value)
    assert verdict.treatment is Treatment.infrastructure
    assert verdict.infrastructure == "gateway transport error: ConnectError"


def test_malformed_json_body_is_model_output_invalid(stub):
    stub.push(malformed())
    with client_for(stub) as client, pytest.raises(ModelOutputInvalid) as info:
        run_agent(client)
    assert "not JSON" in str(info.value)
    assert classify_error(info.value).treatment is Treatment.retry


def test_other_client_errors_are_bounded_retries(stub):
    stub.push(status(400, "context length exceeded", err_code="context_length_exceeded"))
    with client_for(stub) as client, pytest.raises(GatewayRequestRejected) as info:
        run_agent(client)
    assert "context length exceeded" in str(info.value)
    assert classify_error(info.value).treatment is Treatment.retry


@pytest.mark.parametrize("reply,needles", [
    (unauthorized(), ["rejected the API key", "KI_LLM_API_KEY", "…WXYZ", "HTTP 401"]),
    (forbidden(), ["forbids model stub-model", "HTTP 403", "pipeline.stages.classify_matter.model"]),
    (model_not_found(MODEL), ["does not serve model stub-model", "HTTP 404", "KI_LLM_BASE_URL"]),
    (insufficient_quota(), ["exhausted its quota", "insufficient_quota", "Add credit"]),
])
def test_account_faults_are_provider_permanent_with_a_readable_cause_and_a_cooldown(stub, reply, needles):
    stub.push(reply)
    with client_for(stub) as client:
        with pytest.raises(ProviderPermanentError) as info:
            run_agent(client)
        message = str(info.value)
        for needle in needles:
            assert needle in message, (needle, message)
        assert API_KEY not in message
        assert "retry the quarantined files" in message
        verdict = classify_error(info.value)
        assert (verdict.treatment, verdict.reason) == (Treatment.deterministic, "provider_permanent")
        assert stub.count == 1
        # cooldown: sibling documents fail fast, no request reaches the gateway
        for _ in range(3):
            with pytest.raises(ProviderPermanentError) as again:
                run_agent(client, doc_id=43)
            assert "failing fast without contacting the gateway" in str(again.value)
            assert classify_error(again.value).reason == "provider_permanent"
        assert stub.count == 1
        assert (client.base_url, MODEL) in active_cooldowns()
        # another model on the same gateway is not affected
        stub.push(submit({"matter_id": "M-7", "confidence": 1}))
        with pytest.raises(ModelOutputInvalid):  # accepted schema, but M-7 was never seen → rejected
            run_agent(client, model="other-model", max_turns=1)
        assert stub.count == 2
    # a fresh client in the same process sees the same cooldown (process-wide)
    with client_for(stub) as client2, pytest.raises(ProviderPermanentError):
        run_agent(client2)
    assert stub.count == 2
    # the quarantine retry (or a test) resets it: the next call reaches the gateway again
    assert reset_cooldowns(stub.url, MODEL) == 1
    stub.push(tool_call("search_matters", {"query": "acme"}), submit({"matter_id": "M-7", "confidence": 1}))
    with client_for(stub) as client3:
        assert run_agent(client3).result.matter_id == "M-7"
    assert stub.count == 4


def test_cooldown_length_comes_from_the_environment(stub, monkeypatch):
    monkeypatch.setenv("KI_PROVIDER_FAULT_COOLDOWN_SECONDS", "0")
    stub.push(unauthorized(), unauthorized())
    with client_for(stub) as client:
        for _ in range(2):
            with pytest.raises(ProviderPermanentError):
                run_agent(client)
    assert stub.count == 2  # no cooldown: both reached the gateway
    monkeypatch.setenv("KI_PROVIDER_FAULT_COOLDOWN_SECONDS", "1")
    stub.push(unauthorized(), unauthorized())
    with client_for(stub) as client:
        with pytest.raises(ProviderPermanentError):
            run_agent(client)
        with pytest.raises(ProviderPermanentError):
            run_agent(client)
        assert stub.count == 3
        time.sleep(1.1)  # the cooldown expires by itself
        with pytest.raises(ProviderPermanentError):
            run_agent(client)
        assert stub.count == 4


def test_quota_429_without_insufficient_quota_is_an_outage_not_an_account_fault(stub):
    stub.push(rate_limited(), tool_call("search_matters", {"query": "acme"}), submit({"matter_id": "M-7",
                                                                                      "confidence": 1}))
    with client_for(stub) as client:
        with pytest.raises(GatewayUnavailable):
            run_agent(client)
        assert not active_cooldowns()
        assert run_agent(client).result.matter_id == "M-7"


# --- embeddings ----------------------------------------------------------------------------------


def test_embeddings_are_batched_ordered_and_traced(stub):
    inputs = [f"chunk {i}" for i in range(5)]
    with client_for(stub) as client:
        vectors = client.embed(model="embed-model", inputs=inputs, batch_size=2, doc_id=5, stage="index",
                               trace_id="t" * 32)
        assert client.embed(model="embed-model", inputs=[]) == []
    assert vectors == [vector_for(t) for t in inputs]
    reqs = stub.requests
    assert [r.path for r in reqs] == ["/v1/embeddings"] * 3
    assert [r.body["input"] for r in reqs] == [inputs[0:2], inputs[2:4], inputs[4:5]]
    assert all(r.trace == ("5", "index", "t" * 32) for r in reqs)


def test_embeddings_faults_are_classified_like_chat(stub):
    stub.push(unavailable(), model_not_found("embed-model"))
    with client_for(stub) as client:
        with pytest.raises(GatewayUnavailable):
            client.embed(model="embed-model", inputs=["a"])
        with pytest.raises(ProviderPermanentError):
            client.embed(model="embed-model", inputs=["a"])
        with pytest.raises(ProviderPermanentError):
            client.embed(model="embed-model", inputs=["a"])
    assert stub.count == 2


# --- configuration -------------------------------------------------------------------------------


def test_model_for_stage(monkeypatch):
    config = KiConfig.model_validate({"pipeline": {"stages": {"relate": {"model": "relate-model", "enabled": False}}}})
    monkeypatch.setenv("KI_LLM_MODEL", "default-model")
    assert model_for_stage(config, "relate") == "relate-model"
    assert model_for_stage(config, "classify_matter") == "default-model"
    monkeypatch.delenv("KI_LLM_MODEL")
    with pytest.raises(ConfigurationError, match="pipeline.stages.classify_matter.model"):
        model_for_stage(config, "classify_matter")


def test_client_from_env(stub, monkeypatch):
    monkeypatch.delenv("KI_LLM_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="KI_LLM_BASE_URL"):
        GatewayClient.from_env()
    monkeypatch.setenv("KI_LLM_BASE_URL", stub.url + "/v1/")
    monkeypatch.setenv("KI_LLM_API_KEY", "sk-from-env")
    stub.push(text("hi"))
    with GatewayClient.from_env(timeout_seconds=5) as client:
        assert client.base_url == stub.url
        response = client.chat(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert response.content == "hi" and response.tool_calls == []
    assert stub.requests[0].headers["authorization"] == "Bearer sk-from-env"
    assert stub.requests[0].path == "/v1/chat/completions"
    assert len(stub.requests[0].trace[2]) == 32  # a trace id even when the caller gave none


# --- the usage ledger (real PostgreSQL) ----------------------------------------------------------


def usage_rows(ctx) -> list[dict]:
    with ctx.db.engine.connect() as conn:
        return [dict(r) for r in conn.execute(sql_text("SELECT * FROM model_usage ORDER BY id")).mappings()]


def test_usage_rows_are_written_per_call(ctx, stub):
    stub.push(tool_call("search_matters", {"query": "acme"}), submit({"matter_id": "M-7", "confidence": 1}))
    with client_for(stub, usage_sink=ledger_sink(ctx.db)) as client:
        res = run_agent(client)
        client.embed(model="text-embedding-3-small", inputs=["a", "b", "c"], batch_size=2, doc_id=42,
                     stage="index")
    rows = usage_rows(ctx)
    assert len(rows) == 4
    chat, embed = rows[:2], rows[2:]
    for row in chat:
        assert (row["stage"], row["model"], row["source_object_id"], row["trace_id"]) == (
            "classify_matter", MODEL, 42, res.provenance["trace_id"])
        assert (row["prompt_tokens"], row["completion_tokens"], row["total_tokens"]) == (11, 7, 18)
        assert row["cost_usd"] is None  # unknown model: unknown cost, not free
        assert row["latency_ms"] is not None and row["latency_ms"] >= 0
        assert row["at"].tzinfo is not None
    assert len({r["trace_id"] for r in embed}) == 1 and embed[0]["trace_id"] != res.provenance["trace_id"]
    assert [(r["stage"], r["model"], r["prompt_tokens"], r["completion_tokens"]) for r in embed] == [
        ("index", "text-embedding-3-small", 11, 0)] * 2
    assert embed[0]["cost_usd"] == Decimal("0.00000022")  # 11 tokens × $0.02 / 1M


def test_record_usage_prices_known_models(ctx):
    rid = record_usage(ctx.db, stage="relate", model="openai/gpt-4o-mini", source_object_id=None, trace_id="x",
                       prompt_tokens=1_000_000, completion_tokens=500_000, latency_ms=1234)
    row = usage_rows(ctx)[0]
    assert row["id"] == rid
    assert row["cost_usd"] == Decimal("0.45") == cost_usd("gpt-4o-mini", 1_000_000, 500_000)
    assert row["total_tokens"] == 1_500_000


def test_a_failing_ledger_never_fails_the_call(stub):
    def broken(record):
        raise RuntimeError("database down")

    stub.push(tool_call("search_matters", {"query": "acme"}), submit({"matter_id": "M-7", "confidence": 1}))
    with client_for(stub, usage_sink=broken) as client:
        assert run_agent(client).result.matter_id == "M-7"


# --- the rules policy drives the same tools and validators ---------------------------------------


class FolderPolicy:
    """Offline: search by the top-level folder name, take the first hit."""

    def __init__(self, invent_first: bool = False):
        self.invent_first = invent_first

    def decide(self, tools, state):
        if self.invent_first and not state.rejections:
            return {"matter_id": "M-0000", "confidence": 1}
        hits = state.call("search_matters", query="acme")["results"]
        return Answer(matter_id=hits[0]["id"], confidence=0.5)


def test_rules_policy_path_uses_the_same_tools_and_validators():
    res = run_policy(FolderPolicy(), [LOOKUP], Answer, [id_was_seen], doc_id=42, stage="classify_matter")
    assert res.result == Answer(matter_id="M-7", confidence=0.5)
    trace = res.provenance.pop("trace_id")
    assert len(trace) == 32
    assert res.provenance == {"model": "rules", "turns": 1, "tool_calls": 1}
    assert res.state.results_of("search_matters") == [{"results": CATALOG["acme"]}]
    # an invented id is rejected by the same validator; the policy reads the rejection and corrects
    res = run_policy(FolderPolicy(invent_first=True), [LOOKUP], Answer, [id_was_seen])
    assert res.result.matter_id == "M-7" and res.provenance["turns"] == 2
    assert "M-0000" in res.state.rejections[0]


def test_a_rules_policy_that_keeps_inventing_raises_model_output_invalid():
    class Liar:
        def decide(self, tools, state):
            return Answer(matter_id="M-0000", confidence=1)

    with pytest.raises(ModelOutputInvalid, match="M-0000"):
        run_policy(Liar(), [LOOKUP], Answer, [id_was_seen], max_rounds=2)
    a = run_policy(FolderPolicy(), [LOOKUP], Answer, [id_was_seen])
    b = run_policy(FolderPolicy(), [LOOKUP], Answer, [id_was_seen])
    assert a.provenance["trace_id"] != b.provenance["trace_id"]


# --- through ki's real executor ------------------------------------------------------------------


class Verdict(BaseModel):
    label: str


def gateway_handler(url: str, *, timeout_seconds: float = 5):
    """A test ``index`` handler: one chat_agent call per stage execution, usage to the ledger."""

    def handle(sctx: StageContext) -> StageOutcome:
        with GatewayClient(url, API_KEY, timeout_seconds=timeout_seconds,
                           usage_sink=ledger_sink(sctx.pipeline.db)) as client:
            res = chat_agent(client, model=model_for_stage(sctx.config, sctx.stage), system="Label the file.",
                             user=sctx.obj.path, tools=[], result_model=Verdict, validators=[],
                             doc_id=sctx.obj.id, stage=sctx.stage, max_turns=3)
        return StageOutcome(status="done", details={"trace_id": res.provenance["trace_id"]})

    return handle


def make_docs(ctx, root: Path, n: int) -> list[int]:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"doc{i:03d}.txt").write_text(f"Schreiben Nr. {i} an die Mandantschaft.\n", encoding="utf-8")
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    with ctx.db.engine.connect() as conn:
        return list(conn.execute(sql_text("SELECT id FROM source_object WHERE source_id = :s ORDER BY external_id"),
                                 {"s": sid}).scalars())


def index_row(ctx, oid: int) -> dict:
    with ctx.db.engine.connect() as conn:
        return dict(conn.execute(sql_text("SELECT * FROM processing_state WHERE source_object_id = :id "
                                          "AND stage = 'index'"), {"id": oid}).mappings().one())


def test_executor_records_outage_as_infrastructure_and_account_fault_as_quarantine(
        ctx, stub, tmp_path, monkeypatch):
    monkeypatch.setenv("KI_LLM_MODEL", MODEL)
    monkeypatch.setitem(ki.stages.STAGE_HANDLERS, "index", gateway_handler(stub.url))
    oid_a, oid_b = make_docs(ctx, tmp_path / "src", 2)
    for oid in (oid_a, oid_b):
        for stage in PIPELINE_STAGE_ORDER[:-1]:
            assert run_stage_for_object(ctx, stage, oid).kind in ("done", "skipped")
    stub.push(unavailable())
    assert run_stage_for_object(ctx, "index", oid_a).kind == "retry"
    row = index_row(ctx, oid_a)
    assert row["status"] == "failed"
    assert row["last_error"]["class"] == "GatewayUnavailable"
    assert row["last_error"]["infrastructure"] == "gateway answered HTTP 503"
    assert row["last_error"]["deterministic"] is False

    stub.push(unauthorized())
    assert run_stage_for_object(ctx, "index", oid_b).kind == "quarantined"
    row = index_row(ctx, oid_b)
    assert row["status"] == "quarantined" and row["attempts"] == 1
    err = row["last_error"]
    assert (err["class"], err["reason"], err["deterministic"], err["infrastructure"]) == (
        "ProviderPermanentError", "provider_permanent", True, None)
    assert "rejected the API key" in err["message"]
    assert stub.count == 2


def test_gateway_outage_across_20_documents_quarantines_none(make_ctx, tmp_path, monkeypatch):
    monkeypatch.setenv("KI_PIPELINE__RETRY_BASE_SECONDS", "0.05")
    monkeypatch.setenv("KI_LLM_MODEL", MODEL)
    ctx = make_ctx(infrastructure_retry_max_seconds=0.4)
    n_docs, max_attempts = 20, ctx.config.pipeline.stage("index").max_attempts
    ids = make_docs(ctx, tmp_path / "estate", n_docs)
    outage = n_docs * max_attempts + 5  # more failures than 20 × the attempt budget: someone exceeds it
    with GatewayStub(default=submit({"label": "letter"})) as stub:
        stub.fail_first(outage, unavailable())
        monkeypatch.setitem(ki.stages.STAGE_HANDLERS, "index", gateway_handler(stub.url))
        summary = launch_insertion(ctx, trigger="test", wait_for_retries_seconds=30, workers=4)
        assert stub.count == outage + n_docs
    assert summary.status == "completed"
    assert summary.counters.quarantined == 0
    assert summary.counters.retried == outage
    rows = [index_row(ctx, oid) for oid in ids]
    assert [r["status"] for r in rows] == ["done"] * n_docs
    assert sum(r["attempts"] for r in rows) == outage + n_docs
    assert max(r["attempts"] for r in rows) > max_attempts  # infrastructure faults are exempt from the limit
    with ctx.db.engine.connect() as conn:
        quarantined = conn.execute(sql_text("SELECT count(*) FROM processing_state WHERE status = 'quarantined'"))
        assert quarantined.scalar() == 0
    usage = usage_rows(ctx)
    assert len(usage) == n_docs  # one paid call per document; failed calls cost nothing
    assert sorted(r["source_object_id"] for r in usage) == sorted(ids)
    assert {r["stage"] for r in usage} == {"index"}


def test_reply_builders_are_plain_data():
    # the stub's script entries are immutable values: one Reply may be reused across requests
    r = submit({"label": "x"})
    assert isinstance(r, Reply) and r.calls == ((SUBMIT_TOOL, '{"label": "x"}'),)
