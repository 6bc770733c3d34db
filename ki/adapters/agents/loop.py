"""``chat_agent``: the bounded tool-calling loop, and ``run_policy``: the same tools without a model.

Spec: insertion-pipeline.md "Agentic stages: Classify and Relate": the model gathers
evidence with tools and finishes by calling a synthetic ``submit_result`` tool whose
arguments are the stage's Pydantic schema; a schema-invalid or validator-rejected
submission is fed back into the loop for correction; a loop that never converges
raises :class:`~ki.core.errors.ModelOutputInvalid` and the stage retries as a whole.
Every attempt gets a fresh trace id, tagged onto each gateway call and written into
the result's provenance. "Failure modes": schema-invalid output is corrected inside
the loop where possible, otherwise ModelOutputInvalid (bounded retry).

DESIGN.md "Two deployments": the offline rules policies make the same decisions
without a model — a :class:`Policy` drives the *same* :class:`Tool` objects and the
*same* validators through :func:`run_policy`, which returns the same
:class:`AgentResult` shape (``provenance["model"] == "rules"``).

Tools must not hold a database transaction across calls (each opens its own short
session); a tool signals a failure the model should read and work around by raising
:class:`ToolError`. Any other exception ends the loop and is classified by the
executor (e.g. a database outage).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from ki.adapters.agents.gateway import GatewayClient
from ki.adapters.observability.tracing import current_trace_id
from ki.core.errors import ModelOutputInvalid, ToolError

SUBMIT_TOOL = "submit_result"
RULES_MODEL = "rules"
DEFAULT_MAX_TOOL_RESULT_CHARS = 40_000

SUBMIT_DESCRIPTION = (
    "Submit your final answer. The arguments are the answer itself and must satisfy this schema. "
    "Call it once, when your evidence is complete; if the answer is rejected you receive the reasons "
    "and may correct it and call submit_result again."
)
NUDGE_PLAIN_TEXT = (
    "Plain-text answers are not read. Use the tools to gather evidence if you need more, then call "
    f"{SUBMIT_TOOL} with your final answer as its arguments."
)


@dataclass(frozen=True)
class Tool:
    """One tool the agent may call.

    Attributes:
        name: function name the model sees (``[a-zA-Z0-9_-]``, not ``submit_result``).
        description: what the tool does and when (not) to use it — the model reads this.
        args_model: pydantic model of the arguments; its JSON schema is the tool's ``parameters``.
        fn: ``fn(args) -> result``, called with a validated ``args_model`` instance; the result must
            be JSON-serialisable (dict/list/str/number/None). Raise :class:`ToolError` for errors
            the caller should see.
    """

    name: str
    description: str
    args_model: type[BaseModel]
    fn: Callable[[Any], Any]

    def spec(self) -> dict[str, Any]:
        """The OpenAI function-tool spec ``{"type": "function", "function": {...}}``."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.args_model.model_json_schema()}}


@dataclass(frozen=True)
class ToolResult:
    """One recorded tool call: ``result`` when it succeeded, else ``error`` (the text fed back)."""

    tool: str
    arguments: dict[str, Any]
    result: Any
    error: str | None
    turn: int


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if a == b:
        return True
    return isinstance(a, str | int) and isinstance(b, str | int) and str(a) == str(b)


def _contains(node: Any, value: Any, key: str | None) -> bool:
    if isinstance(node, dict):
        for k, v in node.items():
            if (key is None or k == key) and not isinstance(v, dict | list) and _same(v, value):
                return True
            if _contains(v, value, key):
                return True
        return False
    if isinstance(node, list | tuple):
        return any(_contains(item, value, key) for item in node)
    return key is None and _same(node, value)


