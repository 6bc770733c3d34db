"""The process's shared clients: one per kind and settings key, built on first use, closed together.

A process shares one gateway client, one embedder per index setting, one Docling Serve client, one OpenSearch
client per node and the Hatchet clients: each connection pool is made once and reused by every stage
execution, under a key naming the settings that shape it (a changed setting gets a new client). The typed
accessors live beside their clients (:mod:`ki.adapters.agents.shared_gateway`,
:mod:`ki.adapters.convert.docling.shared`,
:mod:`ki.adapters.search.query_embedder`, :func:`ki.adapters.search.opensearch_index.client_for`);
:func:`ki.app.wiring.reset`
closes them all (:func:`close_clients`, then :func:`run_reset_hooks`) with the process's other caches. This
module imports nothing of ki, so every layer may use it (DESIGN.md "Layout": imports point down).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

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


def close_clients() -> None:
    """Close and forget every shared client (a client whose ``close`` fails is dropped all the same)."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        close = getattr(client, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # noqa: BLE001 - a client that fails to close is dropped all the same
                log.debug("closing %r failed", client, exc_info=True)


def run_reset_hooks() -> None:
    """Run the :func:`on_reset` hooks (state derived from a client), in registration order."""
    with _lock:
        hooks = list(_reset_hooks)
    for hook in hooks:
        hook()
