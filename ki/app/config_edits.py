"""Versioned, all-or-nothing edits of the saved configuration (``PUT /api/config``).

Spec: insertion-pipeline.md "Configuration" (an environment-pinned setting refuses console edits
with a 409 rather than silently losing them). A partial update of several fields is
validated as a whole and written atomically or not at all; two concurrent editors cannot
silently overwrite each other: every edit names the :func:`config_version` it was based on and a
stale one is refused (409).

The version is a digest of the saved file's bytes, so an edit made with ``ki config set`` (or by
hand) also makes an open console's version stale. Edits serialise on an exclusive ``flock`` of
``config.json.lock`` beside the file, across processes.

Values are taken strictly by the field's type (``"64"`` is no integer, ``true`` no size, ``"yes"`` no
boolean), text must be valid Unicode (no lone surrogate: it could be saved but not audited), and an
edit given an :class:`~ki.store.config_journal.EditAudit` is saved together with its audit entry
(:mod:`ki.store.config_journal`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from ki.config.loader import _read_saved, config_path, env_pinned_fields
from ki.config.settings import KiConfig, PipelineConfig, StageConfig
from ki.core.errors import ConfigValidationError, EnvPinnedError, StaleConfigVersion
from ki.core.json_strings import strings
from ki.store.config_journal import EditAudit, commit, edit_lock, version_of

#: The version of a data directory with no saved configuration file.
EMPTY_VERSION = "0"


def config_version(data_dir: Path) -> str:
    """The saved configuration's version: the first 16 hex digits of its SHA-256, or ``"0"``."""
    path = config_path(data_dir)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return EMPTY_VERSION
    return version_of(raw)


def saved_keys(data_dir: Path) -> set[str]:
    """Dotted names of the leaf fields the saved file sets (``source: saved`` in the API)."""
    out: set[str] = set()

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for key, sub in node.items():
                walk(f"{prefix}.{key}" if prefix else str(key), sub)
        else:
            out.add(prefix)

    walk("", _read_saved(config_path(data_dir)))
    return out


def _leaf_keys(model: KiConfig) -> set[str]:
    out: set[str] = set()

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict) and node:
            for key, sub in node.items():
                walk(f"{prefix}.{key}" if prefix else str(key), sub)
        else:
            out.add(prefix)

    walk("", model.model_dump())
    return out


def _field_errors(exc: ValidationError, changed: list[str]) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for err in exc.errors():
        dotted = ".".join(str(p) for p in err["loc"])
        # A model-level validator (e.g. on pipeline.stages) reports its section: name the edited keys in it.
        targets = [k for k in changed if k == dotted or k.startswith(dotted + ".")] or [dotted]
        for key in targets:
            errors.setdefault(key, []).append(err["msg"].removeprefix("Value error, "))
    return errors


def _field_type(key: str) -> Any:
    """The annotation of the dotted leaf field ``key`` (None when it names no field)."""
    model: type[BaseModel] = KiConfig
    parts = key.split(".")
    i = 0
    while i < len(parts):
        info = model.model_fields.get(parts[i])
        if info is None:
            return None
        if i == len(parts) - 1:
            return info.annotation
        if model is PipelineConfig and parts[i] == "stages":
            model, i = StageConfig, i + 2
        elif isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            model, i = info.annotation, i + 1
        else:
            return None
    return None


def _not_text(value: Any) -> str | None:
    """Why ``value`` holds text no file, database or page can carry (a lone surrogate), or None."""
    for item in strings(value):
        try:
            item.encode("utf-8")
        except UnicodeEncodeError:
            return "the text holds a lone surrogate (not valid Unicode); send the character itself"
    return None


def _strict(key: str, value: Any) -> str | None:
    """Why ``value`` is not of ``key``'s type taken strictly (no string or boolean coercion), or None."""
    annotation = _field_type(key)
    if annotation is None:
        return None
    try:
        TypeAdapter(annotation).validate_python(value, strict=True)
    except ValidationError as exc:
        return "; ".join(e["msg"] for e in exc.errors()) + f" (got {type(value).__name__} {value!r:.60})"
    return None


def _validated(saved: dict[str, Any]) -> KiConfig:
    try:
        return KiConfig.model_validate(saved)
    except ValidationError:
        return KiConfig()


