"""``ki insert PATH`` as one sequence: register the folder, sync it, insert what the scan owes, say who sees it.

Spec: insertion-pipeline.md "Orchestration" (a sync run per source scan hands off to an insertion run) and
"Index" (the permission projection). The steps, in order:

1. :func:`ki.adapters.sources.registry.add_local_source` — the folder's local source: the one already
   registered (restored if it was removed), or a new one with the share's permissions unless ``public``;
2. :func:`ki.app.launch.launch_sync` with ``insert=True`` — one sync run: the scan (new, changed, moved and
   missing files), then the hand-off to an insertion run that runs every stage until idle, even when the scan
   found nothing new (it also finishes what an earlier run left owed);
3. :func:`permission_summary` — how many indexed documents every principal may see, and the source's model.

The face (``ki insert``) renders each step through the callbacks and the returned :class:`Inserted`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ki.adapters.sources.registry import add_local_source
from ki.app.launch import SyncSummary, launch_sync
from ki.domain.access.share_permissions import permission_model
from ki.domain.context import PipelineContext
from ki.store.sources import open_documents, source_configs


@dataclass(frozen=True)
class PermissionSummary:
    """The source's permission model (``share``, ``public`` or configured grants) and, of its indexed live
    documents, how many every principal may see (``opened``) of all (``indexed``)."""

    model: str
    opened: int
    indexed: int


@dataclass(frozen=True)
class Inserted:
    """What ``ki insert`` did: the source, whether it was restored, the sync run (with the insertion run it
    handed off to: ``sync.insertion``) and the source's :class:`PermissionSummary`."""

    source_id: int
    restored: bool
    sync: SyncSummary
    permissions: PermissionSummary


def insert_folder(ctx: PipelineContext, root: Path, *, public: bool | None = None, workers: int | None = None,
                  wait_for_retries_seconds: float | None = None,
                  on_registered: Callable[[int, bool], None] | None = None,
                  on_scanned: Callable[[Any], None] | None = None,
                  on_tick: Callable[[Any], None] | None = None) -> Inserted:
    """Insert the folder ``root`` (the steps of the module docstring).

    Args:
        public: True: every principal sees every document; False: read from the share; None: the source's
            model as it is (a new source reads the share).
        workers / wait_for_retries_seconds: the insertion run's pool size and retry wait (see launch_insertion).
        on_registered: called with (source id, restored) once the source exists; on_scanned / on_tick: the
            sync run's callbacks (the scan report; the insertion run's progress).
    Raises:
        SourceRefused: the folder cannot be a new source (missing, a file, inside another source): nothing
            is registered.
        SyncAlreadyRunning: another live process syncs the source.
    """
    source_id, restored = add_local_source(ctx, root, permissions=None if public is None
                                           else "public" if public else "share")
    if on_registered is not None:
        on_registered(source_id, restored)
    sync = launch_sync(ctx, source_id, trigger="cli", wait=True, insert=True, workers=workers,
                       wait_for_retries_seconds=wait_for_retries_seconds, on_scanned=on_scanned, on_tick=on_tick)
    return Inserted(source_id, restored, sync, permission_summary(ctx, source_id))


def permission_summary(ctx: PipelineContext, source_id: int) -> PermissionSummary:
    """The source's permission model and how many of its indexed documents are open to every principal."""
    with ctx.db.engine.connect() as conn:
        model = permission_model(source_configs(conn, [source_id]).get(source_id, {}))
        opened, indexed = open_documents(conn, source_id)
    return PermissionSummary(model, opened, indexed)
