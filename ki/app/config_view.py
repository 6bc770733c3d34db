"""The effective configuration as the console edits it, and which changes require a run.

Spec: insertion-pipeline.md "Configuration" (fields, env pins) and "What "save" re-runs and what it
does not": saving only writes configuration; a run must follow exactly when a pending change needs
one to take effect — re-enabling a stage (its parked files are queued again) or a stage version bump
(``rerun_token``). Disabling a stage, ``max_attempts``, the auto-insert toggle, max file size, claim
timeout and retry backoff save without a run. DESIGN.md "Quarantine reasons" adds the same for a
change that adds a converter capability (Docling Serve, the built-in OCR: capability quarantines are
released by the next run's prepare steps) and ``pipeline.ontology_file`` (re-typing happens at the
next run). :data:`RUN_RULES` is that table as data; the page applies the same rules from the
``run_rule`` of each field, so the Save button's label and the server agree.
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from sqlalchemy.engine import Engine

from ki.app.config_edits import config_version, saved_keys
from ki.app.views import ConfigField, ConfigOut, StageConfigOut
from ki.config.loader import env_pinned_fields
from ki.config.settings import KiConfig, ProviderName, StageConfig
from ki.core.taxonomies import MODEL_STAGES, PIPELINE_STAGE_ORDER, STAGE_CONSOLE_NAMES
from ki.store.config_journal import EditAudit

RunRule = Literal["on_enable", "on_change", "on_set"]

#: (dotted-key pattern, rule, reason template; ``{stage}`` is the console name). Order matters: first match.
RUN_RULES: tuple[tuple[str, RunRule, str], ...] = (
    (r"pipeline\.stages\.(?P<s>\w+)\.enabled", "on_enable",
     "re-enabling {stage} queues its parked files again"),
    (r"pipeline\.stages\.(?P<s>\w+)\.rerun_token", "on_change",
     "a new rerun_token bumps the {stage} version: its files and every later stage re-run"),
    (r"components\.docling_url", "on_set",
     "Docling Serve adds converters: files quarantined as needs_ocr or unsupported_format are released"),
    (r"pipeline\.ocr\.enabled", "on_enable",
     "built-in OCR releases files quarantined as needs_ocr"),
    (r"components\.libreoffice", "on_set",
     "LibreOffice converts legacy Office files: files quarantined as needs_converter are released"),
    (r"pipeline\.ontology_file", "on_change",
     "a changed ontology re-types the documents whose type it affects"),
)

#: Fields whose value is never returned (write-only).
_SECRET = re.compile(r"(api_key|password|secret|token)$")
#: Fields with choices a validator (not the annotation) enforces.
_CHOICES: dict[str, list[Any]] = {"components.orchestrator_provider": list(get_args(ProviderName))}


def is_secret(key: str) -> bool:
    """Whether a dotted configuration field holds a secret (its value is never shown)."""
    name = key.rsplit(".", 1)[-1]
    return bool(_SECRET.search(name)) and name != "rerun_token"


def run_rule(key: str) -> tuple[RunRule | None, str | None]:
    """The rule and reason of ``key`` in :data:`RUN_RULES` (``(None, None)``: never requires a run)."""
    for pattern, rule, reason in RUN_RULES:
        m = re.fullmatch(pattern, key)
        if m:
            stage = m.groupdict().get("s")
            return rule, reason.format(stage=STAGE_CONSOLE_NAMES.get(stage, stage) if stage else "")
    return None, None


def requires_run(key: str, old: Any, new: Any) -> str | None:
    """Why changing ``key`` from ``old`` to ``new`` requires a run, or None when it does not."""
    rule, reason = run_rule(key)
    if rule is None or old == new:
        return None
    if rule == "on_enable" and not (new is True and old is not True):
        return None
    if rule == "on_set" and not new:
        return None
    return reason


def flat_values(config: KiConfig) -> dict[str, Any]:
    """Dotted leaf field → value of a configuration (``gen_evals`` and producer_version left out)."""
    out: dict[str, Any] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict) and node:
            for key, sub in node.items():
                walk(f"{prefix}.{key}" if prefix else str(key), sub)
        else:
            out[prefix] = node

    walk("", config.model_dump(mode="json"))
    return out


def _type_of(annotation: Any) -> tuple[str, bool, list[Any] | None]:
    nullable = False
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        nullable = len(args) < len(get_args(annotation))
        annotation = args[0] if len(args) == 1 else annotation
        origin = get_origin(annotation)
    if origin is Literal:
        return "string", nullable, list(get_args(annotation))
    if origin in (list, tuple, typing.List):  # noqa: UP006
        return "array", nullable, None
    return {bool: "boolean", int: "integer", float: "number"}.get(annotation, "string"), nullable, None


def _field_specs() -> dict[str, tuple[type[BaseModel], str, Any]]:
    """Dotted key → (model class, field name, default) for every leaf field ki edits."""
    specs: dict[str, tuple[type[BaseModel], str, Any]] = {}
    defaults = KiConfig()

    def walk(prefix: str, model: type[BaseModel], instance: BaseModel) -> None:
        for name, info in model.model_fields.items():
            key = f"{prefix}.{name}" if prefix else name
            value = getattr(instance, name)
            if isinstance(value, BaseModel):
                walk(key, type(value), value)
            elif name == "stages" and isinstance(value, dict):
                for stage in PIPELINE_STAGE_ORDER:
                    walk(f"{key}.{stage}", StageConfig, value[stage])
            else:
                specs[key] = (model, name, value)
            del info

    walk("", KiConfig, defaults)
    return specs


def describe_config(data_dir: Path, config: KiConfig) -> ConfigOut:
    """``GET /api/config``: every field with value, default, range or choices, source, env pin and run rule."""
    pins = env_pinned_fields()
    saved = saved_keys(data_dir)
    values = flat_values(config)
    fields: dict[str, ConfigField] = {}
    for key, (model, name, default) in _field_specs().items():
        info = model.model_fields[name]
        kind, nullable, choices = _type_of(info.annotation)
        bounds: dict[str, float | None] = {"minimum": None, "maximum": None, "exclusive_minimum": None}
        for meta in info.metadata:
            if isinstance(meta, annotated_types.Ge):
                bounds["minimum"] = float(meta.ge)
            elif isinstance(meta, annotated_types.Le):
                bounds["maximum"] = float(meta.le)
            elif isinstance(meta, annotated_types.Gt):
                bounds["exclusive_minimum"] = float(meta.gt)
        source = "env" if key in pins else "saved" if key in saved else "default"
        secret = is_secret(key)
        rule, reason = run_rule(key)
        value = values.get(key)
        fields[key] = ConfigField(
            key=key, value=None if secret else value, default=None if secret else _jsonable(default), type=kind,
            nullable=nullable, choices=_CHOICES.get(key, choices), source=source, env_var=pins.get(key),
            editable=key not in pins, secret=secret, is_set=bool(value) if secret else None, run_rule=rule,
            run_reason=reason, **bounds)
    stages = [StageConfigOut(stage=s, name=STAGE_CONSOLE_NAMES[s], producer_version=config.pipeline.producer_version(s),
                             model_stage=s in MODEL_STAGES, timeout_seconds=config.pipeline.timeout_seconds(s))
              for s in PIPELINE_STAGE_ORDER]
    return ConfigOut(version=config_version(data_dir), fields=fields, stages=stages)


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return list(value) if isinstance(value, tuple) else value


def edit_audit(engine: Engine, actor: str, keys: list[str]) -> EditAudit:
    """How an edit of ``keys`` is audited (console and ``ki config``): the changed fields from → to (a
    secret as ``"***"``) and whether a run is required."""

    def details(before: KiConfig, after: KiConfig) -> dict[str, Any]:
        old, new = flat_values(before), flat_values(after)
        changed = [k for k in keys if old.get(k) != new.get(k)]

        def shown(key: str, value: Any) -> Any:
            return "***" if is_secret(key) and value else value

        reasons = [r for k in changed if (r := requires_run(k, old.get(k), new.get(k)))]
        return {"changes": {k: {"from": shown(k, old.get(k)), "to": shown(k, new.get(k))} for k in changed},
                "requires_run": bool(reasons)}

    return EditAudit(engine=engine, actor=actor, details=details)
