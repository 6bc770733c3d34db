"""What a stage handler is given and what it returns.

Spec: DESIGN.md "The one rule", "Layout" (``ki/domain/context.py``) and ``ki/stages/`` ("each a handler
``(ctx) -> StageOutcome``").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from ki.config.loader import ProcessSettings, load_config
from ki.config.settings import KiConfig, PipelineConfig
from ki.core.errors import RetryableStageError
from ki.core.liveness import this_worker
from ki.core.taxonomies import PIPELINE_STAGE_ORDER, STAGE_INPUTS
from ki.store.artifacts import STRUCTURED_JSON, get_artifact
from ki.store.blobs import BlobStore
from ki.store.claims import Claim, UnlockPlan, renew_claim
from ki.store.db import Database
from ki.store.objects import object_row

if TYPE_CHECKING:
    from ki.adapters.convert.model import StructuredDocument

#: ``ensure_ready(oid) -> (status, detail)``: see :meth:`StageContext.ensure_ready`.
EnsureReady = Callable[[int], tuple[str, str]]


def unlock_plan(pipeline: PipelineConfig, stage: str) -> UnlockPlan:
    """``_unlock_next`` for the configuration: the switched-off stages right after ``stage`` (each
    with its producer_version, recorded ``disabled_by_configuration`` on the way) and the first
    enabled stage after them (None when none is left).

    Spec: insertion-pipeline.md "Processing states and console buckets" (_unlock_next) and
    "Configuration" (disabled stages park as ``disabled_by_configuration``). Raises KeyError for an
    unknown stage."""
    skip: list[tuple[str, str]] = []
    for later in PIPELINE_STAGE_ORDER[PIPELINE_STAGE_ORDER.index(stage) + 1:]:
        if pipeline.stage(later).enabled:
            return UnlockPlan(tuple(skip), later)
        skip.append((later, pipeline.producer_version(later)))
    return UnlockPlan(tuple(skip), None)


@dataclass(frozen=True)
class StagePlan:
    """What the executor needs of one stage under one configuration, computed once per load.

    Attributes:
        stage: the stage id.
        enabled: ``pipeline.stages.<stage>.enabled``.
        max_attempts: the stage's attempt budget.
        timeout_seconds: the deadline of one attempt (``pipeline.stages.<stage>.timeout_seconds``, s).
        producer_version: the effective ``producer_version`` recorded on completion.
        disabled_inputs: stages whose output this one needs (``STAGE_INPUTS``) that are switched off.
        unlock: what a completion opens (:func:`unlock_plan`).
    """

    stage: str
    enabled: bool
    max_attempts: int
    producer_version: str
    disabled_inputs: tuple[str, ...]
    unlock: UnlockPlan
    timeout_seconds: float = 300.0


def stage_plans(pipeline: PipelineConfig) -> dict[str, StagePlan]:
    """The :class:`StagePlan` of every stage of ``PIPELINE_STAGE_ORDER`` for ``pipeline``."""
    return {
        s: StagePlan(
            stage=s,
            enabled=pipeline.stage(s).enabled,
            max_attempts=pipeline.stage(s).max_attempts,
            producer_version=pipeline.producer_version(s),
            disabled_inputs=tuple(i for i in STAGE_INPUTS[s] if not pipeline.stage(i).enabled),
            unlock=unlock_plan(pipeline, s),
            timeout_seconds=float(pipeline.timeout_seconds(s)),
        )
        for s in PIPELINE_STAGE_ORDER
    }


@dataclass
class PipelineContext:
    """Process-wide handles every stage execution shares.

    Attributes:
        db: the database.
        blobs: the content-addressed store under ``<data_dir>/blobs``.
        config: the effective configuration (reloaded at each run start).
        settings: process-level settings.
        worker_id: ``host:pid:start`` (recorded on claims; ``ki.core.liveness``).
    """

    db: Database
    blobs: BlobStore
    config: KiConfig
    settings: ProcessSettings
    worker_id: str = field(default_factory=this_worker)
    _plans: tuple[KiConfig, dict[str, StagePlan]] | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def open(cls, settings: ProcessSettings | None = None, db: Database | None = None) -> PipelineContext:
        """Open the database (embedded or ``KI_DATABASE_URL``), the blob store and the configuration."""
        from ki.store.config_journal import replay_pending
        from ki.store.db import connect

        settings = settings or ProcessSettings()
        if not settings.data_dir.is_dir():
            settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # private to ki's user
        db = db or connect(settings)
        replay_pending(settings.data_dir, db.engine)  # a configuration edit a killed process left half done
        return cls(
            db=db,
            blobs=BlobStore(settings.data_dir / "blobs"),
            config=load_config(settings.data_dir),
            settings=settings,
        )

    def reload_config(self) -> None:
        """Re-read the saved configuration and environment pins."""
        self.config = load_config(self.settings.data_dir)

    def plan(self, stage: str) -> StagePlan:
        """The :class:`StagePlan` of ``stage`` under the current configuration (computed once per
        configuration object: a reload computes it afresh). Raises KeyError for an unknown stage."""
        cached = self._plans
        if cached is None or cached[0] is not self.config:
            cached = self._plans = (self.config, stage_plans(self.config.pipeline))
        return cached[1][stage]


@dataclass(frozen=True)
class SourceObjectView:
    """The source object a stage runs for, with its source's root and kind."""

    id: int
    source_id: int
    source_kind: str
    source_root: str
    external_id: str
    path: str
    size: int | None
    mtime_ns: int | None
    content_hash: str | None
    deleted_at: datetime | None
    source_config: dict[str, Any]
    parent_id: int | None = None
    embedded_index: int | None = None
    scanned_hash: str | None = None
    #: the name's bytes when it is not valid UTF-8 (``ki.adapters.sources.names``), else None
    external_id_raw: bytes | None = None

    def __post_init__(self) -> None:
        if isinstance(self.external_id_raw, memoryview):  # psycopg returns bytea as memoryview
            object.__setattr__(self, "external_id_raw", bytes(self.external_id_raw))

    @classmethod
    def load(cls, db: Database, source_object_id: int) -> SourceObjectView:
        """Read the object; raises LookupError when it does not exist."""
        with db.engine.connect() as conn:
            row = object_row(conn, source_object_id)
        if row is None:
            raise LookupError(f"source_object {source_object_id} does not exist")
        return cls(*row)

    @classmethod
    def for_claim(cls, db: Database, claim: Claim) -> SourceObjectView:
        """The claimed row's object: from the claim when its statement returned it, else read."""
        return cls(*claim.object_row) if claim.object_row is not None else cls.load(db, claim.source_object_id)


