"""The model-gateway client: OpenAI-compatible chat completions (with tools) and embeddings.

Spec: insertion-pipeline.md "Retry policy and quarantine" (error table and the
ProviderPermanentError note), "Agentic stages" (trace ids tagged onto each gateway
call) and "Failure modes"; DESIGN.md "Layout" (``ki/adapters/agents/``) and "Defaults"
(``KI_LLM_BASE_URL``, ``KI_LLM_API_KEY``, ``KI_LLM_MODEL``).

The client never retries on its own: the processing_state row is the retry
boundary (httpx's transport sends each request once). While the gateway's breaker is open
(:mod:`ki.adapters.breaker`) a call that is not its probe fails fast (GatewayUnavailable, nothing sent).
It turns every outcome into one of ki's error classes so that
:func:`ki.core.retry.classify_error` gives the spec's treatment:

========================================================  =========================================
gateway outcome                                           raised
========================================================  =========================================
transport error (connect, read, remote protocol, timeout)  :class:`GatewayUnavailable` (infrastructure)
HTTP 408 / 425 / 429 / 500 / 502 / 503 / 504               :class:`GatewayUnavailable` (infrastructure)
HTTP 401, 403, 404, 429 with ``insufficient_quota``        :class:`~ki.core.errors.ProviderPermanentError`
                                                          (deterministic) + cooldown of (base_url, model)
any other HTTP status (400, 413, 422, ...)                 :class:`GatewayRequestRejected` (bounded retry)
2xx whose body is not the expected JSON                    :class:`~ki.core.errors.ModelOutputInvalid`
========================================================  =========================================

Nothing here touches the database; token usage goes to an optional ``usage_sink``
(``ki.adapters.agents.usage.ledger_sink(db)`` writes the ledger in its own short transaction).
"""

from __future__ import annotations

import copy
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from ki.adapters import breaker
from ki.adapters.agents.gateway_faults import (
    ENV_API_KEY,
    ENV_BASE_URL,
    ENV_MODEL,
    active_cooldowns,
    api_root,
    check_cooldown,
    error_detail,
    reset_cooldowns,
    status_error,
)
from ki.adapters.agents.gateway_results import ChatResponse, ToolCall, UsageRecord, UsageSink
from ki.adapters.cooldown import cooldown_seconds as cooldown_seconds_setting
from ki.config.process import LlmSettings, current
from ki.core.errors import ConfigurationError, GatewayRequestRejected, GatewayUnavailable, ModelOutputInvalid
from ki.core.retry import INFRASTRUCTURE_HTTP_STATUSES

log = logging.getLogger(__name__)

__all__ = ["ENV_API_KEY", "ENV_BASE_URL", "ENV_MODEL", "ChatResponse", "GatewayClient", "ToolCall", "UsageRecord",
           "UsageSink", "active_cooldowns", "model_for_stage", "reset_cooldowns"]

HEADER_DOC = "X-Ki-Doc"
HEADER_STAGE = "X-Ki-Stage"
HEADER_TRACE = "X-Ki-Trace"

DEFAULT_EMBED_BATCH = 64


# --- configuration helpers -------------------------------------------------------------------------


def model_for_stage(config: Any, stage: str) -> str:
    """The gateway model ``stage`` calls: ``pipeline.stages.<stage>.model``, else ``$KI_LLM_MODEL``.

    Args:
        config: a :class:`ki.config.settings.KiConfig` (or anything with ``pipeline.stages``).
        stage: a stage id, e.g. ``classify_matter``.
    Returns: the model name (non-empty).
    Raises:
        ConfigurationError: neither the stage nor ``KI_LLM_MODEL`` names a model.
    Spec: insertion-pipeline.md "Configuration" (``pipeline.stages.<stage>.model``).
    """
    stages = getattr(getattr(config, "pipeline", None), "stages", None) or {}
    stage_cfg = stages.get(stage)
    model = getattr(stage_cfg, "model", None) if stage_cfg is not None else None
    model = (model or current(LlmSettings).model or "").strip()
    if not model:
        raise ConfigurationError(
            f"no model is assigned to stage {stage}: set pipeline.stages.{stage}.model "
            f"(Models & services) or the default {ENV_MODEL}"
        )
    return model


# --- the client ------------------------------------------------------------------------------------


