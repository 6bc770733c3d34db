"""A literal string inside a SQL ``LIKE`` pattern.

Every prefix or substring match on a path, a folder or a converted text escapes the string it is given, so a
file name holding ``%`` or ``_`` matches only itself. The statements say ``ESCAPE '\\'``. Pure: imports nothing.
"""

from __future__ import annotations


def like_escape(value: str) -> str:
    r"""``value`` escaped for a LIKE pattern with ``ESCAPE '\'``: backslash, ``%`` and ``_`` stand for themselves
    (e.g. ``like_escape("a_1%") + "%"`` is the prefix pattern of ``a_1%``)."""
    return value.replace("\\", "\\\\").replace("%", r"\%").replace("_", r"\_")
