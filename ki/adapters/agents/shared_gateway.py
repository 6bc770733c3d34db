"""The process's gateway client (:class:`ki.adapters.agents.gateway.GatewayClient`), shared
(:mod:`ki.core.shared_clients`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ki.adapters.cooldown import cooldown_seconds
from ki.config.process import LlmSettings, current
from ki.core.shared_clients import shared


def gateway(usage_sink: Callable[[Any], None] | None = None) -> Any:
    """The process's :class:`ki.adapters.agents.gateway.GatewayClient` on ``KI_LLM_BASE_URL`` / ``KI_LLM_API_KEY``.

    One connection pool per (URL, key, cooldown). ``usage_sink`` (e.g. ``ki.adapters.agents.usage.ledger_sink``)
    gets this caller's token usage: the result is then a view of the shared client that reports to it
    (do not close it; :func:`reset` closes the pool).

    Raises:
        ConfigurationError: no gateway is configured, or a ``KI_`` variable is invalid.
    """
    from ki.adapters.agents.gateway import GatewayClient

    llm = current(LlmSettings)
    key = (llm.base_url, llm.key(), cooldown_seconds())
    client = shared("gateway", key, GatewayClient.from_env)
    return client if usage_sink is None else client.with_usage_sink(usage_sink)
