"""View models of the application layer (:mod:`ki.app`): configuration fields, the re-run preview and the model
catalog, as every face returns them (``GET /api/config``, ``ki config show --json``, the console's dialogs).

Spec: insertion-pipeline.md "The console page" (settings, the "Re-run all files" dialog, the model chips).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class ConfigField(BaseModel):
    """One configuration field as the console edits it.

    ``source``: ``default``, ``saved`` (the saved file) or ``env`` (``env_var`` names the variable;
    the field is locked). ``run_rule``: when a change of this field requires a run — ``on_enable``
    (false → true), ``on_change``, ``on_set`` (unset → set) or null (never); ``run_reason`` says why.
    A ``secret`` field's value is never returned (``is_set`` says whether it has one).
    """

    key: str
    value: Any = None
    default: Any = None
    type: Literal["boolean", "integer", "number", "string", "array"]
    nullable: bool = False
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    choices: list[Any] | None = None
    source: Literal["default", "saved", "env"]
    env_var: str | None = None
    editable: bool = True
    secret: bool = False
    is_set: bool | None = None
    run_rule: Literal["on_enable", "on_change", "on_set"] | None = None
    run_reason: str | None = None


class StageConfigOut(BaseModel):
    """A stage's computed facts beside its fields: console name, effective producer_version, effective
    deadline of one attempt (``timeout_seconds``: the setting, else the stage's default; s)."""

    stage: str
    name: str
    producer_version: str
    model_stage: bool
    timeout_seconds: int


class ConfigOut(BaseModel):
    """``GET /api/config``: the effective configuration; ``version`` goes back in ``PUT`` (or If-Match)."""

    version: str
    fields: dict[str, ConfigField]
    stages: list[StageConfigOut]


class StageEstimate(BaseModel):
    """What re-running one stage costs: executions, cache hits, tokens per document and USD."""

    stage: str
    executions: int
    cache_hits: int
    tokens_per_document: float | None
    cost_usd: float | None
    basis: str


class RerunPreview(BaseModel):
    """``GET /api/stages/{stage}/rerun-preview`` (spec: the "Re-run all files" dialog).

    ``files``: rows of the stage in the done, skipped and disabled buckets (the rows that recorded
    a version); ``downstream_stages``: later enabled stages that re-run too; ``spent_usd``: the
    stage's realized spend so far; ``estimate_usd`` (None when a price is unknown) and
    ``estimate_seconds`` (None without run history) with their basis.
    """

    stage: str
    name: str
    files: int
    buckets: dict[str, int]
    downstream_stages: list[str]
    spent_usd: float
    spent_calls: int
    estimate_usd: float | None
    estimate_seconds: float | None
    per_stage: list[StageEstimate]
    #: what a run may spend before a cap holds the model stages (``pipeline.budget``; None: no cap), and the
    #: estimate set against it in one line
    budget_remaining_usd: float | None = None
    budget_note: str | None = None
    notes: list[str]


class CatalogEntry(BaseModel):
    """``GET /api/models/catalog``: one stage's model chip.

    ``alias``: the name assigned (``pipeline.stages.<stage>.model`` or ``KI_LLM_MODEL``; for index
    ``retrieval.embedding_model``); ``resolved``: the model the gateway runs and bills for it (None
    when it cannot be resolved: ``reason`` says why); prices are USD per million tokens.
    """

    stage: str
    name: str
    kind: Literal["gateway", "rules", "local", "none"]
    alias: str | None
    resolved: str | None
    input_usd_per_million: float | None
    output_usd_per_million: float | None
    reason: str | None


class CatalogOut(BaseModel):
    """The model chips of every stage that calls a model (and the index's embedding model)."""

    gateway: str | None = Field(description="'configured' or null; never the URL")
    entries: list[CatalogEntry]
