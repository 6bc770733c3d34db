"""Pydantic models of every body the console API takes or returns.

Spec: insertion-pipeline.md "The console page" (the endpoints and what they carry), "Retry from
quarantine" (the retry response), "Processing states and console buckets" (bucket names),
"The console page" (the API list). Times are timezone-aware UTC (ISO 8601); durations are seconds; money is USD.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ki.orchestration.quarantine import RetryResponse
from ki.store.audit import AuditEntry
from ki.store.runs import RunRow


class ErrorBody(BaseModel):
    """Every error response: a stable ``error`` code, a ``message`` a person can act on, and extras
    (``env_var`` and ``field`` for an env pin, ``current_version`` for a stale edit, ``fields`` for 422)."""

    model_config = ConfigDict(extra="allow")
    error: str
    message: str


# --- status ------------------------------------------------------------------------------------


class StageStatus(BaseModel):
    """One stage card: the eight bucket counts (``pending`` … ``quarantined``), their total, and
    ``blocked``: how many of the waiting rows a quarantined earlier stage blocks (:mod:`ki.store.blocked`)."""

    stage: str
    name: str = Field(description="the console name (Fetch, Parse, Classify, ...)")
    enabled: bool
    buckets: dict[str, int]
    total: int
    blocked: int = Field(0, description="of the waiting rows, those a quarantined earlier stage of the same file "
                         "blocks: they move only once that stage is retried (a sub-count of waiting, not a bucket)")


class ActiveRun(RunRow):
    """A run in progress: counters are stage executions; ``total`` = processed + rows still owed
    (queued, running, awaiting retry, waiting) in enabled stages; ``rate_per_second`` since start."""

    total: int
    rate_per_second: float | None
    eta_seconds: float | None


class PausedDependency(BaseModel):
    """An open circuit breaker (:mod:`ki.adapters.breaker`): the ``stages`` needing ``dependency``
    are not claimed since ``since``; ``message`` reads ``paused: gateway unavailable since …``."""

    dependency: str
    since: datetime
    reason: str
    next_probe_at: datetime
    probes: int
    stages: list[str]
    message: str


class BudgetWait(BaseModel):
    """A reached spending cap (``pipeline.budget``; ``ki.orchestration.budget``): the model ``stages`` are not
    claimed; ``waiting`` rows of them wait with the reason ``budget`` until ``resets_at`` (daily cap) or a
    higher cap."""

    reason: str = "budget"
    cap: Literal["daily", "run"]
    limit_usd: float
    spent_usd: float
    stages: list[str]
    resets_at: datetime | None
    waiting: int
    message: str


class UnreadableFile(BaseModel):
    """A file the share will not let ki read, parked waiting (reason ``source_unreadable``) until a scan
    sees its permissions change: its source, object, path and the mode and owner it had (``mode`` in octal)."""

    source_id: int
    source_object_id: int
    path: str
    mode: str | None = None
    uid: int | None = None
    gid: int | None = None


class SourceLastRun(BaseModel):
    """A source's latest run: id, status and when it finished (None while it runs)."""

    id: int
    status: str
    finished_at: datetime | None = None


class SourceOut(BaseModel):
    """``GET /api/sources``: one source (:mod:`ki.adapters.sources.overview`): its folder, its permission model
    (``share``: readers from the share's owner, group, mode and ACLs; ``configured``: the grants of its
    configuration; ``public``: every principal sees every document) and how many of its indexed documents
    every principal may see (``open_to_everyone`` of ``indexed``)."""

    id: int
    kind: str
    path: str
    permissions: Literal["share", "configured", "public"]
    files: int
    documents: int
    missing: int
    unreadable: int
    quarantined: int
    indexed: int
    open_to_everyone: int
    last_scan_at: datetime | None = None
    last_run: SourceLastRun | None = None
    watcher: str | None = None


class StatusOut(BaseModel):
    """``GET /api/status``: per-stage buckets (the one bucket query, counted at ``generated_at``:
    shared by every reader, at most about a second old; see :mod:`ki.api.status_cache`), the
    active runs, the paused dependencies and the files ki may not read (first 200), read at most about a second
    before (one answer per principal shared by concurrent readers: :mod:`ki.api.shared_answers`)."""

    stages: list[StageStatus]
    runs: list[ActiveRun]
    budget: BudgetWait | None = None
    generated_at: datetime
    paused: list[PausedDependency] = Field(default_factory=list)
    unreadable: list[UnreadableFile] = Field(default_factory=list)


# --- runs --------------------------------------------------------------------------------------


class RunOut(RunRow):
    """One ``pipeline_runs`` row (kind ``insertion``, ``access_refresh`` or ``sync``) and its duration."""

    duration_seconds: float | None = None

    @classmethod
    def of(cls, row: RunRow) -> RunOut:
        """The row with ``duration_seconds`` once it finished."""
        duration = (row.finished_at - row.started_at).total_seconds() if row.finished_at else None
        return cls(**row.model_dump(), duration_seconds=duration)


class RunsPage(BaseModel):
    """``GET /api/runs``: newest first, as read at ``generated_at`` (a page is shared by concurrent readers for
    about a second: :mod:`ki.api.shared_answers`)."""

    runs: list[RunOut]
    total: int
    limit: int
    offset: int
    generated_at: datetime


class LaunchOut(BaseModel):
    """``POST /api/actions/pipeline``: the run started (or the one already running, with
    ``follow_up`` true: another run starts when it ends, so the new work is picked up)."""

    run: RunOut | None
    follow_up: bool
    message: str


