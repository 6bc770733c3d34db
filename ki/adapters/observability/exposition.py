"""Serving the metrics: the text a scrape gets, and the port of a process without ``ki serve``.

``ki serve`` answers ``GET /metrics`` itself (:mod:`ki.api.routes_metrics`). ``ki worker``, a long
``ki insert`` and ``ki watch`` serve the same text on ``KI_METRICS_PORT`` (bound to ``KI_METRICS_ADDR``,
default 127.0.0.1) when that variable is set: prometheus-client's own HTTP server in a daemon thread,
no token (bind it where only the scraper can reach it). Both expose this process's counters
(:data:`ki.adapters.observability.metrics.REGISTRY`) and the gauges read from PostgreSQL
(:class:`ki.adapters.observability.scrape.StateCollector`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest, start_http_server
from prometheus_client.metrics_core import Metric
from sqlalchemy.engine import Engine

from ki.adapters.observability.metrics import REGISTRY
from ki.adapters.observability.scrape import BucketCounts, StateCollector
from ki.config.process import ProcessSettings, current

log = logging.getLogger(__name__)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class ServingRegistry:
    """What one scrape collects: the process's counters, then the state gauges (prometheus-client's
    ``generate_latest`` and HTTP server accept any object with ``collect()``)."""

    def __init__(self, engine: Engine, *, counts: Callable[[], BucketCounts] | None = None,
                 budget: Callable[[], dict | None] | None = None) -> None:
        self.state = StateCollector(engine, counts=counts, budget=budget)

    def collect(self) -> Iterator[Metric]:
        """Every metric family, the counters first."""
        yield from REGISTRY.collect()
        yield from self.state.collect()


def render(registry: ServingRegistry) -> bytes:
    """The Prometheus text exposition (format 0.0.4) of ``registry``."""
    return generate_latest(registry)  # type: ignore[arg-type]


def start_metrics_port(engine: Engine, *, budget: Callable[[], dict | None] | None = None) -> tuple[str, int] | None:
    """Serve ``/metrics`` on ``KI_METRICS_PORT`` when it is set; returns ``(address, port)`` or None.
    ``budget``: the reached spending cap reader (see :class:`ki.adapters.observability.scrape.StateCollector`).

    Raises: ConfigurationError when the variable does not parse; OSError when the port is taken (the
        caller reports it: the command it belongs to should not start half-observed).
    """
    settings = current(ProcessSettings)
    if settings.metrics_port is None:
        return None
    server, _thread = start_http_server(settings.metrics_port, addr=settings.metrics_addr,
                                        registry=ServingRegistry(engine, budget=budget))  # type: ignore[arg-type]
    address = server.server_address
    log.info("metrics on http://%s:%s/metrics", address[0], address[1])
    return str(address[0]), int(address[1])
