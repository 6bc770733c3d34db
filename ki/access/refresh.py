"""Access-only re-index: the ``access_only_reindex`` marker and the scan's comparison of grants.

Spec: insertion-pipeline.md "Index" (a sync that sees only an ACL change marks the index row
``access_only_reindex``; the index stage then rewrites only the permission fields). The scan calls
:func:`mark_access_changes` after it applied a listing; the index stage reads the marker with
``ki.taxonomies.has_access_only_marker`` (the marker's one home).
"""

from __future__ import annotations

import json
import logging

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.access.load import load_source_access
from ki.access.projection import AccessProjection
from ki.errors import AclReadError
from ki.taxonomies import ACCESS_ONLY_REINDEX

log = logging.getLogger(__name__)

# -- name: mark_access_only_reindex --
# A done index row whose object's grants changed (and nothing else) goes back to pending with the
# durable marker; its attempt budget starts afresh. Rows in any other state are left alone: a
# pending/failed full index compiles the current grants anyway.
MARK_ACCESS_ONLY_SQL = text("""
UPDATE processing_state
SET status = 'pending', attempts = 0, last_error = CAST(:marker AS jsonb), next_retry_at = NULL,
    claim_token = NULL, claimed_by = NULL, heartbeat_at = NULL, updated_at = now()
WHERE stage = 'index' AND status = 'done' AND source_object_id = ANY(CAST(:ids AS bigint[]))
RETURNING source_object_id
""")

# Live objects of a source whose index row is done, with the projection their chunks carry now.
INDEXED_ACCESS_SQL = text("""
SELECT so.id, c.allowed_principals, c.denied_principals
FROM source_object so
JOIN processing_state ps ON ps.source_object_id = so.id AND ps.stage = 'index' AND ps.status = 'done'
JOIN LATERAL (SELECT allowed_principals, denied_principals FROM chunk
              WHERE chunk.source_object_id = so.id ORDER BY ordinal LIMIT 1) c ON true
WHERE so.source_id = :sid AND so.deleted_at IS NULL
""")


def mark_access_changes(conn: Connection, source_id: int) -> list[int]:
    """Compare every indexed object's chunk projection with its current grants; mark the changed ones.

    Called by the scan after it applied the listing (objects whose bytes changed were already
    requeued from fetch, so their index rows are no longer ``done``). An object whose grants
    cannot be read is marked too: its access-only re-index then fails as an infrastructure fault
    and retries, while its chunks keep their previous projection.

    Returns: the ids of the objects marked ``access_only_reindex``.
    """
    rows = conn.execute(INDEXED_ACCESS_SQL, {"sid": source_id}).fetchall()
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
    if not changed:
        return []
    marked = conn.execute(MARK_ACCESS_ONLY_SQL, {"ids": changed,
                                                 "marker": json.dumps({ACCESS_ONLY_REINDEX: True})}).fetchall()
    return [r.source_object_id for r in marked]
