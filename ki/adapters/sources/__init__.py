"""Source connectors (DESIGN.md ``ki/adapters/sources/``): local folder first."""

from __future__ import annotations

from ki.adapters.sources.local import LocalFolderConnector
from ki.core.errors import ConfigurationError


def open_source(kind: str, root: str, config: dict | None = None) -> LocalFolderConnector:
    """The connector for a source row. Raises ConfigurationError for an unknown kind."""
    if kind == "local":
        return LocalFolderConnector(root, config)
    raise ConfigurationError(f"unknown source kind {kind!r}")
