"""ki's outside dependencies: which stages need each one, which faults are its outage, and where it listens.

Spec: insertion-pipeline.md "Retry policy and quarantine" (infrastructure faults are retried, never
quarantined) and DESIGN.md "Outages are not the file's fault". The dependencies and the stages that need
them are data (:func:`stage_dependencies`; the table is :mod:`ki.adapters.breaker`'s, whose circuit breakers pause those
stages during an outage). Which dependency a fault belongs to is the exception's class
(:data:`FAULT_DEPENDENCIES`, anywhere in the exception chain); a probe's TCP connect goes to the address of
the dependency's configured URL (:func:`dependency_endpoints`, :func:`port_accepts`).
"""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlsplit

from ki.core import errors

GATEWAY, DOCLING, OPENSEARCH, SOURCE = "gateway", "docling", "opensearch", "source"
DEPENDENCIES: tuple[str, ...] = (GATEWAY, DOCLING, OPENSEARCH, SOURCE)

#: The exception classes that are a dependency's fault (checked along the exception chain).
FAULT_DEPENDENCIES: tuple[tuple[type[BaseException], str], ...] = (
    (errors.GatewayUnavailable, GATEWAY),
    (errors.DoclingUnavailable, DOCLING),
    (errors.OpenSearchUnavailable, OPENSEARCH),
)

#: The model stages (the gateway when one is configured, else their rules policies).
MODEL_STAGES: tuple[str, ...] = ("classify_matter", "relate", "extract_metadata", "extract_decisions")

#: Dependencies whose success the executor reports when a stage needing them completes (the gateway
#: and Docling clients report their own, since a model stage may finish without a model call).
CONFIRMED_BY_COMPLETION: frozenset[str] = frozenset({SOURCE, OPENSEARCH})


def stage_dependencies(config: Any, *, gateway_configured: bool) -> dict[str, frozenset[str]]:
    """stage → the dependencies it needs under ``config`` (a :class:`ki.config.settings.KiConfig`) when a
    gateway is (``gateway_configured``) or is not configured. Stages needing nothing map to an empty set;
    every stage of ``PIPELINE_STAGE_ORDER`` is present (:func:`ki.adapters.breaker.stage_dependencies` reads
    ``gateway_configured`` from the settings)."""
    from ki.core.taxonomies import PIPELINE_STAGE_ORDER

    needs: dict[str, set[str]] = {s: set() for s in PIPELINE_STAGE_ORDER}
    if gateway_configured:
        for s in MODEL_STAGES:
            needs[s].add(GATEWAY)
        # ``gateway:<model>`` (ki.config.embedding_model.parse_embedding_model validated it on load)
        if (config.retrieval.embedding_model or "").strip().lower().startswith("gateway:"):
            needs["index"].add(GATEWAY)
    if config.components.docling_url:
        needs["convert"].add(DOCLING)
    if config.components.opensearch_url:
        needs["index"].add(OPENSEARCH)
    return {s: frozenset(d) for s, d in needs.items()}


#: A host and TCP port (``("127.0.0.1", 4000)``).
Address = tuple[str, int]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def endpoint_of(url: str | None) -> Address | None:
    """``(host, port)`` of a dependency URL (``http://gw:4000/v1`` → ``("gw", 4000)``; the scheme's
    default port when none is given); None for an empty URL or one without a host."""
    if not url or not url.strip():
        return None
    try:
        parts = urlsplit(url.strip())
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:  # a port that is not a number
        return None
    if not parts.hostname or port is None:
        return None
    return parts.hostname, port


def dependency_endpoints(config: Any, *, gateway_url: str | None) -> dict[str, Address]:
    """dependency → the ``(host, port)`` its probes connect to under ``config`` (a
    :class:`ki.config.settings.KiConfig`): the gateway's ``gateway_url``, ``components.docling_url``,
    ``components.opensearch_url``. Unconfigured ones are absent (:func:`ki.adapters.breaker.dependency_endpoints`
    reads ``gateway_url`` from ``KI_LLM_BASE_URL``)."""
    urls = {GATEWAY: gateway_url, DOCLING: config.components.docling_url, OPENSEARCH: config.components.opensearch_url}
    return {d: address for d, url in urls.items() if (address := endpoint_of(url)) is not None}


def port_accepts(address: Address, timeout: float) -> bool:
    """Whether a TCP connection to ``address`` opens within ``timeout`` seconds (closed at once,
    nothing sent). Refused, reset, unreachable, a DNS failure and a timeout are False; never raises."""
    try:
        with socket.create_connection(address, timeout=timeout):
            return True
    except (OSError, ValueError):  # ConnectionRefusedError, TimeoutError, socket.gaierror, …
        return False


def retry_after_of(exc: BaseException) -> float | None:
    """The ``retry_after_seconds`` an infrastructure fault along ``exc``'s chain carries (the dependency's
    ``Retry-After``, :func:`ki.core.retry.retry_after_seconds`), or None."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        wait = getattr(seen, "retry_after_seconds", None)
        if isinstance(wait, int | float):
            return float(wait)
        seen = seen.__cause__ or seen.__context__
    return None


def dependency_of(exc: BaseException) -> str | None:
    """The dependency whose outage ``exc`` (or an exception it was raised from) is, else None."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen and len(seen) < 8:
        seen.add(id(cur))
        for cls, dependency in FAULT_DEPENDENCIES:
            if isinstance(cur, cls):
                return dependency
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
    return None
