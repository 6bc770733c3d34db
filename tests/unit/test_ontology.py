"""The ontology artifact: shipped families, scope, fingerprint, ontology_file, navigation tools.

Spec: insertion-pipeline.md "Extract metadata" (the active scope; only visited, in-scope node ids;
clause_search when the clause facet is active) and issue 5 item 1.
"""

from __future__ import annotations

import copy
import json

import pytest

from ki.config.loader import load_config, set_config_value
from ki.config.settings import KiConfig
from ki.core.errors import ConfigurationError, ToolError
from ki.domain.ontology import Ontology, OntologyError, active_ontology, default_ontology, load_ontology_file
from ki.domain.ontology.terms import find_term, fold, tokens
from ki.domain.ontology.tools import ontology_tools


def tool_map(onto):
    return {t.name: t for t in ontology_tools(onto)}


def call(tools, name, **args):
    tool = tools[name]
    return tool.fn(tool.args_model(**args))


def truth_ontology(shared) -> dict:
    return json.loads((shared / "corpus" / "estate-dev" / "truth.json").read_text(encoding="utf-8"))["ontology"]


def test_shipped_ontology_has_the_families_and_common_leaves_in_two_languages():
    onto = default_ontology()
    assert onto.version.startswith("ki-legal-doctypes")
    roots = set(onto.roots())
    assert {"contract", "correspondence", "court", "corporate", "finance"} <= roots
    leaves = {"lease", "spa", "nda", "employment", "settlement", "engagement_letter", "letter", "email",
              "statement_of_claim", "judgment", "court_order", "register_extract", "shareholder_resolution",
              "articles", "power_of_attorney", "invoice", "payment_reminder"}
    assert leaves <= onto.visible_ids
    for node_id in onto.visible_ids:
        node = onto.types.nodes[node_id]
        assert node.label.de and node.label.en, node_id
    assert onto.ancestors("lease") == ["contract", "lease"]
    assert onto.clause_facet_active


def test_fingerprint_is_stable_under_order_and_descriptions_and_moves_with_content(shared):
    doc = truth_ontology(shared)
    base = Ontology.from_document(doc).fingerprint
    shuffled = copy.deepcopy(doc)
    shuffled["nodes"] = list(reversed(shuffled["nodes"]))
    shuffled["nodes"][0] = dict(reversed(list(shuffled["nodes"][0].items())))
    shuffled["nodes"][1]["description"] = "a note that does not change what the node means"
    assert Ontology.from_document(shuffled).fingerprint == base
    assert base.startswith("sha256:") and len(base) == len("sha256:") + 32
    changed = copy.deepcopy(doc)
    changed["nodes"][1]["synonyms"]["de"].append("Mietvertrag über Geschäftsräume")
    assert Ontology.from_document(changed).fingerprint != base
    scoped = copy.deepcopy(doc) | {"scope": {"exclude": ["internal"]}}
    assert Ontology.from_document(scoped).fingerprint != base


def test_scope_include_and_exclude_hide_subtrees(shared):
    doc = truth_ontology(shared) | {"scope": {"include": ["contract", "finance"], "exclude": ["term_sheet"]}}
    onto = Ontology.from_document(doc)
    assert onto.roots() == ["contract", "finance"]
    assert onto.in_scope("lease") and onto.in_scope("invoice")
    assert not onto.in_scope("term_sheet") and not onto.in_scope("letter") and not onto.in_scope(None)
    assert "term_sheet" not in onto.children("contract")
    assert [h.node.id for h in onto.search("Absichtserklärung")] == []


@pytest.mark.parametrize("doc, message", [
    ({"nodes": []}, "no 'nodes'"),
    ({"nodes": [{"id": "a", "parent": "missing"}]}, "unknown parent"),
    ({"nodes": [{"id": "a"}, {"id": "a"}]}, "twice"),
    ({"nodes": [{"id": "a", "parent": "b"}, {"id": "b", "parent": "a"}]}, "cycle"),
    ({"nodes": [{"id": "a"}], "scope": {"include": ["zzz"]}}, "unknown node"),
])
def test_malformed_ontologies_are_refused(doc, message):
    with pytest.raises(OntologyError, match=message):
        Ontology.from_document(doc)


