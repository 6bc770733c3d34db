"""Loading, pinning and saving the configuration (the process-level settings are :mod:`ki.config.process`).

Spec: insertion-pipeline.md "Configuration" (env pins refuse edits with 409) and
"producer_version semantics" (a saved producer_version is discarded).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from ki.config.process import ProcessSettings
from ki.config.settings import ComponentsConfig, FirmConfig, KiConfig, PipelineConfig, RetrievalConfig
from ki.core.errors import ConfigurationError, EnvPinnedError

__all__ = ["ProcessSettings", "config_path", "env_pinned_fields", "load_config", "set_config_value"]

CONFIG_FILE_NAME = "config.json"


class _EnvKiConfig(BaseSettings, KiConfig):
    """KiConfig read from ``KI_`` env variables (``__`` nesting) over init values (the saved file)."""

    model_config = SettingsConfigDict(env_prefix="KI_", env_nested_delimiter="__", extra="ignore")

    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    firm: FirmConfig = Field(default_factory=FirmConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    components: ComponentsConfig = Field(default_factory=ComponentsConfig)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (env_settings, init_settings)


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, sub in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), sub, out)
    else:
        out[prefix] = value


def env_pinned_fields() -> dict[str, str]:
    """Dotted field names pinned by the environment → the env variable that pins them.

    Example: ``{"pipeline.max_file_mb": "KI_PIPELINE__MAX_FILE_MB"}``.
    """
    values = EnvSettingsSource(_EnvKiConfig, env_prefix="KI_", env_nested_delimiter="__")()
    flat: dict[str, Any] = {}
    _flatten("", values, flat)
    return {k: "KI_" + k.replace(".", "__").upper() for k in flat}


def config_path(data_dir: Path) -> Path:
    """The saved configuration file inside ``data_dir``."""
    return data_dir / CONFIG_FILE_NAME


def _read_saved(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"saved configuration {path} is unreadable: {exc}") from exc
    # producer_version is computed, never obeyed (spec: producer_version semantics).
    for stage in (raw.get("pipeline", {}).get("stages") or {}).values():
        if isinstance(stage, dict):
            stage.pop("producer_version", None)
    return raw


def load_config(data_dir: Path) -> KiConfig:
    """Effective configuration: defaults ← saved file ← ``KI_`` environment.

    Raises:
        ConfigurationError: the saved file is unreadable or a value is out of range.
    """
    saved = _read_saved(config_path(data_dir))
    try:
        merged = _EnvKiConfig(**saved)
    except ValueError as exc:
        raise ConfigurationError(f"invalid configuration: {exc}") from exc
    return KiConfig.model_validate(merged.model_dump())


def _coerce(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def set_config_value(data_dir: Path, dotted: str, value: Any) -> KiConfig:
    """Edit one field of the saved configuration and save it.

    Args:
        dotted: e.g. ``pipeline.stages.index.enabled`` or ``firm.name``.
        value: the new value; strings are parsed as JSON when they parse (``"true"`` → True).
    Returns: the new effective configuration.
    Raises:
        EnvPinnedError: the field is pinned by an environment variable (API: 409).
        ConfigurationError: unknown field or invalid value; nothing is written.
    """
    if dotted.endswith(".producer_version"):
        raise ConfigurationError("producer_version is computed from the code version and rerun_token")
    pins = env_pinned_fields()
    if dotted in pins:
        raise EnvPinnedError(dotted, pins[dotted])
    path = config_path(data_dir)
    saved = _read_saved(path)
    node = saved
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigurationError(f"{dotted}: {part} is not a section")
    node[parts[-1]] = _coerce(value) if isinstance(value, str) else value
    try:
        checked = KiConfig.model_validate(saved)
    except ValueError as exc:
        if not isinstance(value, str) or node[parts[-1]] == value:
            raise ConfigurationError(f"invalid value for {dotted}: {exc}") from exc
        node[parts[-1]] = value  # "2" meant as text (a rerun token, a firm name): keep the string
        try:
            checked = KiConfig.model_validate(saved)
        except ValueError as exc2:
            raise ConfigurationError(f"invalid value for {dotted}: {exc2}") from exc2
    flat: dict[str, Any] = {}
    _flatten("", checked.model_dump(), flat)
    if dotted not in flat and not any(k.startswith(dotted + ".") for k in flat):
        raise ConfigurationError(f"unknown configuration field {dotted}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(saved, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
    return load_config(data_dir)
