"""The legal document-type ontology: shipped artifact, active scope, fingerprint and agent tools.

Spec: insertion-pipeline.md "Extract metadata" and "producer_version semantics"
(``requeue_ontology_outdated``). Modules: :mod:`ki.ontology.model` (nodes, scope, fingerprint,
search), :mod:`ki.ontology.load` (shipped vs ``pipeline.ontology_file``), :mod:`ki.ontology.tools`
(``ontology_roots`` / ``ontology_children`` / ``ontology_node`` / ``ontology_search`` /
``clause_search``), :mod:`ki.ontology.service_tools` (Classify's ``service_*`` tools over the Service
facet), :mod:`ki.ontology.requeue` (the narrow requeue prepare step).
"""

from ki.errors import OntologyError
from ki.ontology.load import active_ontology, default_ontology, load_ontology_file
from ki.ontology.model import Ontology

__all__ = ["Ontology", "OntologyError", "active_ontology", "default_ontology", "load_ontology_file"]
