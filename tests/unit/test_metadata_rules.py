"""The rules reading of a document: type, date, language, title, mentions and role hints; cases R04–R07.

Spec: insertion-pipeline.md "Extract metadata"; the shared cases' CASE.md values (R04 parties without
surrogates, R06 content-control text, identifiers and parties, R07 identifier and amount).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from ki.adapters.convert.router import convert_bytes
from ki.config.settings import KiConfig
from ki.domain.entities.mentions import find_mentions
from ki.domain.entities.role_cues import add_role_hints
from ki.domain.metadata.amounts import find_amounts
from ki.domain.metadata.dates import document_date, parse_date
from ki.domain.metadata.language import detect_language
from ki.domain.metadata.policy import read_document
from ki.domain.metadata.typing_rules import choose_type, typing_facts
from ki.domain.ontology import Ontology
from ki.domain.ontology.tools import ontology_tools

FIRM = ["Kessler Claußen Rechtsanwälte PartG mbB", "Kessler Claußen", "Kessler Claußen Attorneys at Law"]


def convert_case(cases_dir: Path, case: str, name: str) -> dict:
    path = next(cases_dir.glob(f"{case}*")) / name
    return convert_bytes(path.read_bytes(), name, KiConfig()).model_dump(mode="json")


@pytest.fixture(scope="module")
def tools(shared):
    doc = json.loads((shared / "corpus" / "estate-dev" / "truth.json").read_text(encoding="utf-8"))
    return {t.name: t for t in ontology_tools(Ontology.from_document(doc))}


@pytest.fixture(scope="module")
def search(tools):
    tool = tools["ontology_search"]
    return lambda q: tool.fn(tool.args_model(query=q, limit=20))["results"]


@pytest.fixture(scope="module")
def walk(tools):
    def run(kind, node_id):
        if kind == "children":
            return tools["ontology_children"].fn(tools["ontology_children"].args_model(node_id=node_id))["children"]
        return tools["ontology_node"].fn(tools["ontology_node"].args_model(node_id=node_id))["node"]
    return run


def body(text: str, mail: dict | None = None) -> dict:
    return {"text": text, "format": "eml" if mail else "pdf", "mail": mail}


TYPING = [
    ("Gewerbemietvertrag", "x/Mietvertrag Entwurf.docx", "Gewerbemietvertrag\nzwischen …", "lease"),
    ("Nachtrag Nr. 1 zum Gewerbemietvertrag vom 20.03.2023", "Nachtrag.docx", "Nachtrag …", "amendment"),
    ("Angebot eines Aufhebungsvertrags", "Schreiben an Mitarbeiter.pdf",
     "KESSLER\nIngo Unruh\nAngebot eines Aufhebungsvertrags\nSehr geehrter Herr Unruh,\n…", "letter"),
    ("Mietrückstand – Büroflächen", "2023-05-29 Mietrückstand.pdf",
     "Mietrückstand\nSehr geehrte Frau Dr. Tiedemann,\nWir fordern Sie auf, den Rückstand auszugleichen.",
     "demand_letter"),
    ("Handelsregister B des Amtsgerichts Köln", "Handelsregisterauszug Eiderhof Bau GmbH.pdf", "Abruf vom",
     "register_extract"),
    ("Schedule 1 – Company Details", "Schedule 1 - Company Details.pdf",
     "Schedule 1 – Company Details\nto the Share Purchase Agreement between A GmbH and B AB dated 6 June 2022\n"
     "This Schedule forms an integral part of the Agreement.", "spa"),
    ("Rechtliche Stellungnahme zur Sitzverlegung", "Stellungnahme.docx", "für die Plambeck GmbH", "legal_opinion"),
    ("Replik", "Replik Entwurf v1.docx", "In dem Rechtsstreit A ./. B\nAz.: 27 O 83/24", "brief"),
    ("TELEFAX", "Telefax 2022-05-18.pdf", "TELEFAX\nTo: Kessler\nFrom: Oakmont", "letter"),
    ("Lageplan Büroetage 2. OG", "Anlage 1 Lageplan.pdf", "Anlage 1\nLageplan", None),
    ("Protokoll der Güteverhandlung", "Protokoll Gütetermin.pdf",
     "ArbG Köln\nAktenzeichen: 16 Ca 9417/24\nProtokoll der Güteverhandlung", "hearing_minutes"),
    ("Protokoll der Gesellschafterversammlung", "Protokoll.pdf", "Protokoll der Gesellschafterversammlung",
     "minutes"),
    ("Framework Supply Agreement – signature copies", "Cover letter.pdf",
     "KESSLER\nJacobsen AG\nFramework Supply Agreement – signature copies\nDear Mr Asmussen,\n…", "letter"),
    ("Mängelanzeige – Halle 7", "Mängelanzeige.pdf", "Mängelanzeige – Halle 7\nSehr geehrte Frau Kortmann,\n"
     "Wir fordern Sie auf, den Mangel bis zum 30.06.2021 zu beseitigen.", "letter"),
    ("Forderung aus Rechnung Nr. 2022-760", "Schreiben an Gegenseite.pdf", "X ./. Y – Forderung\nSehr geehrte Frau "
     "Ostendorf,\nfordern wir Sie auf, den Betrag von EUR 183.132,00 bis spätestens 07.07.2022 zu überweisen.",
     "demand_letter"),
]


@pytest.mark.parametrize("title, path, text, expected", TYPING, ids=[t[0][:30] for t in TYPING])
def test_typing_rules_walk_the_search_tool(search, walk, title, path, text, expected):
    node, _ = choose_type(typing_facts(body(text), path, title), search, walk)
    assert node == expected


def test_an_email_is_an_email_whatever_its_subject(search):
    facts = typing_facts(body("Anbei die Klageerwiderung", mail={"subject": "Klageerwiderung"}), "a.eml",
                         "AW: 2024-0099 – Klageerwiderung der Gegenseite")
    assert choose_type(facts, search)[0] == "email"


@pytest.mark.parametrize("text, mtime, expected, source", [
    ("ENTWURF v2 – Stand: 06.03.2023 – Änderungen gegenüber Entwurf v1 vom 20.02.2023 markiert", None,
     dt.date(2023, 3, 6), "label"),
    ("KESSLER\nUnser Zeichen: 2023-0124\nHannover, 02.02.2023\nMandatsvereinbarung", None, dt.date(2023, 2, 2),
     "place_date"),
    ("Engagement Letter\nHannover, 3 November 2023\nDear Mr Fenwick,", None, dt.date(2023, 11, 3), "place_date"),
    ("Handelsregister B\nAbruf vom 24.11.2023 09:44", None, dt.date(2023, 11, 24), "label"),
    ("Der Vertrag beginnt am 15.05.2023.", 1_700_000_000 * 10**9, dt.date(2023, 11, 14), "mtime"),
    ("no date at all", None, None, None),
])
def test_document_date_from_content_else_mtime(text, mtime, expected, source):
    assert document_date({"text": text}, mtime) == (expected, source)


def test_mail_date_is_the_senders_local_date():
    assert document_date({"text": "", "mail": {"date": "2024-03-08T23:30:00+01:00"}}, None)[0] == dt.date(2024, 3, 8)
    assert parse_date("8. März 2023") == dt.date(2023, 3, 8)
    assert parse_date("November 8, 2023") == dt.date(2023, 11, 8)


def test_language():
    assert detect_language("Sehr geehrte Frau Kampmann, anbei die Unterlagen mit der Bitte um Prüfung.") == "de"
    assert detect_language("Dear Ms Kampmann, please find attached the draft for your review.") == "en"
    assert detect_language("") is None


def test_mentions_and_role_hints_of_a_firm_letter():
    text = ("KESSLER CLAUSSEN\nRechtsanwälte · Partnerschaftsgesellschaft mbB\nFeldmann Spedition AG\n"
            "z. Hd. Frau Johanna Fricke\nBrückenring 20\n20197 Hamburg\nHannover, 28.10.2024\n"
            "Juniper Vale Holdings B.V. ./. Feldmann Spedition AG – Forderung aus Rechnung Nr. 2024-512\n"
            "Sehr geehrte Frau Fricke,\nwir zeigen an, dass wir die rechtlichen Interessen der Juniper Vale "
            "Holdings B.V. vertreten.\nKessler Claußen Rechtsanwälte PartG mbB · Sitz Hannover · Amtsgericht "
            "Hannover PR 521 · USt-IdNr. DE732103030")
    mentions = add_role_hints(text, find_mentions(text, firm_names=FIRM), title="Juniper ./. Feldmann",
                              firm_names=FIRM)
    by_name = {m.name: m for m in mentions}
    assert set(by_name) == {"KESSLER CLAUSSEN", "Feldmann Spedition AG", "Juniper Vale Holdings B.V."}
    firm = by_name["KESSLER CLAUSSEN"]
    assert firm.is_firm and {i.value for i in firm.identifiers} == {"PR 521", "DE732103030"}
    assert ("client", "stated") in by_name["Juniper Vale Holdings B.V."].hints
    assert ("counterparty", "inferred") in by_name["Feldmann Spedition AG"].hints
    # the register court that only issues the firm's number is not a party
    assert not any(m.kind == "court" for m in mentions)


def test_pleading_sides_and_represented_by():
    text = ("In dem Rechtsstreit\nder Sonnenhaus Immobilien GmbH & Co. KG, Waldkamp 161, 50225 Köln,\n– Klägerin –\n"
            "Prozessbevollmächtigte: Kessler Claußen Rechtsanwälte PartG mbB\ngegen\ndie Weserfeld Umwelttechnik AG,"
            " Lahnallee 38, 90899 Nürnberg,\n– Beklagte –\nProzessbevollmächtigte: Ramcke Unruh Rechtsanwälte\n"
            "hat die Zivilkammer des Landgerichts Nürnberg-Fürth durch den Richter am Landgericht Eike Nordmann")
    mentions = add_role_hints(text, find_mentions(text, firm_names=FIRM), firm_names=FIRM)
    by_name = {m.name: m for m in mentions}
    assert ("client", "stated") in by_name["Sonnenhaus Immobilien GmbH & Co. KG"].hints
    assert ("counterparty", "stated") in by_name["Weserfeld Umwelttechnik AG"].hints
    assert by_name["Ramcke Unruh Rechtsanwälte"].kind == "law_firm"
    assert [m.name for m in mentions if m.kind == "court"] == ["Landgerichts Nürnberg-Fürth"]


def test_r04_mail_participants_decode_without_surrogates(cases_dir):
    b = convert_case(cases_dir, "R04", "input.eml")
    mail = b["mail"]
    assert (mail["sender"]["name"], mail["sender"]["address"]) == ("José Núñez", "jose.nunez@example.test")
    assert [(a["name"], a["address"]) for a in mail["cc"]] == [("Zoë Ångström", "zoe.angstrom@example.test"),
                                                              ("Łukasz Wiśniewski", "lukasz.w@example.test")]
    reading = read_document(b, "R04/input.eml", None, firm_names=[], known=[])
    assert reading.title == "Entwurf: Vergleich Müller ./. Schröder"
    for value in [reading.title, *(m.name for m in reading.mentions)]:
        assert not any(0xDC80 <= ord(ch) <= 0xDCFF for ch in value)
        value.encode("utf-8")


def test_r06_content_controls_give_identifier_and_parties(cases_dir):
    b = convert_case(cases_dir, "R06", "input.docx")
    reading = read_document(b, "R06/input.docx", None, firm_names=[], known=[])
    assert ("matter_reference", "HF-2024-0193") in {(i.type, i.value) for i in reading.identifiers}
    assert {"Harbor & Finch LLP", "Meridian Freight Ltd"} <= {m.name for m in reading.mentions}


def test_r07_identifier_and_amount_available(cases_dir):
    b = convert_case(cases_dir, "R07", "input.docx")
    reading = read_document(b, "R07/input.docx", None, firm_names=[], known=[])
    assert ("matter_reference", "HF-2024-0193") in {(i.type, i.value) for i in reading.identifiers}
    assert {"currency": "EUR", "value": "25,000", "text": "EUR 25,000"} in find_amounts(b["text"])
