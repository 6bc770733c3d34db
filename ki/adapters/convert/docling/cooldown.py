"""The cooldown after Docling Serve refused the API key (HTTP 401/403), on the shared provider cooldown.

Spec: insertion-pipeline.md "Failure modes" (dead credentials fail fast through a short
cooldown). While it runs, every conversion raises :class:`~ki.core.errors.DoclingKeyRejected`
without network traffic; the quarantine retry calls :func:`reset_cooldown` once the key is fixed.
The cooldown is process-wide (key ``("docling",)`` in :data:`ki.adapters.cooldown.PROVIDER_COOLDOWNS`, as
long as ``KI_PROVIDER_FAULT_COOLDOWN_SECONDS`` says, like the gateway's); ``ki.app.wiring.reset`` clears it.
"""

from __future__ import annotations

from ki.adapters.cooldown import PROVIDER_COOLDOWNS
from ki.adapters.cooldown import cooldown_seconds as shared_cooldown_seconds
from ki.core.errors import DoclingKeyRejected

#: Environment variable of the provider-fault cooldown (ProcessSettings.provider_fault_cooldown_seconds).
COOLDOWN_ENV = "KI_PROVIDER_FAULT_COOLDOWN_SECONDS"
DEFAULT_COOLDOWN_SECONDS = 60.0
COOLDOWN_KEY = ("docling",)


def cooldown_seconds() -> float:
    """The provider-fault cooldown in seconds: ``$KI_PROVIDER_FAULT_COOLDOWN_SECONDS`` or 60 (≥ 0).

    Raises: ConfigurationError naming the variable when it is not a number ≥ 0 (as for the gateway).
    """
    return shared_cooldown_seconds()


def reset_cooldown() -> None:
    """Forget a 401/403 cooldown (the quarantine retry after the key was fixed)."""
    PROVIDER_COOLDOWNS.reset(lambda key: key == COOLDOWN_KEY)


def cooldown_remaining() -> float:
    """Seconds left in the current 401/403 cooldown (0.0 when none is active)."""
    active = PROVIDER_COOLDOWNS.active(COOLDOWN_KEY)
    return active.seconds_left if active else 0.0


def start_cooldown(message: str) -> None:
    """Start (or restart) the cooldown for :func:`cooldown_seconds`; ``message`` is what later calls raise.

    Raises: ConfigurationError from :func:`cooldown_seconds`.
    """
    PROVIDER_COOLDOWNS.start(COOLDOWN_KEY, message)


def check_cooldown() -> None:
    """Raise :class:`~ki.core.errors.DoclingKeyRejected` (the refusal's message) while the cooldown runs."""
    active = PROVIDER_COOLDOWNS.active(COOLDOWN_KEY)
    if active is not None:
        raise DoclingKeyRejected(active.message)
