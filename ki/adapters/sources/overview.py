"""What each source is, in one record: its folder, permission model, files and who sees them.

The one shape behind ``ki source list --json`` and ``GET /api/sources`` (the console's "Sources" panel):
``id``, ``kind``, ``path``, ``permissions`` (``share``, ``configured`` or ``public``: see README
"Permissions"), ``files``, ``documents``, ``missing``, ``unreadable`` (waiting: the share will not let ki
read them), ``quarantined``, ``last_scan_at`` / ``last_run`` (ISO 8601 UTC), ``watcher`` (its state, or
None) and, with ``open_counts``, ``indexed`` and ``open_to_everyone`` (indexed live documents every
principal may see, from the permission projection their chunks carry).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection


def source_overview(conn: Connection, *, open_counts: bool = False) -> list[dict[str, Any]]:
    """One record per live source, by id (module doc). Cost: one query for all sources, plus one
    ``chunk`` aggregate per source with ``open_counts`` (it reads every chunk of the source)."""
    from ki.adapters.sources.registry import watcher_states
    from ki.domain.access.share_permissions import permission_model
    from ki.store.sources import list_sources, open_documents, source_configs
    from ki.store.unreadable import unreadable_counts

    rows = list_sources(conn)
    ids = [r.id for r in rows]
    watchers = watcher_states(conn, ids)
    unreadable = unreadable_counts(conn)
    configs = source_configs(conn, ids)
    out = []
    for r in rows:
        record: dict[str, Any] = {
            "id": r.id, "kind": r.kind, "path": r.root, "permissions": permission_model(configs.get(r.id, {})),
            "files": r.files, "documents": r.documents, "missing": r.missing, "unreadable": unreadable.get(r.id, 0),
            "quarantined": r.quarantined, "last_scan_at": r.last_scan_at.isoformat() if r.last_scan_at else None,
            "last_run": ({"id": r.last_run_id, "status": r.last_run_status,
                          "finished_at": r.last_run_finished_at.isoformat() if r.last_run_finished_at else None}
                         if r.last_run_id else None),
            "watcher": watchers.get(r.id)}
        if open_counts:
            record["open_to_everyone"], record["indexed"] = open_documents(conn, r.id)
        out.append(record)
    return out