@dataclass
class AgentState:
    """What one agent run has seen so far; validators read it.

    Attributes:
        tools: name → Tool offered in this run.
        tool_results: every tool call in order (successful and failed).
        turns: gateway calls made (chat_agent) or policy rounds (run_policy).
        tool_calls: tool calls executed, ``submit_result`` excluded.
        submissions: submit attempts (accepted or not).
        rejections: every rejection message fed back, in order.
        trace_id / doc_id / stage: the run's trace tags.
    """

    tools: dict[str, Tool]
    trace_id: str
    doc_id: str | None = None
    stage: str | None = None
    tool_results: list[ToolResult] = field(default_factory=list)
    turns: int = 0
    tool_calls: int = 0
    submissions: int = 0
    rejections: list[str] = field(default_factory=list)

    def call(self, name: str, /, **arguments: Any) -> Any:
        """Validate ``arguments`` against the tool's args model, run it, record and return its result.

        Raises:
            ToolError: unknown tool, invalid arguments, or the tool's own ToolError (recorded too).
        """
        tool = self.tools.get(name)
        if tool is None:
            message = f"unknown tool {name!r}; available: {sorted(self.tools)} and {SUBMIT_TOOL}"
            self._record(name, arguments, None, message)
            raise ToolError(message)
        try:
            args = tool.args_model.model_validate(arguments)
        except ValidationError as exc:
            message = f"invalid arguments for {name}: {_validation_summary(exc)}"
            self._record(name, arguments, None, message)
            raise ToolError(message) from exc
        self.tool_calls += 1
        try:
            result = tool.fn(args)
        except ToolError as exc:
            self._record(name, arguments, None, str(exc))
            raise
        self._record(name, arguments, result, None)
        return result

    def _record(self, name: str, arguments: dict[str, Any], result: Any, error: str | None) -> None:
        self.tool_results.append(ToolResult(tool=name, arguments=dict(arguments), result=result, error=error,
                                            turn=self.turns))

    def results_of(self, tool: str) -> list[Any]:
        """The successful results of ``tool``, in call order."""
        return [r.result for r in self.tool_results if r.tool == tool and r.error is None]

    def appeared(self, value: Any, *, key: str | None = None, tool: str | None = None) -> bool:
        """Did ``value`` appear in a successful tool result (optionally under dict key ``key``,
        optionally only in results of ``tool``)? ``12`` and ``"12"`` count as the same id.

        This is the check behind "a submitted id must have appeared in a tool result, never invented".
        """
        return any(_contains(r.result, value, key) for r in self.tool_results
                   if r.error is None and (tool is None or r.tool == tool))


Validator = Callable[[BaseModel, AgentState], "str | None"]


@dataclass
class AgentResult:
    """An accepted result.

    Attributes:
        result: the validated ``result_model`` instance.
        provenance: ``{"trace_id": str, "model": str, "turns": int, "tool_calls": int}``; ``model`` is
            ``"rules"`` for :func:`run_policy`. Stages store it on the rows they write.
        state: the run's full :class:`AgentState` (tool results, rejections).
        usage: summed ``prompt_tokens`` / ``completion_tokens`` / ``total_tokens`` (0 for rules).
    """

    result: BaseModel
    provenance: dict[str, Any]
    state: AgentState
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0,
                                                           "total_tokens": 0})


@runtime_checkable
class Policy(Protocol):
    """An offline decision-maker that drives the same tools as the model.

    ``decide(tools, state)`` calls tools through ``state.call(name, **args)`` (so their results
    are recorded for the validators), reads ``state.rejections`` from earlier rounds, and returns
    the result (a ``result_model`` instance, another BaseModel or a dict to validate into it).
    """

    def decide(self, tools: Sequence[Tool], state: AgentState) -> BaseModel: ...


# --- helpers ---------------------------------------------------------------------------------------


def _validation_summary(exc: ValidationError, limit: int = 20) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_context=False)[:limit]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        parts.append(f"{loc}: {err.get('msg')}")
    more = exc.error_count() - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _tool_map(tools: Sequence[Tool]) -> dict[str, Tool]:
    out: dict[str, Tool] = {}
    for tool in tools:
        if tool.name == SUBMIT_TOOL:
            raise TypeError(f"{SUBMIT_TOOL} is reserved for the result; rename the tool")
        if tool.name in out:
            raise TypeError(f"two tools are named {tool.name!r}")
        out[tool.name] = tool
    return out


def _dump(value: Any, limit: int) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > limit:
        text = text[:limit] + f"… [truncated: {len(text)} characters in total; narrow the request]"
    return text


def _judge(result: BaseModel, validators: Sequence[Validator], state: AgentState) -> list[str]:
    problems = []
    for validator in validators:
        verdict = validator(result, state)
        if verdict:
            problems.append(verdict)
    return problems


