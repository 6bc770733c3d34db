"""Provider-fault cooldowns, shared by every client of an outside provider (the gateway, Docling Serve).

Spec: insertion-pipeline.md "Retry policy and quarantine" (ProviderPermanentError: the file is
quarantined with a readable cause and its siblings get a cooldown). When a provider rejects the
account (a dead key, a model that does not exist, no quota), every later call with the same key
fails fast for ``provider_fault_cooldown_seconds`` (``KI_PROVIDER_FAULT_COOLDOWN_SECONDS``, 60 s)
without contacting the provider; the quarantine retry after the account is fixed resets it.

A key is a tuple whose first item names the provider (``("gateway", api_root, model)``,
``("docling", base_url)``). :data:`PROVIDER_COOLDOWNS` is the process's registry; ``ki.app.wiring.reset``
clears it. Times are seconds of the registry's clock (``time.monotonic`` unless a test gives another).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from ki.config.process import ProcessSettings, current

CooldownKey = tuple[Hashable, ...]


def cooldown_seconds() -> float:
    """The provider-fault cooldown (s, ≥ 0) as ``KI_PROVIDER_FAULT_COOLDOWN_SECONDS`` sets it now (60).

    Raises:
        ConfigurationError: the variable is not a number ≥ 0 (or another process variable is invalid).
    """
    return current(ProcessSettings).provider_fault_cooldown_seconds


@dataclass(frozen=True)
class ActiveCooldown:
    """A cooldown in force: the provider's refusal that started it and the seconds left of ``seconds``."""

    message: str
    seconds_left: float
    seconds: float


class Cooldowns:
    """Thread-safe registry of cooldowns by key (see the module docstring for keys).

    Args:
        clock: monotonic seconds (default ``time.monotonic``; tests pass a clock they advance).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[CooldownKey, tuple[float, float, str]] = {}  # key → (until, seconds, message)

    def start(self, key: CooldownKey, message: str, seconds: float | None = None) -> None:
        """Start (or restart) the cooldown of ``key`` for ``seconds`` (None: :func:`cooldown_seconds`; ≤ 0: none).

        Raises: ConfigurationError from :func:`cooldown_seconds`.
        """
        length = cooldown_seconds() if seconds is None else seconds
        if length <= 0:
            return
        with self._lock:
            self._entries[key] = (self._clock() + length, length, message)

    def active(self, key: CooldownKey) -> ActiveCooldown | None:
        """The cooldown of ``key`` if one is in force (an expired one is dropped)."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] <= now:
                del self._entries[key]
                return None
        until, length, message = entry
        return ActiveCooldown(message=message, seconds_left=until - now, seconds=length)

    def remaining(self, provider: str | None = None) -> dict[CooldownKey, float]:
        """key → seconds left, for every cooldown in force (of ``provider`` only, when given)."""
        now = self._clock()
        with self._lock:
            return {k: until - now for k, (until, _, _) in self._entries.items()
                    if until > now and (provider is None or k[0] == provider)}

    def reset(self, match: Callable[[CooldownKey], bool] | None = None) -> int:
        """Forget the cooldowns whose key satisfies ``match`` (all when None); returns how many."""
        with self._lock:
            keys = [k for k in self._entries if match is None or match(k)]
            for k in keys:
                del self._entries[k]
        return len(keys)


#: The process's cooldowns (every gateway and Docling client shares them).
PROVIDER_COOLDOWNS = Cooldowns()
