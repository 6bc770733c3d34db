"""Stage ``convert`` (console: Parse): bytes → one ``structured_json`` artifact per content hash.

Spec: insertion-pipeline.md "Parse (convert)" and "Failure modes". An existing
artifact for the content hash makes the stage a no-op; identical bytes arriving
as several files are converted once (a per-hash advisory lock serialises the
converters of the same content; the second finds the artifact).
"""

from __future__ import annotations

from pathlib import PurePath

from ki.convert.router import convert_bytes
from ki.errors import RetryableStageError
from ki.orchestration.context import StageContext, StageOutcome
from ki.store.artifacts import STRUCTURED_JSON, artifact_exists, put_artifact
from ki.store.locks import session_advisory_lock


def handle(ctx: StageContext) -> StageOutcome:
    """Convert the fetched blob unless its artifact exists.

    Raises:
        RetryableStageError: fetch has not recorded a content hash yet.
        UnsupportedDocument: the converter refuses the file (quarantine with its reason).
    """
    content_hash = ctx.obj.content_hash
    if not content_hash:
        raise RetryableStageError("no content hash recorded: fetch has not completed for this object")
    db = ctx.pipeline.db
    with db.engine.connect() as conn:
        if artifact_exists(conn, content_hash, STRUCTURED_JSON):
            return StageOutcome(status="done", details={"reused": True})
    with session_advisory_lock(db, "convert", content_hash):
        with db.engine.connect() as conn:
            if artifact_exists(conn, content_hash, STRUCTURED_JSON):
                return StageOutcome(status="done", details={"reused": True})
        data = ctx.pipeline.blobs.read(content_hash)
        doc = convert_bytes(data, PurePath(ctx.obj.path).name, ctx.config)
        with db.engine.begin() as conn:
            put_artifact(
                conn,
                content_hash,
                STRUCTURED_JSON,
                producer=doc.converter,
                producer_version=doc.converter_version,
                body=doc.model_dump(mode="json"),
            )
    return StageOutcome(status="done")