def _provenance(trace_id: str, model: str, state: AgentState) -> dict[str, Any]:
    return {"trace_id": trace_id, "model": model, "turns": state.turns, "tool_calls": state.tool_calls}


# --- the model loop --------------------------------------------------------------------------------


def chat_agent(
    client: GatewayClient,
    *,
    model: str,
    system: str,
    user: str,
    tools: list[Tool],
    result_model: type[BaseModel],
    validators: list[Callable[[BaseModel, AgentState], str | None]],
    max_turns: int = 12,
    doc_id: str | int | None,
    stage: str,
    max_tool_result_chars: int = DEFAULT_MAX_TOOL_RESULT_CHARS,
) -> AgentResult:
    """Run a bounded tool-calling conversation until ``submit_result`` is accepted.

    Each turn is one gateway call. Tool calls of a turn run in order, ``submit_result`` last;
    a submission is accepted when its arguments validate as ``result_model`` and every validator
    returns None. Otherwise the reasons go back as the tool's answer and the loop continues;
    a plain-text answer is answered with a reminder to submit. The last turn forces
    ``tool_choice`` to ``submit_result``.

    Args:
        client: the gateway client (usage is recorded through its ``usage_sink``).
        model: gateway model (see :func:`ki.adapters.agents.gateway.model_for_stage`).
        system / user: the system prompt and the user payload.
        tools: the evidence tools (names unique, not ``submit_result``).
        result_model: the answer's schema; ``submit_result``'s parameters are its JSON schema.
        validators: ``validator(result, state) -> None | rejection message``.
        max_turns: gateway calls at most (≥ 1).
        doc_id / stage: trace tags on every call (``X-Ki-Doc`` / ``X-Ki-Stage``).
        max_tool_result_chars: a tool result's JSON is cut to this many characters.
    Returns: :class:`AgentResult` with ``provenance = {trace_id, model, turns, tool_calls}``; the
        trace id is a fresh uuid4 hex, identical on every gateway call of this run.
    Raises:
        ModelOutputInvalid: no accepted submission within ``max_turns`` (never submitted, or every
            submission rejected), or the gateway's answer was malformed (retried by the stage).
        GatewayUnavailable / ProviderPermanentError / GatewayRequestRejected: from the gateway.
        Any non-ToolError exception a tool raises.
    Spec: insertion-pipeline.md "Agentic stages: Classify and Relate", "Failure modes".
    """
    if max_turns < 1:
        raise TypeError("max_turns must be >= 1")
    tool_map = _tool_map(tools)
    trace_id = current_trace_id() or uuid.uuid4().hex
    state = AgentState(tools=tool_map, trace_id=trace_id, doc_id=None if doc_id is None else str(doc_id),
                       stage=stage)
    specs = [t.spec() for t in tools]
    specs.append({"type": "function", "function": {"name": SUBMIT_TOOL, "description": SUBMIT_DESCRIPTION,
                                                   "parameters": result_model.model_json_schema()}})
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    plain_answers = 0

    for turn in range(1, max_turns + 1):
        state.turns = turn
        force = {"type": "function", "function": {"name": SUBMIT_TOOL}} if turn == max_turns else None
        response = client.chat(model=model, messages=messages, tools=specs, tool_choice=force, doc_id=doc_id,
                               stage=stage, trace_id=trace_id)
        for key in usage:
            usage[key] += getattr(response.usage, key)
        messages.append(response.message)
        if not response.tool_calls:
            plain_answers += 1
            messages.append({"role": "user", "content": NUDGE_PLAIN_TEXT})
            continue
        ordered = [c for c in response.tool_calls if c.name != SUBMIT_TOOL] + \
                  [c for c in response.tool_calls if c.name == SUBMIT_TOOL]
        accepted: BaseModel | None = None
        for call in ordered:
            if accepted is not None:  # answer every call id so the transcript stays well-formed
                messages.append({"role": "tool", "tool_call_id": call.id, "content": '{"skipped": true}'})
                continue
            if call.name == SUBMIT_TOOL:
                accepted, feedback = _try_submit(call.arguments, result_model, validators, state)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": feedback})
                continue
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": _run_tool_call(state, call.name, call.arguments, max_tool_result_chars)})
        if accepted is not None:
            return AgentResult(result=accepted, provenance=_provenance(trace_id, model, state), state=state,
                               usage=usage)

    last = state.rejections[-1] if state.rejections else None
    what = (f"{state.submissions} submission(s) rejected, last: {last}" if state.submissions
            else f"it never called {SUBMIT_TOOL} ({plain_answers} plain-text answer(s), "
                 f"{state.tool_calls} tool call(s))")
    raise ModelOutputInvalid(
        f"{stage} agent for document {doc_id} (model {model}, trace {trace_id}) produced no acceptable result "
        f"in {max_turns} turns: {what}"
    )


