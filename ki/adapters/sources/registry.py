"""Registering, finding and removing sources as the operator asks (``ki insert``, ``ki source ...``).

A folder that does not exist, is a file or cannot be read is
refused before any row is written; so is a folder inside (or around) an existing source, which would
otherwise become a second source processing the same files again. ``ki source remove`` tombstones
every document of a source (rows and history kept; ``source.removed_at``); inserting its folder again
restores it.

Watcher state hook (for ``ki watch``): a callable appended to :data:`WATCHER_STATE`
``(conn, source_ids) -> {source_id: "watching since 10:02" | ...}`` adds its text to ``ki source list``
(column ``watcher``, JSON key ``watcher``); with none registered the column says nothing. The folder
watcher's health rows (:func:`ki.store.watch.watcher_summaries`) are registered here.

:func:`watchable_sources` gives ``ki watch`` its sources with their configuration (``watch_mode``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from sqlalchemy.engine import Connection

from ki.core.errors import KiError
from ki.domain.context import PipelineContext
from ki.store.sources import (
    SourceRow,
    live_top_objects,
    mark_removed,
    overlapping_sources,
    restore_source,
    set_source_config_key,
    source_by_id,
    source_by_root,
)
from ki.store.watch import source_configs, watcher_summaries

#: Providers of watcher state for ``ki source list`` (module docstring).
WATCHER_STATE: list[Callable[[Connection, Sequence[int]], Mapping[int, str]]] = [watcher_summaries]


class SourceRefused(KiError):
    """A source operation refused before anything was written (the message says why and what to do)."""


def watcher_states(conn: Connection, source_ids: Sequence[int]) -> dict[int, str]:
    """Watcher state per source id from every :data:`WATCHER_STATE` provider (later ones win)."""
    states: dict[int, str] = {}
    for provider in WATCHER_STATE:
        states.update(provider(conn, source_ids))
    return states


def check_new_local_root(conn: Connection, root: Path) -> None:
    """Refuse ``root`` (absolute, resolved) as a new local-folder source.

    Raises:
        SourceRefused: it does not exist, is not a folder, cannot be listed, or lies inside (or
            contains) an existing source.
    """
    if not root.exists():
        raise SourceRefused(f"no such folder: {root} (nothing was registered)")
    if not root.is_dir():
        kind = "a file" if root.is_file() else "not a folder"
        raise SourceRefused(f"{root} is {kind}: ki insert takes a folder (nothing was registered)")
    try:
        with os.scandir(root) as entries:
            next(entries, None)
    except OSError as exc:
        raise SourceRefused(f"{root} cannot be read ({exc.strerror or exc}); nothing was registered") from exc
    for other in overlapping_sources(conn, "local", str(root)):
        if str(root).startswith(other.root.rstrip("/") + "/"):
            raise SourceRefused(
                f"{root} is inside source {other.id} ({other.root}), which already covers its files; "
                f"run `ki insert {other.root}` or `ki source rescan {other.id}` instead (nothing was registered)")
        raise SourceRefused(
            f"{root} contains source {other.id} ({other.root}): its files would be processed twice; "
            f"remove it first with `ki source remove {other.id}` (nothing was registered)")


def add_local_source(ctx: PipelineContext, root: Path, *, permissions: str | None = None) -> tuple[int, bool]:
    """The local-folder source for ``root``: the existing one (restored if it was removed), or a new
    one after :func:`check_new_local_root`. Returns (source id, True when it was restored).

    ``permissions``: set the source's permission model (``share``: read from the files, the default of a
    new source; ``public``: every principal sees every document); None keeps what the source has.

    Raises:
        SourceRefused: see :func:`check_new_local_root`.
    """
    from ki.adapters.sources.scan import register_local_source

    root = root.expanduser().resolve()
    with ctx.db.engine.begin() as conn:
        known = source_by_root(conn, "local", str(root))
        if known is not None:
            if permissions is not None:
                set_source_config_key(conn, known.id, "permissions", permissions)
            return known.id, restore_source(conn, known.id)
        check_new_local_root(conn, root)
    return register_local_source(ctx, root, config={"permissions": permissions or "share"}), False


def resolve_source(conn: Connection, ref: str) -> SourceRow:
    """The source ``ref`` names: its id, or the folder it was registered for (removed ones too).

    Raises:
        SourceRefused: no source has that id or folder.
    """
    if ref.isdigit():
        found = source_by_id(conn, int(ref))
    else:
        found = source_by_root(conn, "local", str(Path(ref).expanduser().resolve()))
    if found is None:
        raise SourceRefused(f"no such source: {ref} (`ki source list` shows the sources)")
    return found


def remove_source(ctx: PipelineContext, source_id: int) -> int:
    """Tombstone every document of the source and mark it removed, in one transaction; their search
    copies are dropped. History (rows, runs, audit) is kept. Returns the tombstoned object count,
    embedded documents included."""
    from ki.adapters.sources.scan import _drop_from_search_index, tombstone_tree

    gone: list[int] = []
    with ctx.db.engine.begin() as conn:
        for oid in live_top_objects(conn, source_id):
            gone += tombstone_tree(conn, oid)
        mark_removed(conn, source_id)
    _drop_from_search_index(ctx, gone)
    return len(gone)


def named_sources(ctx: PipelineContext, refs: Sequence[str]) -> list[tuple[int, str]]:
    """``(id, root)`` of the live sources ``refs`` name (ids or folders; a folder not yet registered is
    added, see :func:`add_local_source`), in order (``ki sync``, ``ki watch``).

    Raises:
        SourceRefused: a ref names no source and is no folder that can be added, or a removed source.
    """
    out: list[tuple[int, str]] = []
    for ref in refs:
        with ctx.db.engine.connect() as conn:
            try:
                src = resolve_source(conn, ref)
            except SourceRefused:
                if ref.isdigit():
                    raise
                src = None
        if src is None:
            out.append((add_local_source(ctx, Path(ref))[0], str(Path(ref).expanduser().resolve())))
        elif src.removed_at is not None:
            raise SourceRefused(f"source {src.id} ({src.root}) was removed; `ki insert {src.root}` restores it")
        else:
            out.append((src.id, src.root))
    return out


def watchable_sources(ctx: PipelineContext, refs: Sequence[str] | None = None) -> list[tuple[int, str, dict]]:
    """``(id, root, config)`` of the live local-folder sources ``refs`` name (see :func:`named_sources`), or
    of every live local-folder source.

    Raises:
        SourceRefused: see :func:`named_sources`.
    """
    if refs:
        ids = [sid for sid, _ in named_sources(ctx, refs)]
    else:
        from ki.store.sources import list_sources

        with ctx.db.engine.connect() as conn:
            ids = [s.id for s in list_sources(conn) if s.kind == "local"]
    with ctx.db.engine.connect() as conn:
        return source_configs(conn, ids)
