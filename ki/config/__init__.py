"""Configuration (DESIGN.md ``ki/config/``)."""

from ki.config.loader import ProcessSettings, env_pinned_fields, load_config, set_config_value
from ki.config.settings import CODE_STAGE_VERSIONS, KiConfig, PipelineConfig, StageConfig

__all__ = [
    "CODE_STAGE_VERSIONS",
    "KiConfig",
    "PipelineConfig",
    "ProcessSettings",
    "StageConfig",
    "env_pinned_fields",
    "load_config",
    "set_config_value",
]
