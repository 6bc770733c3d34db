"""Stage ``convert`` (console: Parse): bytes → one ``structured_json`` artifact per content hash.

Spec: insertion-pipeline.md "Parse (convert)" and "Failure modes". An existing
artifact for the content hash makes the stage a no-op; identical bytes arriving
as several files are converted once (a per-hash advisory lock serialises the
converters of the same content; the second finds the artifact). A container
(mail, mbox, DOCX/PPTX/XLSX, PDF: ``ki.adapters.convert.embedded.CONTAINER_FORMATS``) registers its
attachments, messages or embedded documents as child objects, each converted and indexed as a
document of its own, linked by ``parent_id``.
"""

from __future__ import annotations

from pathlib import PurePath

from ki.adapters.convert.embedded import CONTAINER_FORMATS, extract_embedded, may_embed
from ki.adapters.convert.router import convert_bytes
from ki.adapters.sources.children import register_children
from ki.core.errors import RetryableStageError
from ki.domain.context import StageContext, StageOutcome
from ki.store.artifacts import STRUCTURED_JSON, get_artifact, put_artifact
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
    filename = PurePath(ctx.obj.path).name
    with db.engine.connect() as conn:
        body = get_artifact(conn, content_hash, STRUCTURED_JSON)
    if body is None:
        with session_advisory_lock(db, "convert", content_hash):
            with db.engine.connect() as conn:
                body = get_artifact(conn, content_hash, STRUCTURED_JSON)
            if body is None:
                data = ctx.pipeline.blobs.read(content_hash)
                doc = convert_bytes(data, filename, ctx.config, renew=ctx.renew)
                body = doc.model_dump(mode="json")
                with db.engine.begin() as conn:
                    put_artifact(conn, content_hash, STRUCTURED_JSON, producer=doc.converter,
                                 producer_version=doc.converter_version, body=body)
    details = {}
    if body.get("format") in CONTAINER_FORMATS:
        # Every object holding this content gets its own children (its own permissions).
        parts = extract_embedded(body["format"], ctx.pipeline.blobs.read(content_hash), filename) \
            if may_embed(body, ctx.obj.path) else []
        if parts or ctx.obj.parent_id is None:
            details["embedded"] = register_children(ctx.pipeline, ctx.obj, parts)
    return StageOutcome(status="done", details=details)
