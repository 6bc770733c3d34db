"""The ``backend`` fixture body of the search tests that run on both backends.

``request.param`` is ``postgres`` (the embedded backend) or ``opensearch`` (the session's real node,
``tests/helpers/opensearch_node.py``, refreshing every 100 ms; the test's own index dropped before and after).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ki.config.loader import set_config_value


def backend_on(request: Any, ctx: Any, monkeypatch: Any, make: Callable[[], Any]) -> Iterator[Any]:
    """Point ``ctx`` at the backend ``request.param`` names, yield ``make()`` (the backend, asserted to be
    that one), drop an OpenSearch test index on both sides of the test."""
    if request.param == "opensearch":
        node = request.getfixturevalue("opensearch_node")
        monkeypatch.setenv("KI_OPENSEARCH_REFRESH_INTERVAL", "100ms")
        set_config_value(ctx.settings.data_dir, "components.opensearch_url", node.url)
        ctx.reload_config()
    b = make()
    assert b.name == request.param
    if b.name == "opensearch":
        b.drop_index()
    yield b
    if b.name == "opensearch":
        b.drop_index()
