"""The model chip of each stage: which model an assigned gateway name runs as, and its price.

Spec: insertion-pipeline.md "The console page" (Stage model chip: GET /api/models/catalog resolves
the stage's assigned gateway name to the model that will actually run and be billed; falls back to
the bare alias when the gateway cannot resolve it). The gateway is asked once a minute at most:
LiteLLM's ``/model/info`` maps an alias (``model_name``) to the provider model
(``litellm_params.model``) with per-token costs; any OpenAI-compatible gateway's ``/v1/models``
at least says whether it serves the alias. Prices not given by the gateway come from
:data:`ki.adapters.agents.usage.PRICES_PER_MILLION`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ki.adapters.agents.gateway import ENV_BASE_URL, GatewayClient, model_for_stage
from ki.adapters.agents.usage import Price, price_of
from ki.app.views import CatalogEntry, CatalogOut
from ki.config.settings import KiConfig
from ki.core.errors import ConfigurationError, KiError
from ki.core.taxonomies import MODEL_STAGES, PIPELINE_STAGE_ORDER, STAGE_CONSOLE_NAMES

#: Seconds a gateway listing is reused.
CACHE_SECONDS = 60.0
#: Seconds the gateway gets to answer a listing.
TIMEOUT_SECONDS = 3.0


@dataclass(frozen=True)
class GatewayModels:
    """What the gateway said: alias → (provider model, price or None); the ids it lists; or the error."""

    resolved: dict[str, tuple[str, Price | None]] = field(default_factory=dict)
    listed: frozenset[str] = frozenset()
    error: str | None = None


_cache_lock = threading.Lock()
_cache: dict[str, tuple[float, GatewayModels]] = {}


def _per_million(value: Any) -> Decimal | None:
    try:
        return Decimal(str(value)) * 1_000_000 if value is not None else None
    except ArithmeticError:
        return None


def _read_gateway(client: GatewayClient) -> GatewayModels:
    resolved: dict[str, tuple[str, Price | None]] = {}
    info = client.get_json("/model/info")
    for entry in (info or {}).get("data", []) if isinstance(info, dict) else []:
        if not isinstance(entry, dict) or not entry.get("model_name"):
            continue
        target = str((entry.get("litellm_params") or {}).get("model") or entry["model_name"])
        meta = entry.get("model_info") or {}
        inp, out = _per_million(meta.get("input_cost_per_token")), _per_million(meta.get("output_cost_per_token"))
        price = Price(inp, out or Decimal(0)) if inp is not None else None
        resolved.setdefault(str(entry["model_name"]), (target, price))
    models = client.get_json("/v1/models")
    listed = frozenset(str(m.get("id")) for m in (models or {}).get("data", [])
                       if isinstance(m, dict) and m.get("id")) if isinstance(models, dict) else frozenset()
    return GatewayModels(resolved, listed | frozenset(resolved))


def gateway_models() -> GatewayModels | None:
    """The gateway's models (cached :data:`CACHE_SECONDS`), or None when no gateway is configured."""
    try:
        client = GatewayClient.from_env(timeout_seconds=TIMEOUT_SECONDS)
    except ConfigurationError:
        return None
    key = client.base_url
    with _cache_lock:
        hit = _cache.get(key)
        if hit and time.monotonic() - hit[0] < CACHE_SECONDS:
            client.close()
            return hit[1]
    try:
        with client:
            models = _read_gateway(client)
    except KiError as exc:
        models = GatewayModels(error=str(exc).replace(key, "the gateway")[:300])
    with _cache_lock:
        _cache[key] = (time.monotonic(), models)
    return models


def reset_catalog_cache() -> None:
    """Forget cached gateway listings (tests; after changing the gateway)."""
    with _cache_lock:
        _cache.clear()


def _money(value: Decimal | None) -> float | None:
    return float(value) if value is not None else None


def _gateway_entry(stage: str, alias: str, models: GatewayModels) -> CatalogEntry:
    name = STAGE_CONSOLE_NAMES[stage]
    if alias in models.resolved:
        target, price = models.resolved[alias]
        price = price or price_of(target)
        return CatalogEntry(stage=stage, name=name, kind="gateway", alias=alias, resolved=target,
                            input_usd_per_million=_money(price.input if price else None),
                            output_usd_per_million=_money(price.output if price else None),
                            reason=None if price else f"no price is known for {target}")
    price = price_of(alias)
    if alias in models.listed:
        return CatalogEntry(stage=stage, name=name, kind="gateway", alias=alias, resolved=alias,
                            input_usd_per_million=_money(price.input if price else None),
                            output_usd_per_million=_money(price.output if price else None),
                            reason=None if price else f"no price is known for {alias}")
    reason = (f"the gateway could not be asked: {models.error}" if models.error
              else f"the gateway does not list {alias}")
    return CatalogEntry(stage=stage, name=name, kind="gateway", alias=alias, resolved=None,
                        input_usd_per_million=_money(price.input if price else None),
                        output_usd_per_million=_money(price.output if price else None), reason=reason)


def stage_entry(config: KiConfig, stage: str, models: GatewayModels | None) -> CatalogEntry:
    """The chip of one stage (a model stage, or ``index`` for the embedding model)."""
    name = STAGE_CONSOLE_NAMES[stage]
    if stage == "index":
        value = (config.retrieval.embedding_model or "none").strip()
        if value == "none":
            return CatalogEntry(stage=stage, name=name, kind="none", alias=None, resolved=None,
                                input_usd_per_million=None, output_usd_per_million=None,
                                reason="no embedding model: lexical search only")
        if value.startswith("gateway:"):
            if models is None:
                return CatalogEntry(stage=stage, name=name, kind="gateway", alias=value[8:], resolved=None,
                                    input_usd_per_million=None, output_usd_per_million=None,
                                    reason=f"no model gateway is configured ({ENV_BASE_URL})")
            return _gateway_entry(stage, value[8:], models)
        return CatalogEntry(stage=stage, name=name, kind="local", alias=value, resolved=value,
                            input_usd_per_million=0.0, output_usd_per_million=0.0,
                            reason="runs in this process; no cost")
    if models is None:
        return CatalogEntry(stage=stage, name=name, kind="rules", alias=None, resolved=None,
                            input_usd_per_million=0.0, output_usd_per_million=0.0,
                            reason=f"no model gateway is configured ({ENV_BASE_URL}): the offline rules decide")
    try:
        alias = model_for_stage(config, stage)
    except ConfigurationError as exc:
        return CatalogEntry(stage=stage, name=name, kind="gateway", alias=None, resolved=None,
                            input_usd_per_million=None, output_usd_per_million=None, reason=str(exc))
    return _gateway_entry(stage, alias, models)


CATALOG_STAGES: tuple[str, ...] = tuple(s for s in PIPELINE_STAGE_ORDER if s in MODEL_STAGES) + ("index",)


def stage_catalog(config: KiConfig) -> CatalogOut:
    """``GET /api/models/catalog``: the chip of every model stage and of the index."""
    models = gateway_models()
    return CatalogOut(gateway="configured" if models is not None else None,
                      entries=[stage_entry(config, s, models) for s in CATALOG_STAGES])
