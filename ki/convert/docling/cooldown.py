"""The process-wide cooldown after Docling Serve refused the API key (HTTP 401/403).

Spec: insertion-pipeline.md "Failure modes" (dead credentials fail fast through a short
cooldown). While it runs, every conversion raises :class:`~ki.errors.DoclingKeyRejected`
without network traffic; the quarantine retry calls :func:`reset_cooldown` once the key is fixed.
"""

from __future__ import annotations

import os
import threading
import time

from ki.errors import DoclingKeyRejected

#: Environment variable of the provider-fault cooldown (ProcessSettings.provider_fault_cooldown_seconds).
COOLDOWN_ENV = "KI_PROVIDER_FAULT_COOLDOWN_SECONDS"
DEFAULT_COOLDOWN_SECONDS = 60.0

_cooldown_lock = threading.Lock()
_cooldown_until = 0.0
_cooldown_message: str | None = None


def cooldown_seconds() -> float:
    """The provider-fault cooldown in seconds: ``$KI_PROVIDER_FAULT_COOLDOWN_SECONDS`` or 60 (≥ 0)."""
    raw = os.environ.get(COOLDOWN_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_COOLDOWN_SECONDS
    try:
        return max(0.0, float(raw))
    except ValueError:
        return DEFAULT_COOLDOWN_SECONDS


def reset_cooldown() -> None:
    """Forget a 401/403 cooldown (tests, and the quarantine retry after the key was fixed)."""
    global _cooldown_until, _cooldown_message
    with _cooldown_lock:
        _cooldown_until = 0.0
        _cooldown_message = None


def cooldown_remaining() -> float:
    """Seconds left in the current 401/403 cooldown (0.0 when none is active)."""
    with _cooldown_lock:
        return max(0.0, _cooldown_until - time.monotonic()) if _cooldown_message else 0.0


def start_cooldown(message: str) -> None:
    """Start (or restart) the cooldown for :func:`cooldown_seconds`; ``message`` is what later calls raise."""
    global _cooldown_until, _cooldown_message
    with _cooldown_lock:
        _cooldown_until = time.monotonic() + cooldown_seconds()
        _cooldown_message = message


def check_cooldown() -> None:
    """Raise :class:`~ki.errors.DoclingKeyRejected` (the refusal's message) while the cooldown runs."""
    with _cooldown_lock:
        active = _cooldown_message is not None and time.monotonic() < _cooldown_until
        message = _cooldown_message
    if active and message:
        raise DoclingKeyRejected(message)
