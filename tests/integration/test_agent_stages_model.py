"""Classify and Relate through the model path, against the loopback gateway (``tests/helpers/gateway_stub.py``).

Spec: insertion-pipeline.md "Agentic stages: Classify and Relate": scripted tool calls; a model that
invents a matter id (or cites a file it never opened) is corrected by the validator; every call of
one attempt carries the same trace id, which lands in the row's provenance; a null answer falls back
to the reference-number scan and the ``UNASSIGNED-<slug>`` placeholder.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from ki.orchestration.execute import run_stage_for_object
from ki.store.matters import get_or_create_matter
from tests.helpers.estate_files import converted_estate
from tests.helpers.gateway_stub import model_gateway, submit, tool_call, tool_messages

FOLDER = "Mandate/2024-0153 Keller gg. Nordwind"
BODY = ("§ 1 Die Klägerin liefert Waren aus dem Rahmenliefervertrag. § 2 Die Beklagte schuldet EUR 48.000,00. "
        "§ 3 Der Vertrag liegt als Anlage K1 vor. § 4 Die Beklagte wird verurteilt, zu zahlen.")
FILES = {
    f"{FOLDER}/Klageschrift Entwurf v1.txt": "ENTWURF v1 – Stand: 01.03.2024\nKlageschrift\n" + BODY,
    f"{FOLDER}/Klageschrift Entwurf v2.txt":
        "ENTWURF v2 – Stand: 08.03.2024\nKlageschrift\n" + BODY.replace("48", "49"),
    "Eingang/Notiz.txt": "Bitte Rückruf wegen Parkplatz.",
}


@pytest.fixture
def converted(ctx, tmp_path):
    return converted_estate(ctx, tmp_path / "estate", FILES)


@pytest.fixture
def stub(monkeypatch):
    yield from model_gateway(monkeypatch)


def test_model_path_classify_corrects_an_invented_matter_id_and_relate_cites_only_opened_files(ctx, converted, stub):
    oids, project = converted
    v1, v2 = oids[f"{FOLDER}/Klageschrift Entwurf v1.txt"], oids[f"{FOLDER}/Klageschrift Entwurf v2.txt"]
    matter, _ = get_or_create_matter(ctx.db, project_id=project, reference="2024-0153", title="Keller gg. Nordwind")

    stub.push(submit({"matter_id": 987654, "confidence": 0.9, "evidence": "a guess"}),  # invented: rejected
              tool_call("search_matters", {"query": "2024-0153"}),
              submit({"matter_id": matter.id, "confidence": 0.95, "evidence": "reference in the path"}))
    assert run_stage_for_object(ctx, "classify_matter", v1).kind == "done"
    chats = stub.chat_requests()
    assert len(chats) == 3
    assert "did not appear in any tool result" in tool_messages(chats[1])[-1]
    assert json.loads(tool_messages(chats[2])[-1])["results"][0]["matter_id"] == matter.id
    traces = {r.trace for r in chats}
    assert len(traces) == 1 and next(iter(traces))[1] == "classify_matter"
    with ctx.db.engine.connect() as conn:
        row = conn.execute(text("SELECT matter_id, method, provenance FROM matter_assignment "
                                "WHERE source_object_id = :o"), {"o": v1}).one()
        usage = conn.execute(text("SELECT count(*) FROM model_usage WHERE stage = 'classify_matter'")).scalar_one()
    assert (row.matter_id, row.method) == (matter.id, "model")
    assert row.provenance["model"] == "stub-model" and row.provenance["trace_id"] == next(iter(traces))[2]
    assert usage == 3

    stub.push(tool_call("search_matters", {"query": "Keller"}),
              submit({"matter_id": matter.id, "confidence": 0.9, "evidence": "same folder"}))
    assert run_stage_for_object(ctx, "classify_matter", v2).kind == "done"
    assert run_stage_for_object(ctx, "classify_matter", v1).kind == "not_claimed"  # done rows stay done

    before = stub.count
    stub.push(submit({"identity": "version", "same_as_ref": f"F{v1}"}),  # never opened: rejected
              tool_call("open_file", {"path": f"{FOLDER}/Klageschrift Entwurf v1.txt"}),
              submit({"identity": "version", "same_as_ref": f"F{v1}", "relations": [],
                      "reasoning": "the same statement of claim, second draft"}))
    assert run_stage_for_object(ctx, "relate", v2).kind == "done"
    relate_calls = stub.chat_requests()[before:]
    assert "did not come from an open_file result" in tool_messages(relate_calls[1])[-1]
    opened = json.loads(tool_messages(relate_calls[2])[-1])
    assert opened["ref"] == f"F{v1}" and opened["has_more"] is False
    with ctx.db.engine.connect() as conn:
        rows = {r.source_object_id: r for r in conn.execute(text(
            "SELECT source_object_id, document_id, version_order, provenance FROM document_version"))}
    assert rows[v1].document_id == rows[v2].document_id
    assert (rows[v1].version_order, rows[v2].version_order) == (1, 2)
    assert rows[v2].provenance["model"] == "stub-model"


def test_model_null_answer_falls_back_to_the_placeholder(ctx, converted, stub):
    oids, _ = converted
    note = oids["Eingang/Notiz.txt"]
    stub.push(tool_call("list_folder", {}), submit({"matter_id": None, "confidence": 0.1, "evidence": "nothing"}))
    assert run_stage_for_object(ctx, "classify_matter", note).kind == "done"
    listing = json.loads(tool_messages(stub.chat_requests()[1])[-1])
    assert listing["folder"] == "Eingang" and [f["name"] for f in listing["own"]["files"]] == ["Notiz.txt"]
    with ctx.db.engine.connect() as conn:
        row = conn.execute(text("SELECT m.reference, m.placeholder, ma.method FROM matter_assignment ma "
                                "JOIN matter m ON m.id = ma.matter_id WHERE ma.source_object_id = :o"),
                           {"o": note}).one()
    assert (row.reference, row.placeholder, row.method) == ("UNASSIGNED-eingang", True, "placeholder")
