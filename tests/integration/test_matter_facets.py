"""A matter's practice area and kind from the ontology's Area-of-Law and Service facets, by rule and by the model.

Spec: insertion-pipeline.md "Classify (classify_matter)" (while the facets are active Classify sets the matter's
practice area and kind; first valid value wins; imported matters stay authoritative) and "Classify: what the model
is given" (the ``service_*`` tools; the validator: a practice area on the offered menu, a matter kind visited and in
the active facet). Real PostgreSQL, the real stages one file at a time (so "first" is a fixed order), the loopback
gateway scripting the model's tool calls.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from ki.config.loader import set_config_value
from ki.domain.matters.matter_list import ImportedMatter
from ki.orchestration.execute import run_stage_for_object
from ki.store.matters import get_or_create_matter, import_matters
from tests.helpers.estate_files import converted_estate
from tests.helpers.gateway_stub import model_gateway, submit, tool_call, tool_messages

ONTOLOGY = {
    "version": "facets-test-1",
    "nodes": [{"id": "letter", "label": {"de": "Brief", "en": "Letter"}}],
    "facets": {
        "area_of_law": {"nodes": [
            {"id": "litigation", "label": {"de": "Prozessführung", "en": "Litigation"}, "synonyms": {"de": ["gg"]}},
            {"id": "real_estate", "label": {"de": "Immobilienrecht", "en": "Real estate"},
             "synonyms": {"de": ["Mietvertrag"]}},
            {"id": "employment", "label": {"de": "Arbeitsrecht", "en": "Employment"},
             "synonyms": {"de": ["Arbeitsvertrag"]}},
        ]},
        "service": {"nodes": [
            {"id": "court", "label": {"de": "Gerichtsverfahren", "en": "Court proceedings"},
             "synonyms": {"de": ["Klage"]}, "description": "A dispute before a state court."},
            {"id": "lease", "label": {"de": "Mietvertrag", "en": "Lease"}, "synonyms": {"de": ["Miete"]},
             "description": "Drafting or negotiating a lease of premises."},
            {"id": "commercial_lease", "parent": "lease", "label": {"de": "Gewerbemiete", "en": "Commercial lease"},
             "description": "A lease of premises used for a business."},
            {"id": "hiring", "label": {"de": "Einstellung", "en": "Hiring"}, "synonyms": {"de": ["Arbeitsvertrag"]},
             "description": "An employment contract for a new hire."},
        ]},
    },
}
KELLER = "Mandate/2024-0153 Keller Logistik GmbH gg. Nordwind AG"
SONNE = "Mandate/2024-0208 Sonnenhaus Gewerbemietvertrag Halle 3"
BRANDAUER = "Mandate/2024-0171 Brandauer"
FILES = {
    f"{KELLER}/Klage.txt": "Klage in Sachen Keller gegen Nordwind wegen Kaufpreis.",
    f"{KELLER}/Arbeitsvertrag Zeuge.txt": "Anlage: der Arbeitsvertrag des Zeugen.",
    f"{SONNE}/Entwurf.txt": "Entwurf des Vertrags über die Halle 3.",
    f"{BRANDAUER}/Arbeitsvertrag.txt": "Arbeitsvertrag zwischen Brandauer GmbH und Herrn Lutz.",
    "Eingang/Klage Arbeitsvertrag.txt": "Bitte Rückruf.",
}


@pytest.fixture
def estate(ctx, tmp_path):
    """The files converted, the ontology with both facets active, Brandauer imported (area set, no kind)."""
    path = tmp_path / "ontology.json"
    path.write_text(json.dumps(ONTOLOGY), encoding="utf-8")
    set_config_value(ctx.settings.data_dir, "pipeline.ontology_file", str(path))
    ctx.reload_config()
    oids, project = converted_estate(ctx, tmp_path / "estate", FILES)
    report = import_matters(ctx.db, project_id=project, rows=[
        (2, ImportedMatter(reference="2024-0171", title="Brandauer – Personal", practice_area="Arbeitsrecht (PM)"))])
    assert report.created == 1
    return oids, project


def _matters(ctx) -> dict[str, tuple]:
    with ctx.db.engine.connect() as conn:
        return {r.reference: (r.practice_area, r.kind) for r in conn.execute(text(
            "SELECT reference, practice_area, kind FROM matter"))}


def _classify(ctx, oids, rel):
    assert run_stage_for_object(ctx, "classify_matter", oids[rel]).kind == "done"


def test_rules_set_practice_area_and_kind_first_valid_wins_imported_and_placeholders_untouched(ctx, estate):
    oids, _ = estate
    _classify(ctx, oids, f"{KELLER}/Klage.txt")
    # the title names the area ("gg."), the file name the kind ("Klage"), found through service_search
    assert _matters(ctx)["2024-0153"] == ("litigation", "court")
    _classify(ctx, oids, f"{KELLER}/Arbeitsvertrag Zeuge.txt")  # names employment / hiring: the first value stays
    assert _matters(ctx)["2024-0153"] == ("litigation", "court")
    with ctx.db.engine.connect() as conn:
        second = conn.execute(text("SELECT provenance FROM matter_assignment WHERE source_object_id = :o"),
                              {"o": oids[f"{KELLER}/Arbeitsvertrag Zeuge.txt"]}).scalar_one()
    assert (second["practice_area"], second["matter_kind"]) == ("litigation", "hiring")
    _classify(ctx, oids, f"{SONNE}/Entwurf.txt")  # "Gewerbemietvertrag": compounds of Mietvertrag
    assert _matters(ctx)["2024-0208"] == ("real_estate", "lease")
    _classify(ctx, oids, f"{BRANDAUER}/Arbeitsvertrag.txt")
    assert _matters(ctx)["2024-0171"] == ("Arbeitsrecht (PM)", None)  # imported: practice management decides
    _classify(ctx, oids, "Eingang/Klage Arbeitsvertrag.txt")
    assert _matters(ctx)["UNASSIGNED-eingang"] == (None, None)  # a placeholder collects unrelated files


@pytest.fixture
def stub(monkeypatch):
    yield from model_gateway(monkeypatch)


def test_model_sets_facets_through_the_service_tools_invalid_values_refused(ctx, estate, stub):
    oids, project = estate
    sonne, _ = get_or_create_matter(ctx.db, project_id=project, reference="2024-0208", title="Sonnenhaus")
    stub.push(tool_call("search_matters", {"query": "2024-0208"}),
              tool_call("service_verify", {"node_id": "tenancy"}),
              submit({"matter_id": sonne.id, "confidence": 0.9, "practice_area": "tax", "matter_kind": "lease"}),
              tool_call("service_browse", {"node_id": "lease"}),
              tool_call("service_verify", {"node_id": "commercial_lease"}),
              submit({"matter_id": sonne.id, "confidence": 0.9, "practice_area": "real_estate",
                      "matter_kind": "commercial_lease"}))
    _classify(ctx, oids, f"{SONNE}/Entwurf.txt")
    chats = stub.chat_requests()
    assert len(chats) == 6
    first = chats[0].body
    assert {t["function"]["name"] for t in first["tools"]} >= {"service_search", "service_browse", "service_verify",
                                                               "search_matters"}
    payload = json.loads(next(m["content"] for m in first["messages"] if m["role"] == "user"))
    assert [a["id"] for a in payload["practice_areas"]] == ["litigation", "real_estate", "employment"]
    assert "no service node 'tenancy'" in tool_messages(chats[2])[-1]
    refused = tool_messages(chats[3])[-1]
    assert "practice_area must be the id of one of the offered practice_areas" in refused and "'tax'" in refused
    assert "matter_kind 'lease' was not returned by service_search" in refused
    browsed = json.loads(tool_messages(chats[4])[-1])
    assert [c["id"] for c in browsed["children"]] == ["commercial_lease"]
    assert browsed["children"][0]["definition"] == "A lease of premises used for a business."
    assert _matters(ctx)["2024-0208"] == ("real_estate", "commercial_lease")

    # a later file's valid values do not replace the first; an imported matter keeps its own
    with ctx.db.engine.connect() as conn:
        brandauer = conn.execute(text("SELECT id FROM matter WHERE reference = '2024-0171'")).scalar_one()
    stub.push(tool_call("search_matters", {"query": "Brandauer"}), tool_call("service_search", {"query": "Klage"}),
              submit({"matter_id": brandauer, "confidence": 0.9, "practice_area": "litigation",
                      "matter_kind": "court"}))
    _classify(ctx, oids, f"{BRANDAUER}/Arbeitsvertrag.txt")
    assert _matters(ctx)["2024-0171"] == ("Arbeitsrecht (PM)", None)
    stub.push(tool_call("search_matters", {"query": "Sonnenhaus"}), tool_call("service_search", {"query": "Klage"}),
              submit({"matter_id": sonne.id, "confidence": 0.9, "practice_area": "litigation", "matter_kind": "court"}))
    _classify(ctx, oids, f"{KELLER}/Klage.txt")  # filed (by the model) on Sonnenhaus: its facets stay
    assert _matters(ctx)["2024-0208"] == ("real_estate", "commercial_lease")


def test_facet_values_refused_while_the_facets_are_inactive(ctx, tmp_path, stub):
    oids, project = converted_estate(ctx, tmp_path / "estate", {f"{KELLER}/Klage.txt": "Klage."})
    oid = oids[f"{KELLER}/Klage.txt"]
    keller, _ = get_or_create_matter(ctx.db, project_id=project, reference="2024-0153", title="Keller")
    stub.push(tool_call("search_matters", {"query": "2024-0153"}),
              tool_call("service_search", {"query": "Klage"}),
              submit({"matter_id": keller.id, "practice_area": "litigation", "matter_kind": "court"}),
              submit({"matter_id": keller.id}))
    assert run_stage_for_object(ctx, "classify_matter", oid).kind == "done"
    chats = stub.chat_requests()
    assert not {t["function"]["name"] for t in chats[0].body["tools"]} & {"service_search", "service_verify"}
    assert "unknown tool 'service_search'" in tool_messages(chats[2])[-1]
    refused = tool_messages(chats[3])[-1]
    assert "the Area-of-Law facet is not active" in refused and "the Service facet is not active" in refused
    assert _matters(ctx)["2024-0153"] == (None, None)
