"""The legal document-type ontology: shipped artifact, active scope, fingerprint and agent tools.

Spec: insertion-pipeline.md "Extract metadata" and "producer_version semantics"
(``requeue_ontology_outdated``). Modules: :mod:`ki.domain.ontology.model` (nodes, scope, fingerprint,
search), :mod:`ki.domain.ontology.load` (shipped vs ``pipeline.ontology_file``), :mod:`ki.domain.ontology.tools`
(``ontology_roots`` / ``ontology_children`` / ``ontology_node`` / ``ontology_search`` /
``clause_search``), :mod:`ki.domain.ontology.service_tools` (Classify's ``service_*`` tools over the Service
facet), :mod:`ki.domain.ontology.requeue` (the narrow requeue prepare step).
"""

from ki.core.errors import OntologyError
from ki.domain.ontology.load import active_ontology, default_ontology, load_ontology_file
from ki.domain.ontology.model import Ontology

__all__ = ["Ontology", "OntologyError", "active_ontology", "default_ontology", "load_ontology_file"]
