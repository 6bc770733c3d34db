"""The process's Docling Serve client for ``components.docling_url``, shared (:mod:`ki.core.shared_clients`)."""

from __future__ import annotations

from typing import Any

from ki.core.shared_clients import shared


def docling(components: Any) -> Any:
    """The process's :class:`ki.adapters.convert.docling.DoclingClient` for ``components.docling_url`` (one pool per
    URL, key and timeouts). Args: ``components``, a :class:`ki.config.settings.ComponentsConfig`."""
    from ki.adapters.convert.docling import DoclingClient

    c = components
    key = (c.docling_url, c.docling_api_key, c.docling_document_timeout_seconds, c.docling_client_timeout_seconds,
           c.allow_link_local_urls)
    return shared("docling", key, lambda: DoclingClient(
        c.docling_url, api_key=c.docling_api_key, document_timeout_seconds=c.docling_document_timeout_seconds,
        client_timeout_seconds=c.docling_client_timeout_seconds, allow_link_local=c.allow_link_local_urls))