def _run_tool_call(state: AgentState, name: str, raw_arguments: str, limit: int) -> str:
    try:
        arguments = json.loads(raw_arguments or "{}")
    except json.JSONDecodeError as exc:
        message = f"arguments of {name} are not valid JSON ({exc}); send a JSON object"
        state._record(name, {"_raw": raw_arguments[:2000]}, None, message)
        return _dump({"error": message}, limit)
    if not isinstance(arguments, dict):
        message = f"arguments of {name} must be a JSON object"
        state._record(name, {"_raw": arguments}, None, message)
        return _dump({"error": message}, limit)
    try:
        result = state.call(name, **arguments)
    except ToolError as exc:
        return _dump({"error": str(exc)}, limit)
    return _dump(result, limit)


def _try_submit(raw_arguments: str, result_model: type[BaseModel], validators: Sequence[Validator],
                state: AgentState) -> tuple[BaseModel | None, str]:
    """(accepted result or None, the tool message to feed back)."""
    state.submissions += 1
    try:
        result = result_model.model_validate_json(raw_arguments or "{}")
    except ValidationError as exc:
        problems = [f"the submission does not match the schema: {_validation_summary(exc)}"]
    else:
        problems = _judge(result, validators, state)
        if not problems:
            return result, json.dumps({"accepted": True})
    state.rejections.extend(problems)
    return None, json.dumps({"accepted": False, "errors": problems,
                             "instruction": f"Correct the answer (use the tools if needed) and call {SUBMIT_TOOL} "
                                            "again."}, ensure_ascii=False)


# --- the offline path ------------------------------------------------------------------------------


def run_policy(
    policy: Policy,
    tools: list[Tool],
    result_model: type[BaseModel],
    validators: list[Callable[[BaseModel, AgentState], str | None]],
    *,
    max_rounds: int = 3,
    doc_id: str | int | None = None,
    stage: str | None = None,
) -> AgentResult:
    """Let a rules :class:`Policy` decide with the same tools and validators as :func:`chat_agent`.

    Each round calls ``policy.decide(tools, state)``; the answer is validated into ``result_model``
    and judged by ``validators``; rejections are appended to ``state.rejections`` for the next round.

    Returns: :class:`AgentResult` with ``provenance = {trace_id (fresh uuid4 hex), "model": "rules",
        turns (rounds), tool_calls}``.
    Raises:
        ModelOutputInvalid: no acceptable answer in ``max_rounds`` rounds.
        ToolError or anything else the policy lets escape.
    Spec: DESIGN.md "Two deployments" (rules policies make the same decisions offline).
    """
    if max_rounds < 1:
        raise TypeError("max_rounds must be >= 1")
    trace_id = current_trace_id() or uuid.uuid4().hex
    state = AgentState(tools=_tool_map(tools), trace_id=trace_id, doc_id=None if doc_id is None else str(doc_id),
                       stage=stage)
    for round_no in range(1, max_rounds + 1):
        state.turns = round_no
        state.submissions += 1
        answer: Any = policy.decide(tools, state)
        try:
            if isinstance(answer, result_model):
                result = answer
            elif isinstance(answer, BaseModel):
                result = result_model.model_validate(answer.model_dump())
            else:
                result = result_model.model_validate(answer)
        except ValidationError as exc:
            problems = [f"the answer does not match the schema: {_validation_summary(exc)}"]
        else:
            problems = _judge(result, validators, state)
            if not problems:
                return AgentResult(result=result, provenance=_provenance(trace_id, RULES_MODEL, state), state=state)
        state.rejections.extend(problems)
    raise ModelOutputInvalid(
        f"rules policy {type(policy).__name__} for document {doc_id} (stage {stage}, trace {trace_id}) produced no "
        f"acceptable result in {max_rounds} rounds; last: {state.rejections[-1] if state.rejections else None}"
    )