def unset_config_value(data_dir: Path, key: str, *, audit: EditAudit | None = None) -> bool:
    """Remove ``key`` (a dotted leaf field) from the saved configuration: it falls back to its default;
    with ``audit`` the removal is recorded with it (:func:`ki.store.config_journal.commit`).

    Returns: False when the saved file did not set it (nothing written).
    Raises:
        EnvPinnedError: the field is pinned by an environment variable.
        ConfigValidationError: ``key`` is no configuration field, or the rest no longer validates.
    """
    with edit_lock(data_dir):
        pins = env_pinned_fields()
        if key in pins:
            raise EnvPinnedError(key, pins[key])
        if key not in _leaf_keys(KiConfig()):
            raise ConfigValidationError({key: ["unknown configuration field"]})
        original = _read_saved(config_path(data_dir))
        saved = copy.deepcopy(original)
        trail: list[tuple[dict, str]] = []
        node: Any = saved
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            trail.append((node, part))
            node = node[part]
        leaf_parent, leaf = trail[-1]
        del leaf_parent[leaf]
        for parent, part in reversed(trail[:-1]):  # then the sections it leaves empty
            if parent[part] == {}:
                del parent[part]
        try:
            checked = KiConfig.model_validate(saved)
        except ValidationError as exc:
            raise ConfigValidationError(_field_errors(exc, [key])) from exc
        commit(data_dir, saved, audit=audit, before=_validated(original), after=checked)
        return True


def apply_config_changes(data_dir: Path, changes: Mapping[str, Any], *, expected_version: str | None,
                         dry_run: bool = False, audit: EditAudit | None = None) -> tuple[KiConfig, str]:
    """Apply ``changes`` (dotted field → JSON value) to the saved configuration, all or nothing.

    Args:
        data_dir: the data directory holding ``config.json``.
        changes: e.g. ``{"pipeline.max_file_mb": 64, "pipeline.stages.relate.enabled": True}``;
            values are taken as given and must have the field's type strictly (no string or boolean
            coercion; an integer is a number). ``producer_version`` is refused.
        expected_version: the :func:`config_version` the edit was based on; None skips the check
            (the command line's single-field ``ki config set``).
        dry_run: check everything, write nothing.
        audit: record the edit in the audit log, together with the file (None: unaudited, for tests).
    Returns: (the new saved configuration validated — environment pins are not in it, and no changed
        field is pinned —, the new version; with ``dry_run`` the current version).
    Raises:
        StaleConfigVersion: ``expected_version`` is not the current version (409).
        EnvPinnedError: a changed field is pinned by an environment variable (409; the first one).
        ConfigValidationError: unknown fields or invalid values, per field (422).
        Whatever the audit insert raises (then the previous file is back).
    Nothing is written when anything is raised.
    """
    with edit_lock(data_dir):
        current = config_version(data_dir)
        if expected_version is not None and expected_version != current:
            raise StaleConfigVersion(expected_version, current)
        pins = env_pinned_fields()
        for key in changes:
            if key in pins:
                raise EnvPinnedError(key, pins[key])
        known = _leaf_keys(KiConfig())
        errors: dict[str, list[str]] = {}
        original = _read_saved(config_path(data_dir))
        saved = copy.deepcopy(original)
        for key, value in changes.items():
            if key.endswith(".producer_version"):
                errors.setdefault(key, []).append("producer_version is computed from the code version and "
                                                  "rerun_token; bump rerun_token to re-run a stage")
                continue
            if key not in known:
                errors.setdefault(key, []).append("unknown configuration field")
                continue
            wrong = _not_text(value) or _strict(key, value)
            if wrong:
                errors.setdefault(key, []).append(wrong)
                continue
            node = saved
            parts = key.split(".")
            for part in parts[:-1]:
                child = node.get(part)
                if not isinstance(child, dict):
                    child = node[part] = {}
                node = child
            node[parts[-1]] = value
        try:
            checked = KiConfig.model_validate(saved)
        except ValidationError as exc:
            for key, messages in _field_errors(exc, [k for k in changes if k not in errors]).items():
                errors.setdefault(key, []).extend(messages)
        if errors:
            raise ConfigValidationError(errors)
        if dry_run:
            return checked, current
        return checked, commit(data_dir, saved, audit=audit, before=_validated(original), after=checked)
