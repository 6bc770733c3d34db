"""The embedder a search embeds its query with: the index's own model, shared (:mod:`ki.shared_clients`)."""

from __future__ import annotations

from typing import Any

from ki.agents.shared_gateway import gateway
from ki.shared_clients import shared


def query_embedder(identity: Any) -> Any:
    """The embedder of an index's recorded identity (search embeds queries with the index's own model);
    None when the index has no vectors. Raises: ConfigurationError when it cannot be built here."""
    if identity is None:
        return None
    from ki.index.embeddings import embedder_for_identity

    return shared("query_embedder", identity, lambda: embedder_for_identity(identity, gateway_client=gateway))
