"""Decisions from tracked changes: pairing rules, locus, rationale, taxonomy, validators; case R05.

Spec: insertion-pipeline.md "Extract decisions"; DESIGN.md "Decisions"; cases/R05 CASE.md item 5:
"adjacent del+ins by the same author = replacement: ``EUR 1,200 → EUR 1,350`` (P1), ``B → C`` (P2);
plus insertion of the termination sentence (P3)".
"""

from __future__ import annotations

import pytest

from ki.adapters.agents.loop import AgentState, run_policy
from ki.adapters.convert.router import convert_bytes
from ki.config.settings import KiConfig
from ki.domain.decisions.changes import decision_entries, pair_changes
from ki.domain.decisions.locus import locus_for
from ki.domain.decisions.policy import DecisionRulesPolicy
from ki.domain.decisions.schema import DecisionEntryOut, DecisionResult, make_validators
from ki.domain.decisions.taxonomy import rationale_taxonomy


def rev(kind, text, author="A", paragraph=0, **kw):
    return {"kind": kind, "text": text, "author": author, "paragraph": paragraph, "date": "2024-03-01T10:00:00Z", **kw}


def test_r05_decisions(cases_dir):
    path = next(cases_dir.glob("R05*")) / "input.docx"
    body = convert_bytes(path.read_bytes(), "input.docx", KiConfig()).model_dump(mode="json")
    entries = decision_entries(body)
    assert [(e["kind"], e["before"], e["after"]) for e in entries] == [
        ("replacement", "EUR 1,200", "EUR 1,350"),
        ("replacement", "B", "C"),
        ("insertion", "", "Either party may terminate with 30 days notice."),
    ]
    assert [e["author"] for e in entries] == ["Rita Okonkwo", "Rita Okonkwo", "Malte Feld"]
    assert entries[0]["change_summary"] == '"EUR 1,200" → "EUR 1,350"'
    tax = rationale_taxonomy()
    assert all(tax.is_category(e["rationale_category"]) and tax.is_generalizability(e["generalizability"])
               for e in entries)
    assert entries[0]["rationale_category"] == "commercial_terms" and entries[0]["generalizability"] == "deal_specific"


PAIRING = [
    ("del then ins by the same author in one paragraph is a replacement",
     [rev("del", "fünf (5) Jahren"), rev("ins", "zehn (10) Jahren")],
     [("replacement", "fünf (5) Jahren", "zehn (10) Jahren")]),
    ("another author's insertion is not the replacement of a deletion",
     [rev("del", "x", author="A"), rev("ins", "y", author="B")], [("deletion", "x", ""), ("insertion", "", "y")]),
    ("formatting and paragraph marks are no decisions",
     [rev("rPrChange", ""), rev("para_ins", ""), rev("pPrChange", "")], []),
    ("a move pairs moveFrom with moveTo",
     [rev("moveFrom", "Clause", move_name="m1"), rev("moveTo", "Clause", paragraph=5, move_name="m1")],
     [("move", "Clause", "Clause")]),
    ("a lone deletion", [rev("del", "Der Mieter trägt die Schönheitsreparaturen.")],
     [("deletion", "Der Mieter trägt die Schönheitsreparaturen.", "")]),
]


@pytest.mark.parametrize("label, revisions, expected", PAIRING, ids=[p[0] for p in PAIRING])
def test_pairing_rules(label, revisions, expected):
    assert [(c.kind, c.before, c.after) for c in pair_changes(revisions)] == expected


def test_locus_rationale_and_deleted_paragraphs():
    text = ("Gewerbemietvertrag\n§ 2 Mietzeit\n(1) Das Mietverhältnis beginnt am 01.10.2024.\n§ 3 Miete\n"
            "Streitwert: EUR 1")
    original = text.replace("§ 3 Miete", "§ 3 Miete\n(4) Der Mieter trägt die Schönheitsreparaturen.")
    body = {"text": text, "original_text": original,
            "revisions": [rev("del", "21.08.2024", paragraph=2), rev("ins", "01.10.2024", paragraph=2),
                          rev("del", "(4) Der Mieter trägt die Schönheitsreparaturen.", paragraph=4)],
            "comments": [{"comment_id": "1", "text": "Wie im Telefonat besprochen.", "anchor_text": "01.10.2024"}]}
    entries = decision_entries(body)
    assert [(e["kind"], e["locus"], e["rationale_text"]) for e in entries] == [
        ("replacement", "§ 2 Mietzeit", "Wie im Telefonat besprochen."), ("deletion", "§ 3 Miete", None)]
    assert entries[0]["rationale_category"] == "timing"
    assert locus_for(4, text) == "Streitwert"


def test_validators_hold_the_model_to_the_taxonomy_and_the_revisions():
    validators = make_validators(["EUR 1,200"], ["EUR 1,350"])
    state = AgentState(tools={}, trace_id="t")

    def verdicts(**entry):
        base = dict(kind="replacement", before="EUR 1,200", after="EUR 1,350", change_summary="rent",
                    rationale_category="commercial_terms", generalizability="deal_specific")
        result = DecisionResult(entries=[DecisionEntryOut(**(base | entry))])
        return [v(result, state) for v in validators]

    assert verdicts() == [None, None]
    assert "unknown rationale_category" in verdicts(rationale_category="vibes")[0]
    assert "not text any revision inserted" in verdicts(after="EUR 9,999")[1]
    assert "not text any revision deleted" in verdicts(before="EUR 5,000")[1]
    assert verdicts(before="EUR 1,")[1] is None  # a part of the deleted text is a quote too


def test_rules_policy_passes_the_same_validators(cases_dir):
    path = next(cases_dir.glob("R05*")) / "input.docx"
    body = convert_bytes(path.read_bytes(), "input.docx", KiConfig()).model_dump(mode="json")
    deleted = [r["text"] for r in body["revisions"] if r["kind"] == "del"]
    inserted = [r["text"] for r in body["revisions"] if r["kind"] == "ins"]
    res = run_policy(DecisionRulesPolicy(body), [], DecisionResult, make_validators(deleted, inserted))
    assert res.provenance["model"] == "rules" and len(res.result.entries) == 3
