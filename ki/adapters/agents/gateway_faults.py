"""What a gateway answer means: the error class of each failed call, and the provider-fault cooldown
that an account or model fault starts.

Spec: insertion-pipeline.md "Retry policy and quarantine" (error table and the ProviderPermanentError
note: after the account is fixed, the quarantine retry releases the files) and "Failure modes". The
outcome table is :mod:`ki.adapters.agents.gateway`'s. A cooldown is keyed ``("gateway", api root, model)`` in
:data:`ki.adapters.cooldown.PROVIDER_COOLDOWNS`: while it runs, calls of that model fail fast without a request.
"""

from __future__ import annotations

import json

import httpx

from ki.adapters.cooldown import PROVIDER_COOLDOWNS
from ki.core.errors import GatewayRequestRejected, GatewayUnavailable, ProviderPermanentError
from ki.core.retry import INFRASTRUCTURE_HTTP_STATUSES, retry_after_seconds

ENV_BASE_URL = "KI_LLM_BASE_URL"
ENV_API_KEY = "KI_LLM_API_KEY"
ENV_MODEL = "KI_LLM_MODEL"
ENV_COOLDOWN = "KI_PROVIDER_FAULT_COOLDOWN_SECONDS"

COOLDOWN_PROVIDER = "gateway"


def api_root(base_url: str) -> str:
    """``http://gw:4000``, ``http://gw:4000/`` and ``http://gw:4000/v1`` all → ``http://gw:4000``."""
    root = base_url.strip().rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return root


def key_hint(api_key: str | None) -> str:
    """A key fingerprint safe for an error message: ``…wxyz`` (never the key)."""
    if not api_key:
        return "no key is set"
    if len(api_key) < 12:
        return "a short key is set"
    return f"the key ending …{api_key[-4:]}"


def reset_cooldowns(base_url: str | None = None, model: str | None = None) -> int:
    """Forget gateway provider-fault cooldowns (all, or those matching ``base_url`` and/or ``model``).

    Call it when an operator retries quarantined files after fixing the account (spec: "After the
    account is fixed, the quarantine retry releases the files"); tests call ``ki.app.wiring.reset()``.
    Returns: how many cooldowns were dropped.
    """
    root = api_root(base_url) if base_url is not None else None
    return PROVIDER_COOLDOWNS.reset(lambda k: k[0] == COOLDOWN_PROVIDER and (root is None or k[1] == root)
                                    and (model is None or k[2] == model))


def active_cooldowns() -> dict[tuple[str, str], float]:
    """(api root, model) → seconds of cooldown left, for status displays and tests."""
    return {(str(k[1]), str(k[2])): left for k, left in PROVIDER_COOLDOWNS.remaining(COOLDOWN_PROVIDER).items()}


def check_cooldown(base_url: str, model: str) -> None:
    """Fail fast while a cooldown of (``base_url``'s api root, ``model``) runs.

    Raises: ProviderPermanentError: the cooldown's message, with the seconds left.
    """
    active = PROVIDER_COOLDOWNS.active((COOLDOWN_PROVIDER, base_url, model))
    if active is not None:
        raise ProviderPermanentError(
            f"{active.message} [failing fast without contacting the gateway: provider-fault cooldown, "
            f"{active.seconds_left:.0f} s left of {ENV_COOLDOWN}]"
        )


def start_cooldown(base_url: str, model: str, message: str, seconds: float) -> None:
    """Start (or restart) the cooldown of (``base_url``'s api root, ``model``) for ``seconds`` s."""
    PROVIDER_COOLDOWNS.start((COOLDOWN_PROVIDER, base_url, model), message, seconds)


def status_error(response: httpx.Response, *, base_url: str, api_key: str | None, path: str, model: str,
                 stage: str | None, cooldown_seconds: float) -> Exception:
    """The error to raise for a gateway answer with HTTP status >= 300 (the outcome table of
    :mod:`ki.adapters.agents.gateway`): ProviderPermanentError for an account or model fault (and its cooldown
    started), GatewayUnavailable for an infrastructure status, GatewayRequestRejected otherwise."""
    code = response.status_code
    text = response.text[:4000]
    detail = error_detail(response)
    where = f"model gateway {base_url}"
    stage_hint = (f"pipeline.stages.{stage}.model (Models & services) or {ENV_MODEL}" if stage
                  else f"the stage's model or {ENV_MODEL}")
    message: str | None = None
    if code == 429 and "insufficient_quota" in text:
        message = (
            f"The provider account behind {where} has exhausted its quota for model {model} "
            f"(HTTP 429 insufficient_quota: {detail}). Add credit or raise the account's quota/budget "
            f"for {key_hint(api_key)} in {ENV_API_KEY}, then retry the quarantined files."
        )
    elif code == 401:
        message = (
            f"{where} rejected the API key ({key_hint(api_key)} in {ENV_API_KEY}) with HTTP 401 "
            f"while calling model {model}: {detail}. Put a valid key for this gateway into {ENV_API_KEY}, "
            f"then retry the quarantined files."
        )
    elif code == 403:
        message = (
            f"{where} forbids model {model} to {key_hint(api_key)} in {ENV_API_KEY} (HTTP 403): "
            f"{detail}. Grant this key access to {model} on the gateway/provider account, or assign a model "
            f"the key may use via {stage_hint}, then retry the quarantined files."
        )
    elif code == 404:
        message = (
            f"{where} does not serve model {model} (HTTP 404 on {path}): {detail}. Check the model name "
            f"assigned via {stage_hint} against the gateway's model list; if every model answers 404, "
            f"{ENV_BASE_URL}={base_url} is probably not the gateway root. Then retry the quarantined files."
        )
    if message is not None:
        start_cooldown(base_url, model, message, cooldown_seconds)
        return ProviderPermanentError(message)
    if code in INFRASTRUCTURE_HTTP_STATUSES:  # the gateway, not the document or the account
        return GatewayUnavailable(
            f"{where} answered HTTP {code} for {path} (model {model}): {detail}",
            infrastructure=f"gateway answered HTTP {code}",
            status=code, retry_after_seconds=retry_after_seconds(response.headers.get("Retry-After")))
    return GatewayRequestRejected(f"{where} refused {path} for model {model} with HTTP {code}: {detail}",
                                  status=code)


def error_detail(response: httpx.Response) -> str:
    """The gateway's own error message (OpenAI ``{"error": {"message": ...}}`` or the text), short."""
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            code = err.get("code") or err.get("type")
            return f"{err['message']}" + (f" [{code}]" if code else "")
        if isinstance(err, str):
            return err[:500]
        if data.get("message"):
            return str(data["message"])[:500]
    text = response.text.strip()
    return text[:500] if text else "(empty body)"
