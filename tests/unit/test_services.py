"""ki.app.wiring (process-wide clients, one reset) and ki.adapters.cooldown (one provider-fault cooldown for all
clients).

Spec: insertion-pipeline.md "Retry policy and quarantine" (ProviderPermanentError: cooldown for siblings);
DESIGN.md "Layout" (ki/wiring.py) and "Defaults" (KI_PROVIDER_FAULT_COOLDOWN_SECONDS stays flat).
"""

from __future__ import annotations

import pytest

from ki.adapters.agents.gateway import GatewayClient, active_cooldowns, reset_cooldowns
from ki.adapters.convert import docling as docling_mod
from ki.adapters.cooldown import PROVIDER_COOLDOWNS, Cooldowns
from ki.app import wiring
from ki.config.settings import ComponentsConfig
from ki.core.errors import ConfigurationError


class Closable:
    def __init__(self, name: str):
        self.name = name
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_shared_builds_once_per_key_and_reset_closes_everything():
    built: list[str] = []

    def build(name: str):
        built.append(name)
        return Closable(name)

    a = wiring.shared("thing", ("a", 1), lambda: build("a"))
    assert wiring.shared("thing", ("a", 1), lambda: build("again")) is a
    b = wiring.shared("thing", ("b", 1), lambda: build("b"))
    assert b is not a and built == ["a", "b"]
    hook_calls = []
    wiring.on_reset(lambda: hook_calls.append(1))
    PROVIDER_COOLDOWNS.start(("gateway", "http://gw", "m"), "dead key", seconds=60)
    wiring.reset()
    assert a.closed and b.closed and hook_calls == [1]
    assert PROVIDER_COOLDOWNS.remaining() == {}
    assert wiring.shared("thing", ("a", 1), lambda: build("a2")).name == "a2"


def test_a_failed_build_keeps_nothing():
    def boom():
        raise ConfigurationError("no")

    with pytest.raises(ConfigurationError):
        wiring.shared("thing", "k", boom)
    assert wiring.shared("thing", "k", lambda: "ok") == "ok"


def test_gateway_client_is_shared_per_setting_and_views_keep_the_pool(monkeypatch):
    monkeypatch.delenv("KI_LLM_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="KI_LLM_BASE_URL"):
        wiring.gateway()
    monkeypatch.setenv("KI_LLM_BASE_URL", "http://gw.example:4000/v1")
    monkeypatch.setenv("KI_LLM_API_KEY", "sk-one")
    first = wiring.gateway()
    assert wiring.gateway() is first and first.base_url == "http://gw.example:4000" and first.api_key == "sk-one"
    sink = []
    view = wiring.gateway(sink.append)
    assert view is not first and view.usage_sink == sink.append and view._http is first._http
    view.close()
    assert not first._http.is_closed  # a view never closes the shared pool
    monkeypatch.setenv("KI_LLM_API_KEY", "sk-two")
    second = wiring.gateway()
    assert second is not first and second.api_key == "sk-two"
    wiring.reset()
    assert first._http.is_closed and second._http.is_closed


def test_docling_client_is_shared_per_components():
    c = ComponentsConfig(docling_url="http://docling.example:5001")
    client = wiring.docling(c)
    assert wiring.docling(ComponentsConfig(docling_url="http://docling.example:5001")) is client
    assert wiring.docling(ComponentsConfig(docling_url="http://docling.example:5001",
                                             docling_api_key="k")) is not client


def test_provider_fault_cooldown_seconds_is_read_by_gateway_and_docling(monkeypatch):
    monkeypatch.setenv("KI_PROVIDER_FAULT_COOLDOWN_SECONDS", "2.5")
    assert GatewayClient("http://gw.example", None).cooldown_seconds == 2.5
    assert docling_mod.cooldown_seconds() == 2.5
    monkeypatch.delenv("KI_PROVIDER_FAULT_COOLDOWN_SECONDS")
    assert GatewayClient("http://gw.example", None).cooldown_seconds == 60
    assert docling_mod.cooldown_seconds() == 60


@pytest.mark.parametrize("value", ["soon", "-5"])
def test_a_bad_cooldown_is_rejected_alike_by_gateway_and_docling(monkeypatch, value):
    monkeypatch.setenv("KI_PROVIDER_FAULT_COOLDOWN_SECONDS", value)
    expected = f"KI_PROVIDER_FAULT_COOLDOWN_SECONDS='{value}'"
    with pytest.raises(ConfigurationError, match=expected):
        GatewayClient("http://gw.example", None)
    with pytest.raises(ConfigurationError, match=expected):
        docling_mod.cooldown_seconds()


def test_cooldowns_expire_and_reset_by_key():
    now = [1000.0]
    registry = Cooldowns(clock=lambda: now[0])
    registry.start(("gateway", "http://a", "m1"), "401 from a", seconds=0.15)
    registry.start(("gateway", "http://b", "m1"), "403 from b", seconds=60)
    registry.start(("docling", "http://d"), "401 from d", seconds=60)
    registry.start(("docling", "http://e"), "ignored", seconds=0)  # no cooldown at all
    active = registry.active(("gateway", "http://a", "m1"))
    assert active is not None and active.message == "401 from a" and active.seconds_left == pytest.approx(0.15)
    assert set(registry.remaining("docling")) == {("docling", "http://d")}
    now[0] += 0.14
    assert registry.active(("gateway", "http://a", "m1")).seconds_left == pytest.approx(0.01)
    now[0] += 0.01
    assert registry.active(("gateway", "http://a", "m1")) is None
    assert registry.reset(lambda k: k[0] == "gateway") == 1
    assert set(registry.remaining()) == {("docling", "http://d")}


def test_gateway_cooldown_helpers_see_only_gateway_keys():
    PROVIDER_COOLDOWNS.start(("gateway", "http://gw.example", "m"), "dead key", seconds=60)
    PROVIDER_COOLDOWNS.start(("docling", "http://d"), "dead key", seconds=60)
    assert set(active_cooldowns()) == {("http://gw.example", "m")}
    assert reset_cooldowns("http://gw.example/v1/") == 1
    assert active_cooldowns() == {} and set(PROVIDER_COOLDOWNS.remaining()) == {("docling", "http://d")}
