"""Stage ``index``: chunk the accepted text and write it to the search backend.

Spec: insertion-pipeline.md "Index". In this release: chunking by
``retrieval.chunk_chars`` / ``chunk_overlap_chars``, PostgreSQL full text (German
and English), chunks diffed by ordinal, and the permission projection from the
source's configured principals (``allowed_principals``, default ``["*"]``).
"""

from __future__ import annotations

from pathlib import PurePath

from ki.errors import RetryableStageError
from ki.index.chunking import chunk_text
from ki.index.postgres import write_chunks
from ki.orchestration.context import StageContext, StageOutcome
from ki.store.artifacts import STRUCTURED_JSON, get_artifact


def handle(ctx: StageContext) -> StageOutcome:
    """Write the object's chunks; a document without text is skipped (``no_text``).

    Raises:
        RetryableStageError: the structured_json artifact is missing (convert did not run).
    """
    content_hash = ctx.obj.content_hash
    db = ctx.pipeline.db
    with db.engine.connect() as conn:
        body = get_artifact(conn, content_hash, STRUCTURED_JSON) if content_hash else None
    if body is None:
        raise RetryableStageError("no structured_json artifact for this content: convert has not completed")
    retrieval = ctx.config.retrieval
    chunks = chunk_text(body.get("text") or "", chunk_chars=retrieval.chunk_chars,
                        overlap_chars=retrieval.chunk_overlap_chars)
    title = body.get("title") or PurePath(ctx.obj.path).stem
    allowed = list(ctx.obj.source_config.get("allowed_principals") or ["*"])
    denied = list(ctx.obj.source_config.get("denied_principals") or [])
    with db.engine.begin() as conn:
        n = write_chunks(conn, source_object_id=ctx.obj.id, content_hash=content_hash, title=title,
                         chunks=chunks, allowed=allowed, denied=denied)
    if n == 0:
        return StageOutcome(status="skipped", reason="no_text")
    return StageOutcome(status="done", details={"chunks": n})
