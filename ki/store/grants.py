"""The reads the access projection is compiled from: grants, a source's row, and embedded objects' lineage.

Spec: insertion-pipeline.md "Index" (the projection compiled from source, project and document grants; an
embedded object inherits its container's). The compilation itself is :mod:`ki.domain.access.load` and
:mod:`ki.domain.access.projection`. Every function takes a connection the caller owns.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Row, text
from sqlalchemy.engine import Connection

OBJECTS_SQL = text("""
WITH RECURSIVE chain(id, root_id, depth) AS (
    SELECT so.id, so.id, 0 FROM source_object so WHERE so.id = ANY(CAST(:ids AS bigint[]))
    UNION ALL
    SELECT c.id, p.parent_id, c.depth + 1
    FROM chain c JOIN source_object p ON p.id = c.root_id
    WHERE p.parent_id IS NOT NULL
)
SELECT c.id, array_agg(c.root_id ORDER BY c.depth) AS lineage
FROM chain c GROUP BY c.id
""")

GRANTS_SQL = text("""
SELECT project_id, source_id, source_object_id, principal, effect FROM access_grant
WHERE project_id = :project_id OR source_id = :source_id
   OR source_object_id = ANY(CAST(:object_ids AS bigint[]))
""")


def source_row(conn: Connection, source_id: int) -> Row:
    """``id``, ``project_id``, ``kind``, ``root``, ``config`` of a source (raises NoResultFound when unknown)."""
    return conn.execute(text("SELECT id, project_id, kind, root, config FROM source WHERE id = :id"),
                        {"id": source_id}).one()


def object_lineage(conn: Connection, source_object_ids: list[int]) -> dict[int, list[int]]:
    """object id → its chain up to its top-level container, itself first."""
    return {r.id: list(r.lineage) for r in conn.execute(OBJECTS_SQL, {"ids": source_object_ids})}


def external_ids_of(conn: Connection, source_object_ids: list[int]) -> dict[int, str]:
    """object id → its external id (its path below the source root)."""
    return dict(conn.execute(text("SELECT id, external_id FROM source_object WHERE id = ANY(CAST(:ids AS bigint[]))"),
                             {"ids": source_object_ids}).fetchall())


def grant_rows(conn: Connection, project_id: int, source_id: int, source_object_ids: list[int]) -> Sequence[Row]:
    """Every ``access_grant`` row of the project, the source or one of the objects."""
    return conn.execute(GRANTS_SQL, {"project_id": project_id, "source_id": source_id,
                                     "object_ids": source_object_ids}).fetchall()
