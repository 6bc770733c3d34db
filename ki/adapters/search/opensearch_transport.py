"""The opensearch-py transport of ki's client: no request while OpenSearch is paused.

Every request of the opensearch-py client (bulk writes, deletes, searches, index management) goes
through ``Transport.perform_request``. While the ``opensearch`` circuit breaker is open in a process
whose claims probe it (:meth:`ki.adapters.breaker.Breakers.allows`), :class:`PausedAwareTransport` refuses the
call at once with :class:`~ki.core.errors.OpenSearchUnavailable` — no connection is opened, so the
transport's own retries (``max_retries``) never run against a node known to be down — except on the
thread holding the probe, whose request goes. The gateway client (``ki.adapters.agents.gateway``) and the
Docling client (``ki.adapters.convert.docling.client``) do the same.

:class:`GuardedConnection` is its connection class: a new connection whose peer is a link-local or
cloud-metadata address is closed before the request is sent (:mod:`ki.config.addresses`), unless
``components.allow_link_local_urls`` is set.
"""

from __future__ import annotations

from typing import Any

from opensearchpy import Transport, Urllib3HttpConnection

from ki.adapters import breaker
from ki.config.addresses import guard_urllib3_pool
from ki.core.errors import OpenSearchUnavailable


class PausedAwareTransport(Transport):
    """``opensearchpy.Transport`` that fails fast while OpenSearch is paused (see the module doc)."""

    def perform_request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        """As ``Transport.perform_request``.

        Raises:
            OpenSearchUnavailable: the ``opensearch`` breaker is open and this thread does not hold its
                probe (nothing is sent); otherwise whatever the transport raises.
        """
        if not breaker.BREAKERS.allows(breaker.OPENSEARCH):
            raise OpenSearchUnavailable(
                f"OpenSearch is paused after repeated outages; not sending {method} {url} until a probe finds "
                "it answering",
                infrastructure="OpenSearch paused (circuit breaker open): failed fast without a request",
            )
        return super().perform_request(method, url, *args, **kwargs)


class GuardedConnection(Urllib3HttpConnection):
    """opensearch-py's urllib3 connection whose sockets may not reach a link-local or cloud-metadata
    address: such a request fails with a ``ConnectionError`` whose ``info`` is the
    :class:`~ki.core.errors.ConfigurationError` (:func:`ki.adapters.search.opensearch_bulk.classify_transport_error`
    raises
    that one). Arguments as ``Urllib3HttpConnection``."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        guard_urllib3_pool(self.pool, "components.opensearch_url")