@dataclass
class StageContext:
    """One stage execution: the claim, the object, and the shared handles.

    Attributes:
        pipeline / claim / obj: the shared handles, the claimed row, its object.
        ready: how :meth:`ensure_ready` pulls another object forward; the executor supplies it
            (``ki.orchestration.execute``), so a stage never imports the executor.
    """

    pipeline: PipelineContext
    claim: Claim
    obj: SourceObjectView
    ready: EnsureReady | None = field(default=None, repr=False)
    _body: dict[str, Any] | None = field(default=None, init=False, repr=False)

    @property
    def stage(self) -> str:
        return self.claim.stage

    @property
    def config(self) -> KiConfig:
        return self.pipeline.config

    def renew(self) -> bool:
        """Renew the claim now (long stages call this between steps). False when the claim is lost."""
        with self.pipeline.db.engine.begin() as conn:
            return renew_claim(conn, self.claim)

    def structured_json(self) -> dict[str, Any]:
        """The ``structured_json`` artifact of the object's content, as stored (read once per execution).

        Raises: RetryableStageError when convert has not produced it yet (no content hash, or no
        artifact for it): the stage is retried, never quarantined for it.
        """
        if self._body is None:
            content_hash = self.obj.content_hash
            body = None
            if content_hash:
                with self.pipeline.db.engine.connect() as conn:
                    body = get_artifact(conn, content_hash, STRUCTURED_JSON)
            if body is None:
                raise RetryableStageError("no structured_json artifact for this content: convert has not completed")
            self._body = body
        return self._body

    def structured(self) -> StructuredDocument:
        """The converted document, typed (:class:`ki.adapters.convert.model.StructuredDocument`).

        Raises: RetryableStageError as :meth:`structured_json`.
        """
        from ki.adapters.convert.model import StructuredDocument

        return StructuredDocument.model_validate(self.structured_json())

    def ensure_ready(self, source_object_id: int) -> tuple[str, str]:
        """Pull another object's fetch and convert forward through its own rows (inline conversion).

        Returns ``(status, detail)`` as ``ki.domain.relate.inline_conversion.ensure_source_object_ready``:
        ``ok``, ``busy``, ``in_progress``, ``quarantined``, ``failed``, ``deleted``, ``not_found``.
        Raises: RuntimeError when this context was built without an executor (``ready`` unset).
        Spec: insertion-pipeline.md "Relate: what the model is given" (open_file).
        """
        if self.ready is None:
            raise RuntimeError("this stage context has no executor to pull objects forward")
        return self.ready(source_object_id)


class StageOutcome(BaseModel):
    """A handler's verdict.

    Attributes:
        status: ``done`` (the next stage is unlocked) or ``skipped`` with a handler ``reason``.
        reason: skip reason (e.g. ``no_revision_evidence``, ``source_object_deleted``).
        halt_downstream: skip every later stage with the same reason instead of unlocking.
        details: small JSON facts kept in ``last_error`` of a skipped row (or discarded for done).
    """

    status: Literal["done", "skipped"] = "done"
    reason: str | None = None
    halt_downstream: bool = False
    details: dict[str, Any] = Field(default_factory=dict)
