"""Stage ``fetch``: read the object's bytes into the content-addressed store.

Spec: insertion-pipeline.md "Fetch". Writes a Blob row keyed by content hash and
sets ``source_object.content_hash``. A missing or unreadable source root is an
outage (SourceUnavailable, never quarantined); a single missing file under a
present root is FileNotFoundError (deterministic).
"""

from __future__ import annotations

from ki.adapters.sources import open_source
from ki.domain.context import StageContext, StageOutcome
from ki.store.objects import record_blob, set_content


def handle(ctx: StageContext) -> StageOutcome:
    """Stream the file into the blob store (≤ ``pipeline.max_file_mb``) and record its hash.

    Raises (see ``LocalFolderConnector.fetch``; every I/O failure is diagnosed there):
        SourceUnavailable: the source root or the file's folder is missing or unreadable.
        SourceReadDenied / SourceReadFailed: the file cannot be read (permissions, I/O): outages.
        FileNotFoundError: the file is gone while its folder is present.
        ArtifactTooLarge: the stream exceeds the limit.
    """
    if ctx.obj.parent_id is not None:  # an attachment or an mbox message: bytes come from its container
        from ki.adapters.sources.children import fetch_child

        content_hash, size = fetch_child(ctx.pipeline, ctx.obj)
    else:
        connector = open_source(ctx.obj.source_kind, ctx.obj.source_root, ctx.obj.source_config)
        max_bytes = ctx.config.pipeline.max_file_mb * (1 << 20)
        with connector.fetch(ctx.obj.external_id, ctx.obj.external_id_raw) as stream:
            content_hash, size = ctx.pipeline.blobs.put_stream(stream, max_bytes=max_bytes)
    with ctx.pipeline.db.engine.begin() as conn:
        record_blob(conn, content_hash, size)
        set_content(conn, ctx.obj.id, content_hash, size)
    return StageOutcome(status="done", details={"content_hash": content_hash, "bytes": size})