def test_ontology_file_replaces_the_shipped_one_by_config_and_env(tmp_path, shared, monkeypatch):
    path = tmp_path / "onto.json"
    path.write_text(json.dumps(truth_ontology(shared)), encoding="utf-8")
    monkeypatch.delenv("KI_PIPELINE__ONTOLOGY_FILE", raising=False)
    assert active_ontology(KiConfig()).version == default_ontology().version
    cfg = set_config_value(tmp_path, "pipeline.ontology_file", str(path))
    assert active_ontology(cfg).version == "estate-ontology-1"
    # a truth.json itself works too (its "ontology" object is read)
    monkeypatch.setenv("KI_PIPELINE__ONTOLOGY_FILE", str(shared / "corpus" / "estate-dev" / "truth.json"))
    env_cfg = load_config(tmp_path / "elsewhere")
    assert env_cfg.pipeline.ontology_file.endswith("truth.json")
    assert active_ontology(env_cfg).fingerprint == load_ontology_file(path).fingerprint


def test_unusable_ontology_file_is_a_configuration_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    for path in (bad, tmp_path / "missing.json"):
        cfg = KiConfig.model_validate({"pipeline": {"ontology_file": str(path)}})
        with pytest.raises(ConfigurationError, match="ontology_file"):
            active_ontology(cfg)


def test_navigation_tools_return_only_in_scope_nodes(shared):
    doc = truth_ontology(shared) | {"scope": {"exclude": ["internal"]}}
    tools = tool_map(Ontology.from_document(doc))
    assert "clause_search" not in tools  # the estate ontology has no clause facet
    roots = call(tools, "ontology_roots")["nodes"]
    assert [r["id"] for r in roots] == ["contract", "correspondence", "court", "corporate", "finance"]
    kids = call(tools, "ontology_children", node_id="court")["children"]
    assert "judgment" in [k["id"] for k in kids] and all(k["path"][0] == "court" for k in kids)
    node = call(tools, "ontology_node", node_id="lease")
    assert node["node"]["label"] == {"de": "Mietvertrag", "en": "Lease agreement"}
    assert node["node"]["path"] == ["contract", "lease"]
    with pytest.raises(ToolError, match="outside the active ontology scope"):
        call(tools, "ontology_node", node_id="memo")
    with pytest.raises(ToolError, match="no ontology node"):
        call(tools, "ontology_children", node_id="nope")
    hits = call(tools, "ontology_search", query="Aktenvermerk")["results"]
    assert hits == []


@pytest.mark.parametrize("query, expected", [
    ("Gewerbemietvertrag", "lease"),
    ("Nachtrag Nr. 1 zum Gewerbemietvertrag vom 20.03.2023", "amendment"),  # earliest hit wins
    ("Terminsladung", "court_order"),  # head of a German compound
    ("Angebot eines Aufhebungsvertrags", "termination_agreement"),  # genitive inflection
    ("Mutual Non-Disclosure Agreement", "nda"),
    ("Engagement Letter", "engagement_letter"),
    ("Share Purchase Agreement", "spa"),
])
def test_search_finds_labels_and_synonyms(shared, query, expected):
    tools = tool_map(Ontology.from_document(truth_ontology(shared)))
    hits = call(tools, "ontology_search", query=query)["results"]
    best = min(hits, key=lambda h: (h["match"]["start"], -h["match"]["length"]))
    assert best["id"] == expected


def test_clause_search_types_headings_with_the_shipped_facet():
    tools = tool_map(default_ontology())
    hits = call(tools, "clause_search", query="§ 7 Haftungsbeschränkung")["results"]
    assert hits[0]["id"] == "liability"
    assert call(tools, "clause_search", query="4. Governing Law")["results"][0]["id"] == "governing_law"


def test_terms_fold_and_match():
    assert fold("Kessler Claußen") == fold("KESSLER CLAUSSEN") == "kessler claussen"
    assert tokens("Non-Disclosure Agreement") == ["non", "disclosure", "agreement"]
    assert find_term(["ladung"], tokens("Ladung zum Gütetermin")).kind == "exact"
    assert find_term(["ladung"], tokens("Terminsladung")).kind == "compound"
    assert find_term(["vertrag"], tokens("Verträge")) is None
    assert find_term(["agreement"], tokens("agreements")).kind == "inflected"