class SyncIn(BaseModel):
    """``POST /api/actions/sync``: the source to sync (no other field)."""

    model_config = ConfigDict(extra="forbid")
    source_id: int = Field(ge=1, le=2_147_483_647)


class RunCancelIn(BaseModel):
    """``POST /api/runs/{id}/cancel``: an optional ``reason`` kept in the audit entry (unknown fields refused)."""

    model_config = ConfigDict(extra="forbid")
    reason: str | None = Field(default=None, max_length=500)


class RunCancelOut(BaseModel):
    """``POST /api/runs/{id}/cancel``: the run after the request (``cancelled``, or still ``running`` with
    ``cancel_requested_at`` set while its process finishes the stages it holds) and a one-line message."""

    run: RunOut
    message: str


class SyncOut(BaseModel):
    """``POST /api/actions/sync``: the sync run started (it hands off to an insertion run when the scan
    brings something new and ``pipeline.auto_insert_after_sync`` is on; ``insertion_run_id`` once it has)."""

    run: RunOut
    message: str


# --- configuration -----------------------------------------------------------------------------


class ConfigUpdate(BaseModel):
    """``PUT /api/config``: a partial update (dotted field → new value) based on ``version``."""

    model_config = ConfigDict(extra="forbid")
    changes: dict[str, Any] = Field(min_length=1, description='e.g. {"pipeline.max_file_mb": 64}')
    version: str | None = Field(default=None, description="the version read (or send If-Match)")


class ConfigSaved(BaseModel):
    """What a ``PUT /api/config`` did (or, with ``dry_run``, would do): the new version, the fields that
    really changed, and whether a run is required for the change to take effect (with the reasons)."""

    version: str
    changed: list[str]
    requires_run: bool
    reasons: list[str]
    dry_run: bool


# --- re-run preview, catalog, costs ---------------------------------------------------------------


class SpendOut(BaseModel):
    """Spend of one group (stage, model or matter)."""

    key: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost_usd: float
    unpriced_calls: int
    documents: int


class CostsOut(BaseModel):
    """``GET /api/costs``: realized spend in ``[since, until)`` per stage, per model and per matter."""

    since: datetime | None
    until: datetime | None
    total_usd: float
    by_stage: list[SpendOut]
    by_model: list[SpendOut]
    by_matter: list[SpendOut]


# --- quarantine --------------------------------------------------------------------------------


class QuarantineItem(BaseModel):
    """One quarantined row: path, stage, attempts and the error object (no traceback in lists)."""

    source_object_id: int
    path: str
    stage: str
    name: str
    attempts: int
    error: dict[str, Any]
    deterministic: bool
    updated_at: datetime


class QuarantinePage(BaseModel):
    """``GET /api/quarantine``: newest first, filtered, paged; ``facets`` count rows per stage,
    reason and error class (for the filter menus)."""

    items: list[QuarantineItem]
    total: int
    limit: int
    offset: int
    facets: dict[str, dict[str, int]]
    hidden: int = Field(0, description="rows of this page left out: the token's principal may not see them")


class StageRowOut(BaseModel):
    """One stage row of an object, with the whole error object (class, reason, message, traceback
    tail, deterministic) and its attempts."""

    stage: str
    name: str
    status: str
    bucket: str
    attempts: int
    max_attempts: int
    producer_version: str | None
    error: dict[str, Any] | None
    next_retry_at: datetime | None
    updated_at: datetime


class QuarantineDetail(BaseModel):
    """``GET /api/quarantine/{source_object_id}``: the object and every stage row of it."""

    source_object_id: int
    path: str
    quarantined_stages: list[str]
    stages: list[StageRowOut]


class RetryOut(RetryResponse):
    """``POST /api/quarantine/{id}/retry`` (spec "Retry from quarantine"): the released stage, the
    invalidated stages, max_attempts, the previous error, whether it was deterministic (with the
    warning the console shows), and the run started for it."""

    warning: str | None
    run: RunOut | None
    follow_up: bool


# --- tokens, audit, health ---------------------------------------------------------------------


class TokenOut(BaseModel):
    """A token as listed: never the token or its hash."""

    id: int
    name: str
    prefix: str
    scopes: list[str]
    principal: str | None
    created_by: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class TokenCreate(BaseModel):
    """``POST /api/tokens`` (scope ``admin``)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=100)
    scopes: list[str] = Field(min_length=1)
    principal: str | None = Field(default=None, max_length=500)


class TokenCreated(BaseModel):
    """The new token, shown once."""

    id: int
    token: str
    name: str
    scopes: list[str]


AuditOut = AuditEntry


class AuditPage(BaseModel):
    """``GET /api/audit``: newest first; ``hidden``: entries of this page about files the token's principal
    may not see, left out."""

    entries: list[AuditOut]
    total: int
    limit: int
    offset: int
    hidden: int = 0


class ComponentHealth(BaseModel):
    """One component: ``ok``, ``warning`` or ``error`` with the error text (never a path or URL)."""

    name: str
    status: Literal["ok", "warning", "error"]
    detail: str | None = None


class HealthOut(BaseModel):
    """``GET /healthz``: the worst component status and each configured component."""

    status: Literal["ok", "warning", "error"]
    components: list[ComponentHealth]


class WhoAmI(BaseModel):
    """``GET /api/session``: the token a request authenticated with."""

    name: str
    scopes: list[str]
    principal: str | None
    via: Literal["bearer", "cookie"]