@dataclass
class _Trace:
    doc_id: str | None
    stage: str | None
    trace_id: str | None

    def headers(self) -> dict[str, str]:
        out = {}
        if self.doc_id is not None:
            out[HEADER_DOC] = self.doc_id
        if self.stage is not None:
            out[HEADER_STAGE] = self.stage
        if self.trace_id is not None:
            out[HEADER_TRACE] = self.trace_id
        return out

    def tags(self) -> list[str]:
        return [f"{k}:{v}" for k, v in (("doc", self.doc_id), ("stage", self.stage), ("trace", self.trace_id))
                if v is not None]

    def metadata(self) -> dict[str, str]:
        pairs = (("ki_doc", self.doc_id), ("ki_stage", self.stage), ("ki_trace", self.trace_id))
        return {k: v for k, v in pairs if v is not None}


class GatewayClient:
    """An OpenAI-compatible gateway over httpx (thread-safe; one connection pool per client).

    Args:
        base_url: the gateway root, with or without ``/v1`` (``http://litellm:4000``).
        api_key: sent as ``Authorization: Bearer``; None/empty sends no header.
        timeout_seconds: per-request read/write/pool timeout (connect is capped at 10 s).
        transport: an httpx transport (tests: ``httpx.MockTransport``); None = real network.
        cooldown_seconds: provider-fault cooldown (s); None = ``KI_PROVIDER_FAULT_COOLDOWN_SECONDS`` (60).
        usage_sink: called with a :class:`UsageRecord` after every successful call; its own
            failures are logged, never raised (a paid answer is not thrown away over the ledger).
        send_metadata: also tag the body's ``user`` and ``metadata`` fields (headers are always sent);
            switch off for a backend that rejects ``metadata``.

    Spec: insertion-pipeline.md "Retry policy and quarantine"; see the module table for errors.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout_seconds: float = 120,
        transport: httpx.BaseTransport | None = None,
        cooldown_seconds: float | None = None,
        usage_sink: UsageSink | None = None,
        send_metadata: bool = True,
    ):
        if not base_url or not base_url.strip():
            raise ConfigurationError(f"the model gateway URL is empty: set {ENV_BASE_URL}")
        self.base_url = api_root(base_url)
        self.api_key = api_key or None
        self.timeout_seconds = float(timeout_seconds)
        self.transport = transport
        self.cooldown_seconds = cooldown_seconds_setting() if cooldown_seconds is None else max(0.0, cooldown_seconds)
        self.usage_sink = usage_sink
        self.send_metadata = send_metadata
        headers = {"Accept": "application/json", "User-Agent": "ki-gateway-client"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        timeout = httpx.Timeout(self.timeout_seconds, connect=min(10.0, self.timeout_seconds))
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)
        self._owns_pool = True

    def __repr__(self) -> str:
        return f"GatewayClient({self.base_url!r}, timeout_seconds={self.timeout_seconds:g})"

    @classmethod
    def from_env(cls, **kwargs: Any) -> GatewayClient:
        """A client on ``$KI_LLM_BASE_URL`` with ``$KI_LLM_API_KEY``; ``kwargs`` as for the constructor.

        Raises:
            ConfigurationError: ``KI_LLM_BASE_URL`` is unset, or a ``KI_`` variable is invalid.
        """
        llm = current(LlmSettings)
        if not llm.configured:
            raise ConfigurationError(f"no model gateway is configured: set {ENV_BASE_URL} (and {ENV_API_KEY})")
        return cls(llm.base_url.strip(), llm.key(), **kwargs)

    def with_usage_sink(self, usage_sink: UsageSink | None) -> GatewayClient:
        """This client (same connection pool, timeouts and cooldowns) reporting usage to ``usage_sink``.

        The view's :meth:`close` does nothing: the pool belongs to this client (``ki.app.wiring.gateway``).
        """
        view = copy.copy(self)
        view.usage_sink = usage_sink
        view._owns_pool = False
        return view

    def close(self) -> None:
        """Close the connection pool (a :meth:`with_usage_sink` view leaves it open)."""
        if self._owns_pool:
            self._http.close()

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public calls --------------------------------------------------------------------------

    def chat(
        self,
        *,
        model: str,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        doc_id: str | int | None = None,
        stage: str | None = None,
        trace_id: str | None = None,
        temperature: float | None = None,
        extra: dict[str, Any] | None = None,
    ) -> ChatResponse:
        """``POST /v1/chat/completions``: one completion, with function-calling ``tools`` if given.

        Args:
            model: gateway model name (see :func:`model_for_stage`).
            messages: OpenAI chat messages (``role``/``content``/``tool_calls``/``tool_call_id``).
            tools: OpenAI tool specs (``{"type": "function", "function": {name, description, parameters}}``).
            tool_choice: ``"auto"``, ``"required"`` or a named function; None leaves the gateway default.
            doc_id / stage / trace_id: trace tags sent as ``X-Ki-Doc``/``X-Ki-Stage``/``X-Ki-Trace``
                headers and (``send_metadata``) in ``user`` and ``metadata``; a missing trace id is
                generated (uuid4 hex) so every call is traceable.
            temperature: sampling temperature; None leaves the gateway default.
            extra: further body fields merged last (e.g. ``{"max_tokens": 2000}``).
        Returns: a :class:`ChatResponse` (usage is also handed to ``usage_sink``).
        Raises:
            GatewayUnavailable: transport error or HTTP 408/425/429/5xx (infrastructure).
            ProviderPermanentError: 401/403/404/``insufficient_quota``, or the (base_url, model)
                cooldown is active (no request is sent).
            GatewayRequestRejected: any other non-2xx status.
            ModelOutputInvalid: the 2xx body is not JSON or has no ``choices[0].message``.
        """
        trace = _Trace(None if doc_id is None else str(doc_id), stage, trace_id or uuid.uuid4().hex)
        body: dict[str, Any] = {"model": model, "messages": list(messages)}
        if tools:
            body["tools"] = list(tools)
            if tool_choice is not None:
                body["tool_choice"] = tool_choice
        if temperature is not None:
            body["temperature"] = temperature
        if extra:
            body.update(extra)
        data, latency_ms = self._post("/v1/chat/completions", body, model=model, stage=stage, trace=trace)
        try:
            choice = data["choices"][0]
            message = choice["message"]
            if not isinstance(message, dict):
                raise TypeError("message is not an object")
        except (KeyError, IndexError, TypeError) as exc:
            raise ModelOutputInvalid(
                f"gateway answered model {model} without choices[0].message ({type(exc).__name__}: {exc}); "
                f"body starts {json.dumps(data)[:300]}"
            ) from exc
        calls: list[ToolCall] = []
        for i, raw in enumerate(message.get("tool_calls") or []):
            fn = (raw or {}).get("function") or {}
            name = fn.get("name")
            if not isinstance(name, str) or not name:
                raise ModelOutputInvalid(f"model {model} produced a tool call without a function name: {raw!r:.300}")
            args = fn.get("arguments")
            if args is None:
                args = "{}"
            elif not isinstance(args, str):  # some backends send an object instead of JSON text
                args = json.dumps(args)
            calls.append(ToolCall(id=str(raw.get("id") or f"call_{trace.trace_id[:8]}_{i}"), name=name,
                                  arguments=args))
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            content = json.dumps(content)
        echo: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            echo["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in calls
            ]
        usage = self._usage("chat", model, trace, data.get("usage"), latency_ms)
        return ChatResponse(content=content, tool_calls=calls, message=echo, finish_reason=choice.get("finish_reason"),
                            usage=usage, model=str(data.get("model") or model))

    def embed(
        self,
        *,
        model: str,
        inputs: Sequence[str],
        batch_size: int = DEFAULT_EMBED_BATCH,
        doc_id: str | int | None = None,
        stage: str | None = None,
        trace_id: str | None = None,
    ) -> list[list[float]]:
        """``POST /v1/embeddings`` in batches of ``batch_size``; one vector per input, in input order.

        Args:
            model: embedding model name (``retrieval.embedding_model``).
            inputs: the texts; an empty list makes no request.
            batch_size: inputs per request (≥ 1).
            doc_id / stage / trace_id: trace tags as for :meth:`chat` (one trace id for all batches).
        Returns: ``len(inputs)`` vectors (lists of floats).
        Raises: as :meth:`chat`; ModelOutputInvalid also when a batch returns the wrong number of vectors.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        trace = _Trace(None if doc_id is None else str(doc_id), stage, trace_id or uuid.uuid4().hex)
        vectors: list[list[float]] = []
        for start in range(0, len(inputs), batch_size):
            batch = list(inputs[start:start + batch_size])
            data, latency_ms = self._post("/v1/embeddings", {"model": model, "input": batch}, model=model,
                                          stage=stage, trace=trace)
            try:
                items = sorted(data["data"], key=lambda d: int(d.get("index", 0)))
                got = [[float(x) for x in item["embedding"]] for item in items]
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise ModelOutputInvalid(f"embeddings answer of model {model} is malformed: {exc}") from exc
            if len(got) != len(batch):
                raise ModelOutputInvalid(
                    f"embeddings answer of model {model} has {len(got)} vectors for {len(batch)} inputs")
            vectors.extend(got)
            self._usage("embeddings", model, trace, data.get("usage"), latency_ms)
        return vectors

    def get_json(self, path: str) -> Any | None:
        """``GET path`` on the gateway (e.g. ``/v1/models``, LiteLLM's ``/model/info``): the JSON body, or
        None when the gateway answers 404 (it does not serve that path). Used by the console's model catalog.

        Raises:
            GatewayUnavailable: transport errors, timeouts, infrastructure statuses.
            GatewayRequestRejected: any other status ≥ 300 (401/403 included: no cooldown for a listing).
            ModelOutputInvalid: a 2xx body that is not JSON.
        """
        try:
            response = self._http.get(path)
        except httpx.TransportError as exc:
            raise GatewayUnavailable(f"model gateway {self.base_url} unreachable for {path}: {exc!r}",
                                     infrastructure=f"gateway transport error: {type(exc).__name__}") from exc
        if response.status_code == 404:
            return None
        if response.status_code >= 300:
            detail = error_detail(response)
            if response.status_code in INFRASTRUCTURE_HTTP_STATUSES:
                raise GatewayUnavailable(f"model gateway answered HTTP {response.status_code} for {path}: {detail}",
                                         infrastructure=f"gateway answered HTTP {response.status_code}",
                                         status=response.status_code)
            raise GatewayRequestRejected(f"model gateway refused {path} with HTTP {response.status_code}: {detail}",
                                         status=response.status_code)
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelOutputInvalid(f"model gateway answered {path} with a body that is not JSON") from exc

    # -- internals -----------------------------------------------------------------------------

    def _post(self, path: str, body: dict[str, Any], *, model: str, stage: str | None, trace: _Trace
              ) -> tuple[dict[str, Any], int]:
        self._check_cooldown(model)
        if not breaker.BREAKERS.allows(breaker.GATEWAY):  # paused: fail fast, no request (ki.adapters.breaker)
            raise GatewayUnavailable(
                f"model gateway {self.base_url} is paused after repeated outages; not sending {path} for model "
                f"{model} until a probe finds it answering",
                infrastructure="gateway paused (circuit breaker open): failed fast without a request",
            )
        if self.send_metadata:
            tags = trace.tags()
            if tags:
                body.setdefault("user", " ".join(tags))
            meta = trace.metadata()
            if meta:
                body.setdefault("metadata", meta)
        started = time.perf_counter()
        try:
            response = self._http.post(path, json=body, headers=trace.headers())
        except httpx.TimeoutException as exc:
            raise GatewayUnavailable(
                f"model gateway {self.base_url} did not answer {path} for model {model} in time: {exc!r}",
                infrastructure=f"gateway timed out ({type(exc).__name__} after {self.timeout_seconds:g} s)",
            ) from exc
        except httpx.TransportError as exc:
            raise GatewayUnavailable(
                f"model gateway {self.base_url} unreachable for {path} (model {model}): {exc!r}",
                infrastructure=f"gateway transport error: {type(exc).__name__}",
            ) from exc
        latency_ms = int(round((time.perf_counter() - started) * 1000))
        if response.status_code >= 300:
            raise self._status_error(response, path=path, model=model, stage=stage)
        breaker.succeeded(breaker.GATEWAY)  # it answers: a paused gateway resumes (ki.adapters.breaker)
        try:
            data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelOutputInvalid(
                f"model gateway {self.base_url} answered {path} for model {model} with a body that is not JSON "
                f"(HTTP {response.status_code}, starts {response.text[:200]!r})"
            ) from exc
        if not isinstance(data, dict):
            raise ModelOutputInvalid(f"model gateway answered {path} for model {model} with JSON that is not an object")
        return data, latency_ms

    def _check_cooldown(self, model: str) -> None:
        check_cooldown(self.base_url, model)

    def _status_error(self, response: httpx.Response, *, path: str, model: str, stage: str | None) -> Exception:
        return status_error(response, base_url=self.base_url, api_key=self.api_key, path=path, model=model,
                            stage=stage, cooldown_seconds=self.cooldown_seconds)

    def _usage(self, kind: str, model: str, trace: _Trace, raw: Any, latency_ms: int) -> UsageRecord:
        raw = raw if isinstance(raw, dict) else {}

        def count(key: str) -> int:
            try:
                return max(0, int(raw.get(key) or 0))
            except (TypeError, ValueError):
                return 0

        prompt, completion = count("prompt_tokens"), count("completion_tokens")
        total = count("total_tokens") or prompt + completion
        record = UsageRecord(kind=kind, model=model, stage=trace.stage, doc_id=trace.doc_id, trace_id=trace.trace_id,
                             prompt_tokens=prompt, completion_tokens=completion, total_tokens=total,
                             latency_ms=latency_ms, at=datetime.now(UTC))
        if self.usage_sink is not None:
            try:
                self.usage_sink(record)
            except Exception:  # noqa: BLE001 - the ledger must not throw away a paid answer
                log.warning("usage of %s call (model %s, trace %s) was not recorded", kind, model, trace.trace_id,
                            exc_info=True)
        return record
