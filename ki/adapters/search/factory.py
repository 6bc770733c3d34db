"""The search backend the configuration selects (the factory in its own module).

Spec: DESIGN.md "Two deployments" (PostgreSQL + tantivy + pgvector embedded; OpenSearch at scale).
"""

from __future__ import annotations

from typing import Any

from ki.adapters.search.backend import SearchBackend


def backend_for(db: Any, config: Any = None, *, index_wait: bool = True) -> SearchBackend:
    """The search backend of ``config``.

    ``components.opensearch_url`` unset → :class:`ki.adapters.search.postgres.PostgresBackend` (embedded); set →
    :class:`ki.adapters.search.opensearch.OpenSearchBackend` on that URL, which writes the PostgreSQL record first and
    syncs OpenSearch after it (the index stage writes both; searches run on OpenSearch). Both keep documents of
    more than ``retrieval.large_document_passages`` passages in a "large documents" index of their own.
    ``index_wait``: the embedded backend's searches wait for another process applying the projection's backlog
    (False: not; :class:`ki.adapters.search.postgres.PostgresBackend`). OpenSearch is written by the index stage itself.
    Raises: ConfigurationError when the URL is set but opensearch-py is not installed.
    """
    from ki.adapters.search.postgres import PostgresBackend

    url = getattr(config.components, "opensearch_url", None) if config is not None else None
    large = getattr(config.retrieval, "large_document_passages", None) if config is not None else None
    if not url:
        return PostgresBackend(db, large_passages=large, index_wait=index_wait)
    try:
        import opensearchpy  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the opensearch extra is missing
        from ki.core.errors import ConfigurationError

        raise ConfigurationError("components.opensearch_url is set, but opensearch-py is not installed: "
                                 "pip install 'ki[opensearch]'") from exc
    from ki.adapters.search.opensearch import OpenSearchBackend

    return OpenSearchBackend(db, url, large_passages=large,
                             allow_link_local=bool(getattr(config.components, "allow_link_local_urls", False)))
