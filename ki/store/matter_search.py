"""The vector half of Classify's ``search_matters``: the matters whose indexed rows lie nearest a query vector.

Spec: insertion-pipeline.md "Classify: what the model is given" (``search_matters`` "ranks existing matters by
semantic similarity over already-indexed chunks"). Reads the search record (``chunk.embedding``, written by the
index stage on either backend) through its HNSW index; the caller owns the connection (a short read).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import text
from sqlalchemy.engine import Connection

#: Nearest indexed rows read per query; the matters holding them are the vector half's candidates.
NEAREST_ROWS = 200

# -- name: nearest_matters --
# The rows of files filed on a real (not placeholder) matter of the project, nearest first; per matter the best.
_NEAREST = """
WITH r AS MATERIALIZED (
    SELECT ma.matter_id,
           (c.embedding::halfvec({d})) <=> CAST(CAST(:v AS vector({d})) AS halfvec({d})) AS distance
    FROM chunk c
    JOIN matter_assignment ma ON ma.source_object_id = c.source_object_id
    JOIN matter m ON m.id = ma.matter_id AND m.project_id = :p AND NOT m.placeholder
    WHERE c.embedding IS NOT NULL AND NOT c.is_deleted
    ORDER BY (c.embedding::halfvec({d})) <=> CAST(CAST(:v AS vector({d})) AS halfvec({d}))
    LIMIT :k
)
SELECT matter_id, 1 - min(distance) AS similarity FROM r GROUP BY matter_id ORDER BY 2 DESC, 1
"""


def nearest_matters(conn: Connection, *, project_id: int, vector: Sequence[float], rows: int = NEAREST_ROWS
                    ) -> list[tuple[int, float]]:
    """The matters holding one of the ``rows`` indexed rows nearest ``vector`` (cosine), best first.

    Args:
        conn: a connection; the HNSW settings (``ef_search`` = ``rows``, iterative scan) stay local to its
            transaction.
        project_id: the project whose matters count; placeholder (``UNASSIGNED-…``) matters never do — their
            files are the ones no matter was found for.
        vector: the query's L2-normalised vector, embedded with the model the index records (its dimension).
        rows: how many nearest rows are read (passages, profile and clause rows of the matters' files).
    Returns: ``[(matter_id, similarity)]`` — per matter the cosine similarity (−1..1) of its nearest row, by
        similarity descending, then matter id. Empty when nothing is embedded.
    """
    values = [float(x) for x in vector]
    if not values:
        return []
    dimension = len(values)
    literal = "[" + ",".join(repr(x) for x in values) + "]"
    # local to the connection's transaction (SQLAlchemy begins one with the first statement)
    conn.execute(text("SELECT set_config('hnsw.ef_search', :ef, true), "
                      "set_config('hnsw.iterative_scan', 'relaxed_order', true)"), {"ef": str(max(40, rows))})
    found = conn.execute(text(_NEAREST.format(d=dimension)), {"v": literal, "p": project_id, "k": rows})
    return [(int(r.matter_id), float(r.similarity)) for r in found]
