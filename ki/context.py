"""What a stage handler is given and what it returns.

Spec: DESIGN.md "The one rule", "Layout" (``ki/context.py``) and ``ki/stages/`` ("each a handler
``(ctx) -> StageOutcome``").
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field
from sqlalchemy import text

from ki.config.loader import ProcessSettings, load_config
from ki.config.settings import KiConfig
from ki.store.blobs import BlobStore
from ki.store.claims import OBJECT_COLUMNS, Claim
from ki.store.db import Database


@dataclass
class PipelineContext:
    """Process-wide handles every stage execution shares.

    Attributes:
        db: the database.
        blobs: the content-addressed store under ``<data_dir>/blobs``.
        config: the effective configuration (reloaded at each run start).
        settings: process-level settings.
        worker_id: ``host:pid`` (recorded on claims).
    """

    db: Database
    blobs: BlobStore
    config: KiConfig
    settings: ProcessSettings
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")

    @classmethod
    def open(cls, settings: ProcessSettings | None = None, db: Database | None = None) -> PipelineContext:
        """Open the database (embedded or ``KI_DATABASE_URL``), the blob store and the configuration."""
        from ki.store.db import connect

        settings = settings or ProcessSettings()
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        db = db or connect(settings)
        return cls(
            db=db,
            blobs=BlobStore(settings.data_dir / "blobs"),
            config=load_config(settings.data_dir),
            settings=settings,
        )

    def reload_config(self) -> None:
        """Re-read the saved configuration and environment pins."""
        self.config = load_config(self.settings.data_dir)


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

    @classmethod
    def load(cls, db: Database, source_object_id: int) -> SourceObjectView:
        """Read the object; raises LookupError when it does not exist."""
        with db.engine.connect() as conn:
            row = conn.execute(
                text(f"SELECT {OBJECT_COLUMNS} FROM source_object so JOIN source s ON s.id = so.source_id "
                     "WHERE so.id = :id"),
                {"id": source_object_id},
            ).first()
        if row is None:
            raise LookupError(f"source_object {source_object_id} does not exist")
        return cls(*row)

    @classmethod
    def for_claim(cls, db: Database, claim: Claim) -> SourceObjectView:
        """The claimed row's object: from the claim when its statement returned it, else read."""
        return cls(*claim.object_row) if claim.object_row is not None else cls.load(db, claim.source_object_id)


@dataclass
class StageContext:
    """One stage execution: the claim, the object, and the shared handles."""

    pipeline: PipelineContext
    claim: Claim
    obj: SourceObjectView

    @property
    def stage(self) -> str:
        return self.claim.stage

    @property
    def config(self) -> KiConfig:
        return self.pipeline.config

    def renew(self) -> bool:
        """Renew the claim now (long stages call this between steps). False when the claim is lost."""
        from ki.store.claims import renew_claim

        with self.pipeline.db.engine.begin() as conn:
            return renew_claim(conn, self.claim)


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
