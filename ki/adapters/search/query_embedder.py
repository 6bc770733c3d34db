"""The process's shared embedders (:mod:`ki.core.shared_clients`): the one a search embeds its query with (the index's
own model) and the one the index stage embeds chunks with (the configured model)."""

from __future__ import annotations

from typing import Any

from ki.config.process import LlmSettings, current
from ki.core.shared_clients import shared


def query_embedder(identity: Any) -> Any:
    """The embedder of an index's recorded identity (search embeds queries with the index's own model);
    None when the index has no vectors. Raises: ConfigurationError when it cannot be built here."""
    if identity is None:
        return None
    from ki.adapters.agents.shared_gateway import gateway
    from ki.adapters.search.embeddings import embedder_for_identity

    return shared("query_embedder", identity, lambda: embedder_for_identity(identity, gateway_client=gateway))


def stage_embedder(retrieval: Any, db: Any) -> Any:
    """The embedder of ``retrieval.embedding_model`` for the index stage (None for ``none``).

    One per (setting, batch size, gateway URL, database), so a gateway model's dimension is probed once
    and its calls go to that database's usage ledger (stage ``index``).

    Args:
        retrieval: a :class:`ki.config.settings.RetrievalConfig`.
        db: the :class:`ki.store.db.Database` whose ledger records gateway usage.
    Raises: ValueError / ConfigurationError from :func:`ki.adapters.search.embeddings.make_embedder`.
    """
    from ki.adapters.agents.shared_gateway import gateway
    from ki.adapters.agents.usage import ledger_sink
    from ki.adapters.search.embeddings import make_embedder

    key = (retrieval.embedding_model, retrieval.embedding_batch_size, current(LlmSettings).base_url or "",
           str(db.engine.url))
    return shared("stage_embedder", key, lambda: make_embedder(
        retrieval.embedding_model, batch_size=retrieval.embedding_batch_size,
        gateway_client=lambda: gateway(ledger_sink(db, default_stage="index"))))
