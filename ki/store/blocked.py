"""Rows that will never move on their own: later stages of a file whose earlier stage is quarantined.

Spec: insertion-pipeline.md "Processing states and console buckets". A stage row parked behind its
predecessor is in the ``waiting`` bucket; when that predecessor (or any stage it needs, transitively,
:data:`ki.core.taxonomies.STAGE_INPUTS`) is quarantined, the row waits for an operator, not for work that will
come. :func:`blocked_counts` counts those rows apart — a sub-count of ``waiting``, never a ninth bucket, so
the eight buckets and their sums stay as the spec has them. ``ki status``, ``GET /api/status`` and the
console's stage cards show it ("blocked by a quarantined stage").
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.core.taxonomies import PIPELINE_STAGE_ORDER, STAGE_INPUTS, WAITING_FOR_PREVIOUS_STAGE


def upstream(stage: str) -> list[str]:
    """Every stage ``stage`` needs, directly or through another one, in pipeline order."""
    seen: set[str] = set()
    todo = list(STAGE_INPUTS.get(stage, ()))
    while todo:
        s = todo.pop()
        if s not in seen:
            seen.add(s)
            todo.extend(STAGE_INPUTS.get(s, ()))
    return [s for s in PIPELINE_STAGE_ORDER if s in seen]


_PAIRS = [(s, u) for s in PIPELINE_STAGE_ORDER for u in upstream(s)]

# -- name: blocked_counts --
# Waiting rows whose object has a quarantined row in a stage they need: from the (few) quarantined rows
# to the same object's waiting rows, one count per stage.
BLOCKED_SQL = text(f"""
SELECT w.stage, count(DISTINCT w.id) AS n
FROM processing_state q
JOIN processing_state w ON w.source_object_id = q.source_object_id
JOIN (VALUES {", ".join(f"('{s}', '{u}')" for s, u in _PAIRS)}) AS dep(stage, input)
  ON dep.stage = w.stage AND dep.input = q.stage
WHERE q.status = 'quarantined' AND w.status = 'skipped' AND w.reason = '{WAITING_FOR_PREVIOUS_STAGE}'
GROUP BY w.stage
""")


def blocked_counts(conn: Connection) -> dict[str, int]:
    """``{stage: n}`` for every stage: its ``waiting`` rows that a quarantined earlier stage of the same
    file blocks (0 where none). Each n is at most the stage's ``waiting`` count."""
    out = dict.fromkeys(PIPELINE_STAGE_ORDER, 0)
    for row in conn.execute(BLOCKED_SQL):
        if row.stage in out:
            out[row.stage] = int(row.n)
    return out
