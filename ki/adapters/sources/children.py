"""Registering embedded objects (attachments, mbox messages) as child source objects.

A child lives in its container's source (same permissions), has ``parent_id`` and
``embedded_index``, and an ``external_id`` of ``<parent external id>#<index>/<name>``.
Its bytes are stored in the blob store at registration (``scanned_hash``); its own
fetch stage then only confirms them, or re-extracts them from the parent's blob.
Reconciliation is idempotent: a re-converted container keeps unchanged children,
requeues changed ones from fetch and tombstones those that are gone.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from ki.adapters.convert.embedded import NESTING_SEP, EmbeddedPart, extract_embedded
from ki.core.errors import ArtifactTooLarge, UnsupportedDocument
from ki.core.taxonomies import LANE_BACKFILL
from ki.domain.context import PipelineContext, SourceObjectView
from ki.store.chunk_rows import delete_object_chunks
from ki.store.lanes import lane_of
from ki.store.object_tree import child_rows, insert_child, refresh_child, tombstone_rows
from ki.store.objects import record_blob
from ki.store.requeue import requeue_from_fetch, seed_rows

SEP = NESTING_SEP


def child_external_id(parent_external_id: str, part: EmbeddedPart) -> str:
    """``<parent>#<index>/<name>``: stable for the same container content."""
    return f"{parent_external_id}#{part.index}/{part.name}"


def register_children(ctx: PipelineContext, parent: SourceObjectView, parts: list[EmbeddedPart]) -> dict[str, int]:
    """Store the parts' bytes and reconcile the parent's child objects with them.

    Returns counts: ``new``, ``changed``, ``unchanged``, ``removed``. A part over
    ``pipeline.max_file_mb`` is registered without bytes; its fetch quarantines it
    (ArtifactTooLarge), as for any file.
    """
    max_bytes = ctx.config.pipeline.max_file_mb * (1 << 20)
    stored: dict[int, tuple[str | None, int]] = {}
    for part in parts:
        try:
            stored[part.index] = ctx.blobs.put_bytes(part.data, max_bytes=max_bytes)
        except ArtifactTooLarge:
            stored[part.index] = (None, len(part.data))
    counts = {"new": 0, "changed": 0, "unchanged": 0, "removed": 0}
    with ctx.db.engine.begin() as conn:
        existing = {r.external_id: r for r in child_rows(conn, parent.id)}
        for h, size in stored.values():
            if h is not None:
                record_blob(conn, h, size)
        wanted: set[str] = set()
        new_ids, requeue_ids = [], []
        for part in parts:
            eid = child_external_id(parent.external_id, part)
            wanted.add(eid)
            h, size = stored[part.index]
            row = existing.get(eid)
            if row is None:
                oid = insert_child(conn, source_id=parent.source_id, external_id=eid,
                                   path=f"{parent.path}{SEP}{part.name}", size=size, scanned_hash=h,
                                   parent_id=parent.id, embedded_index=part.index, mtime_ns=parent.mtime_ns)
                if oid is not None:
                    new_ids.append(oid)
                    counts["new"] += 1
            elif row.deleted_at is not None or row.scanned_hash != h or (row.content_hash and row.content_hash != h):
                refresh_child(conn, row.id, scanned_hash=h, size=size)
                requeue_ids.append(row.id)
                counts["changed"] += 1
            else:
                counts["unchanged"] += 1
        lane = lane_of(conn, parent.id, "convert") or LANE_BACKFILL  # a child is owed as its container is
        seed_rows(conn, new_ids, lane=lane)
        requeue_from_fetch(conn, requeue_ids, lane=lane)
        for eid, row in existing.items():
            if eid not in wanted and row.deleted_at is None:
                tombstone_tree(conn, row.id)
                counts["removed"] += 1
    return counts


def tombstone_tree(conn: Connection, source_object_id: int) -> list[int]:
    """Tombstone an object and every object embedded in it (recursively); drop their chunks."""
    ids = tombstone_rows(conn, source_object_id)
    for oid in ids:
        delete_object_chunks(conn, oid)
    return ids


def fetch_child(ctx: PipelineContext, obj: SourceObjectView) -> tuple[str, int]:
    """The bytes of an embedded object: the blob stored at registration, or re-extracted from the parent.

    Returns (content hash, size). Raises:
        FileNotFoundError: the part is no longer in its container (deterministic).
        ArtifactTooLarge: the part exceeds ``pipeline.max_file_mb``.
    """
    if obj.scanned_hash and ctx.blobs.exists(obj.scanned_hash):
        return obj.scanned_hash, int(obj.size or 0)
    parent = SourceObjectView.load(ctx.db, obj.parent_id)
    if not parent.content_hash:
        raise FileNotFoundError(f"container of {obj.path} has not been fetched")
    from pathlib import PurePath

    from ki.adapters.convert.router import sniff_format

    data = ctx.blobs.read(parent.content_hash)
    fmt = sniff_format(data, PurePath(parent.path).name)
    try:
        parts = extract_embedded(fmt, data, PurePath(parent.path).name)
    except UnsupportedDocument as exc:
        raise FileNotFoundError(f"container of {obj.path} can no longer be read: {exc}") from exc
    for part in parts:
        if part.index == obj.embedded_index:
            max_bytes = ctx.config.pipeline.max_file_mb * (1 << 20)
            return ctx.blobs.put_bytes(part.data, max_bytes=max_bytes)
    raise FileNotFoundError(f"{obj.path}: part {obj.embedded_index} is no longer in its container")
