"""The Area-of-Law and Service facets: loading, the ``service_*`` tools and Classify's rules over them.

Spec: insertion-pipeline.md "Classify (classify_matter)" (practice area and kind while the facets are active) and
"Classify: what the model is given" (the ``service_*`` tools; a matter kind must have been visited).
"""

from __future__ import annotations

import pytest

from ki.adapters.agents.loop import AgentState
from ki.core.errors import ToolError
from ki.domain.matters.facets import evidence_texts, facet_validators, matter_kind_ids, practice_area_menu, rule_facets
from ki.domain.matters.schema import ClassifyResult
from ki.domain.ontology import Ontology, OntologyError, default_ontology
from ki.domain.ontology.service_tools import service_tools

DOC = {
    "version": "f1",
    "nodes": [{"id": "letter", "label": {"en": "Letter"}}],
    "facets": {
        "area_of_law": {"nodes": [{"id": "real_estate", "label": {"de": "Immobilienrecht", "en": "Real estate"},
                                   "synonyms": {"de": ["Mietvertrag"]}},
                                  {"id": "employment", "label": {"de": "Arbeitsrecht", "en": "Employment"}}]},
        "service": {"nodes": [{"id": "lease", "label": {"de": "Mietvertrag", "en": "Lease"},
                               "description": "A lease of premises."},
                              {"id": "office_lease", "parent": "lease", "label": {"en": "Office lease"},
                               "synonyms": {"de": ["Büromiete"]}}]},
    },
}


def _state(onto: Ontology) -> AgentState:
    return AgentState(tools={t.name: t for t in service_tools(onto)}, trace_id="t")


def test_facets_load_and_are_inactive_in_the_shipped_ontology():
    onto = Ontology.from_document(DOC)
    assert onto.area_facet_active and onto.service_facet_active
    assert practice_area_menu(onto) == [
        {"id": "real_estate", "label": {"de": "Immobilienrecht", "en": "Real estate"}, "path": ["real_estate"]},
        {"id": "employment", "label": {"de": "Arbeitsrecht", "en": "Employment"}, "path": ["employment"]}]
    assert matter_kind_ids(onto) == ["lease", "office_lease"]
    shipped = default_ontology()
    assert (practice_area_menu(shipped), matter_kind_ids(shipped), service_tools(shipped)) == (None, None, [])
    with pytest.raises(OntologyError, match="service node 'office_lease' names an unknown parent 'leases'"):
        Ontology.from_document({**DOC, "facets": {"service": {"nodes": [{"id": "office_lease", "parent": "leases"}]}}})
    with pytest.raises(OntologyError, match="facet 'area_of_law' must be an object"):
        Ontology.from_document({**DOC, "facets": {"area_of_law": ["real_estate"]}})


def test_service_tools_search_browse_verify_and_refuse_unknown_ids():
    state = _state(Ontology.from_document(DOC))
    found = state.call("service_search", query="Büromiete Etage 3")
    assert [r["id"] for r in found["results"]] == ["office_lease"] and found["total"] == 1
    roots = state.call("service_browse")
    assert [(c["id"], c["definition"], c["has_children"]) for c in roots["children"]] == [
        ("lease", "A lease of premises.", True)]
    assert state.call("service_verify", node_id="lease")["node"]["path"] == ["lease"]
    with pytest.raises(ToolError, match="no service node 'flat' in the active Service facet; use service_search"):
        state.call("service_verify", node_id="flat")
    with pytest.raises(ToolError, match="no service node 'flat'"):
        state.call("service_browse", node_id="flat")


def test_rules_take_the_first_text_naming_a_node_and_the_validators_accept_them():
    onto = Ontology.from_document(DOC)
    state = _state(onto)
    texts = evidence_texts(matter_title="Sonnenhaus Gewerbemietvertrag", rel_path="Akten/Büromiete/Entwurf.txt")
    assert texts == ["Sonnenhaus Gewerbemietvertrag", "Akten / Büromiete", "Entwurf.txt"]
    assert rule_facets(onto, state, texts) == ("real_estate", "lease")  # the title decides both
    assert rule_facets(onto, state, texts[1:]) == (None, "office_lease")
    assert rule_facets(None, state, texts) == (None, None)
    checks = facet_validators(practice_area_menu(onto) and ["real_estate", "employment"], matter_kind_ids(onto))
    ok = ClassifyResult(matter_id=None, practice_area="real_estate", matter_kind="office_lease")
    assert [c(ok, state) for c in checks] == [None, None]
    unseen = ClassifyResult(matter_id=None, practice_area="tax", matter_kind="lease")
    assert [c(unseen, _state(onto)) for c in checks] == [
        "practice_area must be the id of one of the offered practice_areas ['real_estate', 'employment'], not 'tax'",
        "matter_kind 'lease' was not returned by service_search, service_browse or service_verify in this run; "
        "visit it (service_verify) before submitting it"]
