"""``GET /metrics``: the Prometheus exposition of the serving process.

Prior-art §8: protect ``/metrics`` with a token. A scrape needs a token with ``read:pipeline``
(Prometheus: ``authorization: {credentials: ki_…}`` in the scrape config), unless ``KI_METRICS_OPEN=true``
opens it (for a scraper on a trusted network that cannot send a header). What it exposes is documented in
``docs/metrics.md``: counters of this process, gauges read from PostgreSQL at scrape time (one read per second
at most, whoever scrapes).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ki.adapters.observability.exposition import CONTENT_TYPE, ServingRegistry, render
from ki.api.auth import authorize_request
from ki.api.errors import error_responses
from ki.app.scopes import READ_PIPELINE
from ki.config.process import ProcessSettings, current

router = APIRouter(tags=["metrics"])


def _registry(request: Request) -> ServingRegistry:
    """The app's one :class:`ServingRegistry` (made on the first scrape, kept on ``app.state``)."""
    registry = getattr(request.app.state, "metrics_registry", None)
    if registry is None:
        from ki.orchestration.budget import budget_wait

        state = request.app.state.ki
        registry = ServingRegistry(state.ctx.db.engine, budget=lambda: budget_wait(state.ctx.db.engine, state.config()))
        request.app.state.metrics_registry = registry
    return registry


@router.get("/metrics", responses=error_responses(401, 403), response_class=Response,
            summary="Prometheus metrics (text exposition format 0.0.4)")
def metrics(request: Request) -> Response:
    """The metrics text; 401/403 without a ``read:pipeline`` token unless ``KI_METRICS_OPEN=true``."""
    if not current(ProcessSettings).metrics_open:
        authorize_request(request, READ_PIPELINE)
    return Response(render(_registry(request)), media_type=CONTENT_TYPE)
