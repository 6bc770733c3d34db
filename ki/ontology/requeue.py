"""``requeue_ontology_outdated``: re-type exactly the documents a scope change affects (a prepare step).

Spec: insertion-pipeline.md "producer_version semantics": "Ontology scope changes use a narrower path
(requeue_ontology_outdated): only documents whose type node fell out of the visible scope, or that were
left untyped under a different scope fingerprint, get extract_metadata and downstream requeued." And
"Extract metadata": an untyped result is recorded with the fingerprint of the scope that judged it, "so
a later, richer ontology re-types exactly those documents".

A picked object's ``extract_metadata`` row (done or skipped, not quarantined) goes back to pending with a
fresh attempt budget; every later stage is parked back to waiting (the same tail as
``requeue_outdated_stages``). Typed documents whose node is still in scope are untouched, whatever else
changed in the ontology.
"""

from __future__ import annotations

import logging

from sqlalchemy import text

from ki.context import PipelineContext
from ki.ontology.load import active_ontology
from ki.store.claims import _REQUEUE_TAIL, _STAGE_CTE, _stage_table
from ki.taxonomies import PIPELINE_STAGE_ORDER, WAITING_FOR_PREVIOUS_STAGE

log = logging.getLogger(__name__)

STAGE = "extract_metadata"

# -- name: requeue_ontology_outdated --
REQUEUE_ONTOLOGY_SQL = text(f"""
WITH {_STAGE_CTE},
picked AS (
    SELECT ps.source_object_id, ps.stage, e.ord
    FROM processing_state ps
    JOIN eff e ON e.stage = ps.stage
    JOIN source_object so ON so.id = ps.source_object_id AND so.deleted_at IS NULL
    JOIN document_metadata dm ON dm.source_object_id = ps.source_object_id
    WHERE ps.stage = '{STAGE}' AND ps.status IN ('done', 'skipped') AND ps.producer_version IS NOT NULL
      AND ((dm.doc_type IS NOT NULL AND NOT (dm.doc_type = ANY(CAST(:visible AS text[]))))
           OR (dm.doc_type IS NULL AND dm.ontology_fingerprint <> :fingerprint))
),
{_REQUEUE_TAIL}
""")


def requeue_ontology_outdated(ctx: PipelineContext) -> tuple[int, int]:
    """Requeue extract_metadata where the active scope no longer holds the judgement. Returns (requeued, parked).

    Raises:
        ConfigurationError: ``pipeline.ontology_file`` is unusable (the run stops before claiming anything).
    """
    if not ctx.config.pipeline.stage(STAGE).enabled:
        return 0, 0
    onto = active_ontology(ctx.config)
    versions = {s: ctx.config.pipeline.producer_version(s) for s in PIPELINE_STAGE_ORDER}
    params = _stage_table(versions) | {"waiting_reason": WAITING_FOR_PREVIOUS_STAGE,
                                       "visible": sorted(onto.visible_ids), "fingerprint": onto.fingerprint}
    with ctx.db.engine.begin() as conn:
        row = conn.execute(REQUEUE_ONTOLOGY_SQL, params).one()
    requeued, parked = int(row.requeued), int(row.parked)
    if requeued:
        log.info("ontology scope %s (%s): %d document(s) re-typed, %d downstream row(s) parked",
                 onto.fingerprint, onto.version, requeued, parked)
    return requeued, parked
