"""Clause splitting and clause typing on real agreement texts of the dev estate, and on Dutch and French clauses.

Spec: insertion-pipeline.md "Index" (clause rows for final/executed versions), "Extract metadata" (clauses typed
against the ontology's clause facet). Each test names the clauses it expects: (number, heading, clause type).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ki.adapters.convert.docx import convert_docx
from ki.adapters.convert.pdf import convert_pdf
from ki.adapters.search.backend import clause_base
from ki.adapters.search.clause_types import clause_type, notable_types
from ki.adapters.search.clauses import split_clauses
from ki.domain.ontology.model import Ontology

ESTATE = Path("corpus/estate-dev/estate")
BUILTIN = Path(__file__).parents[2] / "ki" / "domain" / "ontology" / "data" / "legal-document-types.json"


@pytest.fixture(scope="module")
def onto() -> Ontology:
    return Ontology.from_document(json.loads(BUILTIN.read_text(encoding="utf-8")))


def typed(text: str, onto: Ontology, notable: dict[str, str] | None = None) -> list[tuple[str, str, str | None]]:
    return [(c.number, c.heading, clause_type(c.heading, c.text, onto, notable)) for c in split_clauses(text)]


def converted(shared: Path, rel: str) -> str:
    data = (shared / ESTATE / rel).read_bytes()
    doc = convert_pdf(data, Path(rel).name) if rel.endswith(".pdf") else convert_docx(data, Path(rel).name)
    return doc.text or ""


LEASE = ("Akten/2023/Thalbach Immobilien GmbH & Co. KG - Gewerbemietvertrag Büroflächen 4. OG/"
         "2023-03-20 Mietvertrag unterzeichnet.pdf")
SPA = "Clients/OAKM-2022-007 Acquisition Rehberg/Executed/SPA_executed.pdf"
SUPPLY = "Clients/FLUE-2023-004 Supply and NDA/Executed/Supply Agreement_signed.pdf"
NDA = "Clients/FLUE-2023-004 Supply and NDA/Executed/NDA_fully_signed.pdf"
AMENDMENT = ("Akten/2023/Thalbach Immobilien GmbH & Co. KG - Gewerbemietvertrag Büroflächen 4. OG/"
             "2023-03-29 Nachtrag Nr. 1 unterzeichnet.pdf")


def test_signed_german_lease_splits_into_its_seven_paragraphs(shared, onto):
    assert typed(converted(shared, LEASE), onto) == [
        ("§ 1", "Mietgegenstand", None), ("§ 2", "Mietzeit", "term"),
        ("§ 3", "Miete und Nebenkosten", "payment_terms"), ("§ 4", "Mietsicherheit", "security"),
        ("§ 5", "Instandhaltung", None), ("§ 6", "Untervermietung", "assignment"),
        ("§ 7", "Schlussbestimmungen", "written_form")]


def test_executed_spa_keeps_the_preamble_and_skips_wrapped_numbered_sentences(shared, onto):
    # "4.1 The Seller guarantees by way of …" and "5.3 Claims under this Agreement …" are prose wrapped by the PDF
    assert typed(converted(shared, SPA), onto) == [
        ("", "Preamble", None), ("1", "Sale and Purchase", None), ("2", "Purchase Price", "payment_terms"),
        ("3", "Closing", None), ("4", "Seller Guarantees", "warranties"),
        ("5", "Limitation of Liability", "liability"), ("6", "Non-Competition", "non_compete"),
        ("7", "Governing Law and Disputes", "governing_law")]


def test_signed_supply_agreement_and_nda(shared, onto):
    assert typed(converted(shared, SUPPLY), onto) == [
        ("1", "Subject Matter", None), ("2", "Prices and Payment", "payment_terms"), ("3", "Delivery", None),
        ("4", "Warranty", "warranties"), ("5", "Liability", "liability"), ("6", "Term", "term"),
        ("7", "Governing Law", "governing_law")]
    assert typed(converted(shared, NDA), onto) == [
        ("1", "Purpose", None), ("2", "Confidentiality", "confidentiality"), ("3", "Term", "term"),
        ("4", "Governing Law", "governing_law")]


def test_a_statutory_reference_at_a_line_start_is_not_a_clause(shared, onto):
    # "§ 3 Abs. 1 des Mietvertrags wird wie folgt neu gefasst: …" opens a wrapped line of § 2
    assert typed(converted(shared, AMENDMENT), onto) == [
        ("§ 1", "Vorbemerkung", None), ("§ 2", "Änderung der Miete", "payment_terms"),
        ("§ 3", "Erweiterung der Mietfläche", None), ("§ 4", "Übrige Bestimmungen", "written_form")]


def test_the_draft_docx_of_the_lease_has_the_same_clauses(shared, onto):
    rel = ("Akten/2023/Thalbach Immobilien GmbH & Co. KG - Gewerbemietvertrag Büroflächen 4. OG/"
           "2023-03-13 Mietvertrag Endfassung.docx")
    assert [n for n, _, _ in typed(converted(shared, rel), onto)] == [f"§ {i}" for i in range(1, 8)]


def test_dutch_and_french_clauses_and_schedules(onto):
    nl = ("HUUROVEREENKOMST\nArtikel 1 Huurprijs\nDe huurprijs bedraagt EUR 2.000 per maand.\n"
          "Artikel 2 Duur\nDe overeenkomst geldt voor vijf jaar.\nArtikel 3 Aansprakelijkheid\n"
          "Verhuurder is niet aansprakelijk.\nArtikel 4 Toepasselijk recht\nNederlands recht is van toepassing.\n"
          "Bijlage 1 Plattegrond\n1. Begane grond\nDe begane grond omvat 200 m2.\n2. Eerste verdieping\nLeeg.\n")
    assert typed(nl, onto) == [
        ("1", "Huurprijs", "payment_terms"), ("2", "Duur", "term"), ("3", "Aansprakelijkheid", "liability"),
        ("4", "Toepasselijk recht", "governing_law"), ("Bijlage 1", "Plattegrond", None),
        ("Bijlage 1, 1", "Begane grond", None), ("Bijlage 1, 2", "Eerste verdieping", None)]
    fr = ("CONTRAT DE BAIL\nArticle 1 – Loyer\nLe loyer est payable mensuellement.\nArticle 2 – Résiliation\n"
          "Chaque partie peut résilier.\nArticle 3 – Confidentialité\nLes parties gardent le secret.\n"
          "Article 4 – Droit applicable et juridiction\nLe droit français s'applique.\n")
    assert typed(fr, onto) == [
        ("1", "Loyer", "payment_terms"), ("2", "Résiliation", "termination"),
        ("3", "Confidentialité", "confidentiality"), ("4", "Droit applicable et juridiction", "governing_law")]


def test_clause_12_3_a_heading_on_its_own_line_and_spans(onto):
    text = "Clause 12.3 Escrow\nThe buyer pays into escrow.\n§ 4\nHaftung\nDie Haftung ist beschränkt.\n"
    clauses = split_clauses(text)
    assert [(c.number, c.heading) for c in clauses] == [("12.3", "Escrow"), ("§ 4", "Haftung")]
    assert [clause_type(c.heading, c.text, onto) for c in clauses] == ["security", "liability"]
    assert text[clauses[1].start:clauses[1].end] == "§ 4\nHaftung\nDie Haftung ist beschränkt."
    assert clauses[0].text == "Clause 12.3 Escrow\nThe buyer pays into escrow."


def test_a_letter_with_one_numbered_point_has_no_clauses():
    assert split_clauses("Sehr geehrte Damen und Herren,\n1. Zahlung\nBitte zahlen Sie bis Freitag.\n") == []


def test_the_notable_clauses_artifact_wins_over_the_rules(onto):
    text = "§ 1 Freistellung\nDer Arbeitnehmer wird freigestellt.\n§ 2 Abfindung\nEUR 10.000.\n"
    notable = notable_types([{"clause_type": "termination", "locus": "§ 1 Freistellung"}])
    assert typed(text, onto, notable) == [("§ 1", "Freistellung", "termination"), ("§ 2", "Abfindung", "severance")]
    assert typed(text, onto) == [("§ 1", "Freistellung", "indemnity"), ("§ 2", "Abfindung", "severance")]


def test_clause_ordinals_start_at_1000_or_above_the_passages():
    assert (clause_base(0), clause_base(999), clause_base(1000), clause_base(1001), clause_base(4500)) == (
        1000, 1000, 1000, 2000, 5000)


def test_run_in_headings_of_a_pdf_whose_lines_wrap_mid_sentence(onto):
    """The repository's signed supply agreement: each § heading runs into its clause's text on the same line
    (``§ 9 Haftung. Die Haftung …``), and the line after it may start with a noun (German capitals)."""
    path = (Path(__file__).parents[2] / "samples" / "estate" / "Mandate" /
            "2024-017 Lindqvist Möbel GmbH gg. Nordlicht Logistik AG" / "02 Verträge" /
            "Rahmenliefervertrag 2022 (unterzeichnet).pdf")
    text = convert_pdf(path.read_bytes(), path.name).text or ""
    assert [(n, h) for n, h, _t in typed(text, onto)] == [
        ("§ 1", "Gegenstand"), ("§ 4", "Liefertermine"), ("§ 9", "Haftung")]
    assert typed(text, onto)[2][2] == "liability"
    # a statutory reference is still prose, run in or not
    cited = split_clauses("§ 3 Abs. 1 des Vertrags gilt. Die Frist läuft.\n§ 4 Zahlung\n§ 5 Haftung\n")
    assert [c.number for c in cited] == ["§ 4", "§ 5"]
