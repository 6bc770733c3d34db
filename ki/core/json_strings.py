"""Every string in a JSON value (object keys included), found without recursion: the checks that refuse
text no store can hold (a NUL at the request edge, a lone surrogate in a configuration edit) walk with it,
so a deeply nested value cannot exhaust the stack."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def strings(value: Any) -> Iterator[str]:
    """Yield every ``str`` in ``value`` (dicts' keys and values, lists' items), depth-first."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
