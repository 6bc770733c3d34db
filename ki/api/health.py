"""``GET /healthz``: each configured component with ``ok`` / ``warning`` / ``error`` and the error text.

Spec: insertion-pipeline.md "The console page" (component health): the database, the orchestrator, Docling
Serve, the model gateway, OpenSearch and LibreOffice
(the legacy Office converter; ``warning`` when configured but not installed) — those configured. The
endpoint is open (no token), so it reveals no path, URL or key: only the component's name, its verdict
and the error in words. Checks run concurrently with a short timeout each, and the answer is reused for
:data:`CACHE_SECONDS` so an open endpoint cannot be used to hammer the components.
The status code is 200 unless the database is unusable (503): the console cannot work without it,
while the other components only stop their stages.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ki.api.schemas import ComponentHealth, HealthOut
from ki.domain.context import PipelineContext

router = APIRouter(tags=["health"])

CACHE_SECONDS = 5.0
TIMEOUT_SECONDS = 2.0
_ORDER = {"ok": 0, "warning": 1, "error": 2}


def _scrub(message: str, *secrets: str | None) -> str:
    for s in secrets:
        if s:
            message = message.replace(s, "<configured address>")
    return message[:300]


def _database(ctx: PipelineContext) -> ComponentHealth:
    try:
        ctx.db.ping()
    except Exception as exc:  # noqa: BLE001 - report any failure
        return ComponentHealth(name="database", status="error", detail=_scrub(type(exc).__name__ + ": "
                                                                              + str(exc).splitlines()[0]))
    return ComponentHealth(name="database", status="ok")


def _orchestrator(ctx: PipelineContext) -> ComponentHealth:
    provider = ctx.config.components.orchestrator_provider
    if provider == "local":
        return ComponentHealth(name="orchestrator", status="ok", detail="local: runs execute in this process")
    try:
        from ki.workflows.client import hatchet_client

        hatchet_client(once=True)
    except Exception as exc:  # noqa: BLE001
        return ComponentHealth(name="orchestrator", status="error", detail=_scrub(str(exc)))
    return ComponentHealth(name="orchestrator", status="ok", detail="hatchet: client configured")


def _http(name: str, url: str, path: str, judge: Callable[[httpx.Response], ComponentHealth] | None = None,
          headers: dict[str, str] | None = None) -> ComponentHealth:
    try:
        response = httpx.get(url.rstrip("/") + path, timeout=TIMEOUT_SECONDS, headers=headers)
    except httpx.HTTPError as exc:
        return ComponentHealth(name=name, status="error", detail=_scrub(f"unreachable: {type(exc).__name__}: {exc}",
                                                                        url))
    if judge is not None:
        return judge(response)
    if response.status_code >= 400:
        return ComponentHealth(name=name, status="error", detail=f"answered HTTP {response.status_code}")
    return ComponentHealth(name=name, status="ok")


def _opensearch_judge(response: httpx.Response) -> ComponentHealth:
    if response.status_code >= 400:
        return ComponentHealth(name="opensearch", status="error", detail=f"answered HTTP {response.status_code}")
    colour = str((response.json() or {}).get("status", "unknown"))
    status = {"green": "ok", "yellow": "warning"}.get(colour, "error")
    return ComponentHealth(name="opensearch", status=status, detail=f"cluster {colour}")  # type: ignore[arg-type]


def _gateway() -> ComponentHealth:
    from ki.adapters.agents.gateway import GatewayClient
    from ki.core.errors import KiError

    try:
        with GatewayClient.from_env(timeout_seconds=TIMEOUT_SECONDS) as client:
            base = client.base_url
            try:
                client.get_json("/v1/models")
            except KiError as exc:
                return ComponentHealth(name="model_gateway", status="error", detail=_scrub(str(exc), base))
    except KiError as exc:  # not configured is filtered out before; anything else is an error
        return ComponentHealth(name="model_gateway", status="error", detail=str(exc)[:300])
    return ComponentHealth(name="model_gateway", status="ok")


def _libreoffice(ctx: PipelineContext) -> ComponentHealth:
    """LibreOffice, ki's legacy Office converter: ``ok`` with what it adds, ``warning`` when configured
    (``components.libreoffice``) but not installed (those files wait as ``needs_converter``)."""
    from ki.adapters.convert.components import libreoffice_component

    found = libreoffice_component(ctx.config)
    if found is None:  # turned off since the checks were listed
        return ComponentHealth(name="libreoffice", status="ok", detail="turned off (components.libreoffice empty)")
    return ComponentHealth(name="libreoffice", status="ok" if found.available else "warning",
                           detail=f"converts {found.adds}" if found.available else found.missing)


def check_components(ctx: PipelineContext, *, gateway_configured: bool) -> HealthOut:
    """Run every configured component's check concurrently (see module doc)."""
    components = ctx.config.components
    checks: list[Callable[[], ComponentHealth]] = [lambda: _database(ctx), lambda: _orchestrator(ctx)]
    if components.docling_url:
        url = components.docling_url
        key = components.docling_api_key
        checks.append(lambda: _http("docling", url, "/health", headers={"X-Api-Key": key} if key else None))
    if gateway_configured:
        checks.append(_gateway)
    if components.libreoffice:
        checks.append(lambda: _libreoffice(ctx))
    if components.opensearch_url:
        checks.append(lambda: _http("opensearch", components.opensearch_url or "", "/_cluster/health",
                                    _opensearch_judge))
    with ThreadPoolExecutor(max_workers=len(checks)) as pool:
        results = list(pool.map(lambda f: f(), checks))
    worst = max((r.status for r in results), key=_ORDER.__getitem__)
    return HealthOut(status=worst, components=results)  # type: ignore[arg-type]


_cache_lock = threading.Lock()
_cache: dict[int, tuple[float, HealthOut]] = {}


@router.get("/healthz", response_model=HealthOut, responses={503: {"model": HealthOut}})
def healthz(request: Request) -> JSONResponse:
    """Each configured component's health; 503 when the database is unusable (open: no token)."""
    from ki.stages.agentic import gateway_configured

    state = request.app.state.ki
    with _cache_lock:
        hit = _cache.get(id(state))
        if hit and time.monotonic() - hit[0] < CACHE_SECONDS:
            out = hit[1]
        else:
            out = None
    if out is None:
        state.config()
        out = check_components(state.ctx, gateway_configured=gateway_configured())
        with _cache_lock:
            _cache[id(state)] = (time.monotonic(), out)
    db_ok = next(c for c in out.components if c.name == "database").status != "error"
    return JSONResponse(out.model_dump(mode="json"), status_code=200 if db_ok else 503)
