"""Access-only re-index: the ``access_only_reindex`` marker and the scan's comparison of grants.

Spec: insertion-pipeline.md "Index" (a sync that sees only an ACL change marks the index row
``access_only_reindex``; the index stage then rewrites only the permission fields). The scan calls
:func:`mark_access_changes` after it applied a listing; the index stage reads the marker with
``ki.core.taxonomies.has_access_only_marker`` (the marker's one home).
"""

from __future__ import annotations

import logging

from sqlalchemy.engine import Connection

from ki.core.errors import AclReadError
from ki.domain.access.load import load_source_access
from ki.domain.access.projection import AccessProjection
from ki.store.requeue import indexed_access, mark_access_only_reindex

log = logging.getLogger(__name__)



def mark_access_changes(conn: Connection, source_id: int) -> list[int]:
    """Compare every indexed object's chunk projection with its current grants; mark the changed ones.

    Called by the scan after it applied the listing (objects whose bytes changed were already
    requeued from fetch, so their index rows are no longer ``done``). An object whose grants
    cannot be read is marked too: its access-only re-index then fails as an infrastructure fault
    and retries, while its chunks keep their previous projection.

    Returns: the ids of the objects marked ``access_only_reindex``.
    """
    rows = indexed_access(conn, source_id)
    if not rows:
        return []
    try:
        access = load_source_access(conn, source_id, [r.id for r in rows])
    except AclReadError as exc:
        log.warning("grants of source %s unreadable (%s): every indexed object is marked for an access refresh",
                    source_id, exc)
        changed = [r.id for r in rows]
    else:
        changed = []
        for r in rows:
            try:
                current = access.projection(r.id)
            except AclReadError as exc:
                log.warning("grants of object %s unreadable: %s", r.id, exc)
                changed.append(r.id)
                continue
            stored = AccessProjection(tuple(sorted(r.allowed_principals or [])),
                                      tuple(sorted(r.denied_principals or [])))
            if current != stored:
                changed.append(r.id)
    return mark_access_only_reindex(conn, changed)
