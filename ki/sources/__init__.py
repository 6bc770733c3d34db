"""Source connectors (DESIGN.md ``ki/sources/``): local folder first."""

from __future__ import annotations

from ki.errors import ConfigurationError
from ki.sources.local import LocalFolderConnector


def open_source(kind: str, root: str, config: dict | None = None) -> LocalFolderConnector:
    """The connector for a source row. Raises ConfigurationError for an unknown kind."""
    if kind == "local":
        return LocalFolderConnector(root, config)
    raise ConfigurationError(f"unknown source kind {kind!r}")
