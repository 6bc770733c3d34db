"""What a gateway call returns: a chat completion, its tool calls and the token usage of each call.

Spec: insertion-pipeline.md "Agentic stages" (the trace tags a call carries) and "Token usage"
(what the usage ledger records). Plain values: no I/O here; :class:`ki.adapters.agents.gateway.GatewayClient`
builds them and hands each :class:`UsageRecord` to its ``usage_sink``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class UsageRecord:
    """Token usage of one gateway call, as handed to ``usage_sink``.

    Attributes:
        kind: ``chat`` or ``embeddings``.
        model: the model requested (the ledger key; the gateway may report a resolved name).
        stage / doc_id / trace_id: the call's trace tags (None when the caller gave none).
        prompt_tokens / completion_tokens / total_tokens: as reported (0 when absent).
        latency_ms: wall time of the HTTP exchange in milliseconds.
        at: when the call finished (UTC).
    """

    kind: str
    model: str
    stage: str | None
    doc_id: str | None
    trace_id: str | None
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    latency_ms: int
    at: datetime


UsageSink = Callable[[UsageRecord], None]


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for: ``arguments`` is the raw JSON text it produced."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatResponse:
    """One chat completion.

    Attributes:
        content: the assistant's text (None when it only called tools).
        tool_calls: function calls in the order given.
        message: the assistant message to append to the conversation verbatim
            (role, content, tool_calls with ids), so the next turn is well-formed.
        finish_reason: as reported (``stop``, ``tool_calls``, ``length``, ...).
        usage: the call's token usage.
        model: the model the gateway reports having run (falls back to the requested one).
    """

    content: str | None
    tool_calls: list[ToolCall]
    message: dict[str, Any]
    finish_reason: str | None
    usage: UsageRecord
    model: str
