"""The process-wide clients, built once from settings, and the one reset (DESIGN.md "Layout").

A process shares one gateway client, one embedder per index setting, one Docling Serve client,
one OpenSearch client per node (and the Hatchet clients): each connection pool is made once and
reused by every stage execution. They are all made through :func:`shared` under a key naming the
settings that shape the client, so a changed setting (another ``KI_LLM_BASE_URL``, another
``components.docling_url``) gets a new client while an unchanged one is reused. The typed
accessors below (:func:`gateway`, :func:`stage_embedder`, :func:`query_embedder`, :func:`docling`)
build the ones the stages use; a client module that keeps its own builder (OpenSearch) calls
:func:`shared` itself.

:func:`reset` closes and forgets every client, clears the provider-fault cooldowns
(:mod:`ki.cooldown`), the circuit breakers (:mod:`ki.breaker`) and the parsed process settings, and runs
the hooks of modules that keep state derived from a client (:func:`on_reset`). Tests call it where they
used to reset each cache by hand; an operator's quarantine retry resets the cooldowns only (``reset_cooldowns``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from ki.breaker import BREAKERS
from ki.config.process import LlmSettings, current, forget_parsed
from ki.cooldown import PROVIDER_COOLDOWNS, cooldown_seconds
from ki.served import SERVED

log = logging.getLogger(__name__)

T = TypeVar("T")

_lock = threading.RLock()
_clients: dict[tuple[str, Hashable], Any] = {}
_reset_hooks: list[Callable[[], None]] = []


def shared(kind: str, key: Hashable, build: Callable[[], T]) -> T:
    """The process's ``kind`` client for ``key``, built by ``build()`` the first time it is asked for.

    Args:
        kind: what the client is (``"gateway"``, ``"docling"``, ``"opensearch"``, ...).
        key: the settings that shape it (hashable; secrets may be part of it, it is never shown).
        build: makes the client; what it raises propagates and nothing is kept.
    """
    with _lock:
        if (kind, key) in _clients:
            return _clients[(kind, key)]
        client = build()
        _clients[(kind, key)] = client
        return client


def on_reset(hook: Callable[[], None]) -> Callable[[], None]:
    """Register ``hook`` to run at every :func:`reset` (state derived from a client); returns it."""
    with _lock:
        if hook not in _reset_hooks:
            _reset_hooks.append(hook)
    return hook


def reset() -> None:
    """Close and forget every shared client, clear the cooldowns and the parsed settings, run the hooks."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
        hooks = list(_reset_hooks)
    for client in clients:
        close = getattr(client, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # noqa: BLE001 - a client that fails to close is dropped all the same
                log.debug("closing %r failed", client, exc_info=True)
    PROVIDER_COOLDOWNS.reset()
    BREAKERS.reset()
    SERVED.reset()
    forget_parsed()
    for hook in hooks:
        hook()


# --- the clients the stages use ----------------------------------------------------------------------


def gateway(usage_sink: Callable[[Any], None] | None = None) -> Any:
    """The process's :class:`ki.agents.gateway.GatewayClient` on ``KI_LLM_BASE_URL`` / ``KI_LLM_API_KEY``.

    One connection pool per (URL, key, cooldown). ``usage_sink`` (e.g. ``ki.agents.usage.ledger_sink``)
    gets this caller's token usage: the result is then a view of the shared client that reports to it
    (do not close it; :func:`reset` closes the pool).

    Raises:
        ConfigurationError: no gateway is configured, or a ``KI_`` variable is invalid.
    """
    from ki.agents.gateway import GatewayClient

    llm = current(LlmSettings)
    key = (llm.base_url, llm.key(), cooldown_seconds())
    client = shared("gateway", key, GatewayClient.from_env)
    return client if usage_sink is None else client.with_usage_sink(usage_sink)


def stage_embedder(retrieval: Any, db: Any) -> Any:
    """The embedder of ``retrieval.embedding_model`` for the index stage (None for ``none``).

    One per (setting, batch size, gateway URL, database), so a gateway model's dimension is probed once
    and its calls go to that database's usage ledger (stage ``index``).

    Args:
        retrieval: a :class:`ki.config.settings.RetrievalConfig`.
        db: the :class:`ki.store.db.Database` whose ledger records gateway usage.
    Raises: ValueError / ConfigurationError from :func:`ki.index.embeddings.make_embedder`.
    """
    from ki.agents.usage import ledger_sink
    from ki.index.embeddings import make_embedder

    key = (retrieval.embedding_model, retrieval.embedding_batch_size, current(LlmSettings).base_url or "",
           str(db.engine.url))
    return shared("stage_embedder", key, lambda: make_embedder(
        retrieval.embedding_model, batch_size=retrieval.embedding_batch_size,
        gateway_client=lambda: gateway(ledger_sink(db, default_stage="index"))))


def query_embedder(identity: Any) -> Any:
    """The embedder of an index's recorded identity (search embeds queries with the index's own model);
    None when the index has no vectors. Raises: ConfigurationError when it cannot be built here."""
    if identity is None:
        return None
    from ki.index.embeddings import embedder_for_identity

    return shared("query_embedder", identity, lambda: embedder_for_identity(identity, gateway_client=gateway))


def docling(components: Any) -> Any:
    """The process's :class:`ki.convert.docling.DoclingClient` for ``components.docling_url`` (one pool per
    URL, key and timeouts). Args: ``components``, a :class:`ki.config.settings.ComponentsConfig`."""
    from ki.convert.docling import DoclingClient

    c = components
    key = (c.docling_url, c.docling_api_key, c.docling_document_timeout_seconds, c.docling_client_timeout_seconds,
           c.allow_link_local_urls)
    return shared("docling", key, lambda: DoclingClient(
        c.docling_url, api_key=c.docling_api_key, document_timeout_seconds=c.docling_document_timeout_seconds,
        client_timeout_seconds=c.docling_client_timeout_seconds, allow_link_local=c.allow_link_local_urls))
