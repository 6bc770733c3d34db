"""Configuration (DESIGN.md ``ki/config/``): the saved configuration and the process settings.

Every environment variable ki reads is read in this package. Its names load lazily (PEP 562), so a small
process — ``ki search`` asking a running ``ki serve``, the CLI's fault log — can import the light modules here
(:mod:`ki.config.data_dir`, :mod:`ki.config.environment`) without the settings models (pydantic-settings).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "env_pinned_fields": "ki.config.loader",
    "load_config": "ki.config.loader",
    "set_config_value": "ki.config.loader",
    "HatchetClientSettings": "ki.config.process",
    "LlmSettings": "ki.config.process",
    "OcrSettings": "ki.config.process",
    "OpenSearchSettings": "ki.config.process",
    "ProcessSettings": "ki.config.process",
    "ServerSettings": "ki.config.process",
    "current": "ki.config.process",
    "CODE_STAGE_VERSIONS": "ki.config.settings",
    "KiConfig": "ki.config.settings",
    "PipelineConfig": "ki.config.settings",
    "StageConfig": "ki.config.settings",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
