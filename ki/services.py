"""The process-wide clients, built once from settings, and the one reset (DESIGN.md "Layout").

A process shares one gateway client, one embedder per index setting, one Docling Serve client,
one OpenSearch client per node (and the Hatchet clients): each connection pool is made once and
reused by every stage execution. They are all made through :func:`ki.shared_clients.shared` under a key
naming the settings that shape the client, so a changed setting (another ``KI_LLM_BASE_URL``, another
``components.docling_url``) gets a new client while an unchanged one is reused. The typed accessors live
beside their clients and are reached here by name for the layers above (``services.gateway``,
``services.docling``, ``services.query_embedder``; :func:`stage_embedder` is here); the layers below import
them from their own modules and never this one, so the imports point down.

:func:`reset` closes and forgets every client, clears the provider-fault cooldowns
(:mod:`ki.cooldown`), the circuit breakers (:mod:`ki.breaker`) and the parsed process settings, and runs
the hooks of modules that keep state derived from a client (:func:`on_reset`). Tests call it where they
used to reset each cache by hand; an operator's quarantine retry resets the cooldowns only (``reset_cooldowns``).
"""

from __future__ import annotations

from typing import Any

from ki.breaker import BREAKERS
from ki.config.process import LlmSettings, current, forget_parsed
from ki.cooldown import PROVIDER_COOLDOWNS
from ki.served import SERVED
from ki.shared_clients import close_clients, on_reset, run_reset_hooks, shared

__all__ = ["on_reset", "reset", "shared", "stage_embedder"]  # and, on first use: docling, gateway, query_embedder


def __getattr__(name: str) -> Any:
    """``services.gateway`` / ``services.docling`` / ``services.query_embedder``: the accessor of that client,
    imported on first use (a process that never builds a Docling client never imports it)."""
    if name == "gateway":
        from ki.agents.shared_gateway import gateway

        return gateway
    if name == "docling":
        from ki.convert.docling.shared import docling

        return docling
    if name == "query_embedder":
        from ki.index.query_embedder import query_embedder

        return query_embedder
    raise AttributeError(f"module 'ki.services' has no attribute {name!r}")


def reset() -> None:
    """Close and forget every shared client, clear the cooldowns, breakers and the parsed settings, run the hooks."""
    close_clients()
    PROVIDER_COOLDOWNS.reset()
    BREAKERS.reset()
    SERVED.reset()
    forget_parsed()
    run_reset_hooks()


# --- the clients the stages use ----------------------------------------------------------------------


def stage_embedder(retrieval: Any, db: Any) -> Any:
    """The embedder of ``retrieval.embedding_model`` for the index stage (None for ``none``).

    One per (setting, batch size, gateway URL, database), so a gateway model's dimension is probed once
    and its calls go to that database's usage ledger (stage ``index``).

    Args:
        retrieval: a :class:`ki.config.settings.RetrievalConfig`.
        db: the :class:`ki.store.db.Database` whose ledger records gateway usage.
    Raises: ValueError / ConfigurationError from :func:`ki.index.embeddings.make_embedder`.
    """
    from ki.agents.shared_gateway import gateway
    from ki.agents.usage import ledger_sink
    from ki.index.embeddings import make_embedder

    key = (retrieval.embedding_model, retrieval.embedding_batch_size, current(LlmSettings).base_url or "",
           str(db.engine.url))
    return shared("stage_embedder", key, lambda: make_embedder(
        retrieval.embedding_model, batch_size=retrieval.embedding_batch_size,
        gateway_client=lambda: gateway(ledger_sink(db, default_stage="index"))))


