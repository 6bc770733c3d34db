"""The process-wide clients, built once from settings, and the one reset (DESIGN.md "Layout").

A process shares one gateway client, one embedder per index setting, one Docling Serve client,
one OpenSearch client per node (and the Hatchet clients): each connection pool is made once and
reused by every stage execution. They are all made through :func:`ki.core.shared_clients.shared` under a key
naming the settings that shape the client, so a changed setting (another ``KI_LLM_BASE_URL``, another
``components.docling_url``) gets a new client while an unchanged one is reused. The typed accessors live
beside their clients and are reached here by name for the layers above (``services.gateway``,
``services.docling``, ``services.query_embedder``, ``services.stage_embedder``); the layers below import
them from their own modules and never this one, so the imports point down.

:func:`reset` closes and forgets every client, clears the provider-fault cooldowns
(:mod:`ki.adapters.cooldown`), the circuit breakers (:mod:`ki.adapters.breaker`) and the parsed process settings, and
runs
the hooks of modules that keep state derived from a client (:func:`on_reset`). Tests call it where they
used to reset each cache by hand; an operator's quarantine retry resets the cooldowns only (``reset_cooldowns``).
"""

from __future__ import annotations

from typing import Any

from ki.adapters.breaker import BREAKERS
from ki.adapters.cooldown import PROVIDER_COOLDOWNS
from ki.config.process import forget_parsed
from ki.core.served import SERVED
from ki.core.shared_clients import close_clients, on_reset, run_reset_hooks, shared

__all__ = ["on_reset", "reset", "shared"]  # and, on first use: docling, gateway, query_embedder


def __getattr__(name: str) -> Any:
    """``services.gateway`` / ``services.docling`` / ``services.query_embedder``: the accessor of that client,
    imported on first use (a process that never builds a Docling client never imports it)."""
    if name == "gateway":
        from ki.adapters.agents.shared_gateway import gateway

        return gateway
    if name == "docling":
        from ki.adapters.convert.docling.shared import docling

        return docling
    if name in ("query_embedder", "stage_embedder"):
        from ki.adapters.search import query_embedder

        return getattr(query_embedder, name)
    raise AttributeError(f"module 'ki.app.wiring' has no attribute {name!r}")


def reset() -> None:
    """Close and forget every shared client, clear the cooldowns, breakers and the parsed settings, run the hooks."""
    close_clients()
    PROVIDER_COOLDOWNS.reset()
    BREAKERS.reset()
    SERVED.reset()
    forget_parsed()
    run_reset_hooks()
