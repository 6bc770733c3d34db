"""Running an agentic stage: the model loop when a gateway is configured, else the rules policy.

Spec: insertion-pipeline.md "Agentic stages: Classify and Relate"; DESIGN.md "Two deployments"
(the rules policies are the embedded default and make the same decisions through the same tools
and validators). The gateway is configured by ``KI_LLM_BASE_URL``; its usage goes to the ledger.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from ki.adapters.agents.gateway import model_for_stage
from ki.adapters.agents.loop import AgentResult, AgentState, Policy, Tool, chat_agent, run_policy
from ki.adapters.agents.shared_gateway import gateway
from ki.adapters.agents.usage import ledger_sink
from ki.config.process import LlmSettings, current
from ki.domain.context import StageContext

Validator = Callable[[BaseModel, AgentState], "str | None"]


def gateway_configured() -> bool:
    """Whether a model gateway is configured (``KI_LLM_BASE_URL`` set and not empty)."""
    return current(LlmSettings).configured


def run_agent(ctx: StageContext, *, system: str, user: str | Callable[[], str], tools: list[Tool],
              result_model: type[BaseModel], validators: list[Validator], policy: Policy,
              max_turns: int = 12) -> AgentResult:
    """Decide with the model (``chat_agent``) when a gateway is configured, else with ``policy`` (``run_policy``).

    ``user`` is the prompt payload, or a function building it (called only when the model runs: the
    rules policy reads what it needs through the tools).

    Returns: the accepted :class:`~ki.adapters.agents.loop.AgentResult` (``provenance["model"]`` is the gateway
        model, or ``"rules"``).
    Raises: ModelOutputInvalid (no acceptable answer), gateway errors (GatewayUnavailable,
        ProviderPermanentError, GatewayRequestRejected), ConfigurationError (no model assigned).
    """
    if not gateway_configured():
        return run_policy(policy, tools, result_model, validators, doc_id=ctx.obj.id, stage=ctx.stage)
    model = model_for_stage(ctx.config, ctx.stage)
    user = user() if callable(user) else user
    client = gateway(ledger_sink(ctx.pipeline.db, default_stage=ctx.stage))
    return chat_agent(client, model=model, system=system, user=user, tools=tools, result_model=result_model,
                      validators=validators, max_turns=max_turns, doc_id=ctx.obj.id, stage=ctx.stage)
