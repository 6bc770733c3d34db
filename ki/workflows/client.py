"""The Hatchet client of a ki process: built from Hatchet's own environment, cached, fail closed.

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider; fails closed without an engine).
Client configuration is Hatchet's own environment (``HATCHET_CLIENT_TOKEN``, ``_HOST_PORT``,
``_SERVER_URL``, ``_TLS_STRATEGY``, ``_NAMESPACE``). Errors: :class:`OrchestratorUnavailable` when the
token is missing or the SDK refuses the configuration.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from ki.config.process import HatchetClientSettings, current
from ki.core.errors import OrchestratorUnavailable
from ki.core.shared_clients import on_reset, shared

#: Workflow names registered per client (the entry goes with the client).
_registered: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_registered_lock = threading.Lock()


def hatchet_client(*, once: bool = False) -> Any:
    """The process's ``hatchet_sdk.Hatchet`` client for the ``HATCHET_CLIENT_*`` environment (``ki.app.wiring``).

    ``once=True``: a client whose REST and gRPC calls are attempted once (the sweeper: an unknown run id
    answers NotFound in milliseconds instead of after ~15 s of retries; the triggers: every refusal reaches
    ``ki.workflows.pushback``, which retries with jitter and shrinks the batch's window). Clients are kept per
    environment (token, address, namespace), so a changed environment gets a new client.

    Raises:
        OrchestratorUnavailable: no ``HATCHET_CLIENT_TOKEN``, or the SDK refuses the configuration.
    """
    env = current(HatchetClientSettings).identity()
    if not env[0]:
        raise OrchestratorUnavailable(
            "components.orchestrator_provider is 'hatchet' but HATCHET_CLIENT_TOKEN is not set: point ki at "
            "a Hatchet engine (README, section Hatchet) or set KI_COMPONENTS__ORCHESTRATOR_PROVIDER=local")
    return shared("hatchet", ("once" if once else "default", env), lambda: _build(once))


def _build(once: bool) -> Any:
    try:
        from hatchet_sdk import ClientConfig, Hatchet
        from hatchet_sdk.config import TenacityConfig
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise OrchestratorUnavailable("hatchet-sdk is not installed: pip install 'ki[hatchet]'") from exc
    try:
        config = ClientConfig(tenacity=TenacityConfig(max_attempts=1)) if once else ClientConfig()
        return Hatchet(config=config)
    except Exception as exc:  # noqa: BLE001 - a bad token or address: fail closed, saying why
        raise OrchestratorUnavailable(f"Hatchet client configuration refused: {exc}") from exc


@on_reset
def forget_registrations() -> None:
    """Forget which workflows were registered (``ki.app.wiring.reset`` forgets the clients)."""
    with _registered_lock:
        _registered.clear()


def ensure_registered(hatchet: Any, wf: Any) -> None:
    """Register ``wf``'s definition with the engine once per process before triggering it.

    Measured on v0.105.0: a bulk trigger of a workflow name no worker has registered yet returns
    run ids that the engine never creates (REST 404, nothing ever runs). Registering the
    definition from the trigger side (the same ``PutWorkflow`` call a worker makes; an unchanged
    definition is a no-op) makes such runs queue until a worker starts.

    Private SDK call: ``hatchet._client.admin.put_workflow``. SDK 1.43.1 has no public one for a
    trigger-side process: ``Hatchet`` exposes no ``admin`` property, and ``Worker.register_workflow``
    (the only public path) needs a worker object and calls ``sys.exit(1)`` when the RPC fails.
    """
    with _registered_lock:
        names = _registered.setdefault(hatchet, set())
        if wf.name in names:
            return
    hatchet._client.admin.put_workflow(wf.to_proto())
    with _registered_lock:
        names.add(wf.name)
