"""Configuration (DESIGN.md ``ki/config/``): the saved configuration and the process settings."""

from ki.config.loader import env_pinned_fields, load_config, set_config_value
from ki.config.process import (
    HatchetClientSettings,
    LlmSettings,
    OcrSettings,
    OpenSearchSettings,
    ProcessSettings,
    ServerSettings,
    current,
)
from ki.config.settings import CODE_STAGE_VERSIONS, KiConfig, PipelineConfig, StageConfig

__all__ = [
    "CODE_STAGE_VERSIONS",
    "HatchetClientSettings",
    "KiConfig",
    "LlmSettings",
    "OcrSettings",
    "OpenSearchSettings",
    "PipelineConfig",
    "ProcessSettings",
    "ServerSettings",
    "StageConfig",
    "current",
    "env_pinned_fields",
    "load_config",
    "set_config_value",
]
