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
from typing import TYPE_CHECKING

from ki.core.taxonomies import PIPELINE_STAGE_ORDER
from ki.domain.ontology.load import active_ontology
from ki.store import requeue

if TYPE_CHECKING:
    from ki.domain.context import PipelineContext

log = logging.getLogger(__name__)

STAGE = requeue.ONTOLOGY_STAGE



def requeue_ontology_outdated(ctx: PipelineContext) -> tuple[int, int]:
    """Requeue extract_metadata where the active scope no longer holds the judgement. Returns (requeued, parked).

    Raises:
        ConfigurationError: ``pipeline.ontology_file`` is unusable (the run stops before claiming anything).
    """
    if not ctx.config.pipeline.stage(STAGE).enabled:
        return 0, 0
    onto = active_ontology(ctx.config)
    versions = {s: ctx.config.pipeline.producer_version(s) for s in PIPELINE_STAGE_ORDER}
    with ctx.db.engine.begin() as conn:
        requeued, parked = requeue.requeue_ontology_outdated(conn, versions, visible=sorted(onto.visible_ids),
                                                             fingerprint=onto.fingerprint)
    if requeued:
        log.info("ontology scope %s (%s): %d document(s) re-typed, %d downstream row(s) parked",
                 onto.fingerprint, onto.version, requeued, parked)
    return requeued, parked
