"""What is not a party, the firm under its other spellings, renamed companies and legal-form variants as one
party, and display names that do not depend on which document came first (ki.domain.entities)."""

from __future__ import annotations

import pytest

from ki.domain.entities.mentions import find_mentions
from ki.domain.entities.names import canonical_name, is_party_name, name_key

FIRM = ["Fairbairn Stroud LLP"]


def names(text: str, firm: list[str] | None = None) -> list[tuple[str, str, bool]]:
    return [(m.name, m.kind, m.is_firm) for m in find_mentions(text, firm_names=firm or [])]


# ---------------------------------------------------------------- descriptions containing a legal form
@pytest.mark.parametrize("text", [
    "THE COMPANIES ACT 2006\nPRIVATE COMPANY LIMITED BY SHARES\nARTICLES OF ASSOCIATION",
    "A Private Company Limited by Shares",
    "PUBLIC COMPANY LIMITED BY SHARES",
    "COMPANY LIMITED BY GUARANTEE",
    "Company Incorporated in England and Wales",
    "The Company Limited",
])
def test_a_description_with_a_legal_form_is_no_party(text):
    assert names(text) == []


def test_the_company_described_keeps_its_name():
    text = "Harbour Crest Holdings Limited, a private company limited by shares incorporated in England and Wales"
    assert names(text) == [("Harbour Crest Holdings Limited", "company", False)]


# ---------------------------------------------------------------- role and capacity labels
@pytest.mark.parametrize("text", [
    "Buyer's Solicitors", "Seller's Solicitors: see below", "Landlord's Solicitors", "Claimant's Solicitors",
    "Tenant Solicitors", "Purchaser's Solicitors", "Käuferin Rechtsanwälte", "Kanzlei der Mandantin",
])
def test_a_role_label_is_no_party(text):
    assert names(text) == []


def test_a_role_label_names_the_party_after_it():
    text = "Buyer's Solicitors: Kendrick Pryor LLP\nSeller's Solicitors: Fairbairn & Stroud"
    assert names(text, FIRM) == [("Kendrick Pryor LLP", "law_firm", False), ("Fairbairn & Stroud", "law_firm", True)]


@pytest.mark.parametrize("name", ["PRIVATE COMPANY LIMITED", "Incorporated", "Limited", "GmbH", "Buyer's Solicitors",
                                  "the Seller's solicitors", "Company Limited", "Holding B.V."])
def test_names_without_a_proper_name_head(name):
    assert not is_party_name(name)


@pytest.mark.parametrize("name", ["Harbour Crest Holdings Limited", "Fairbairn & Stroud", "Polder Holding B.V.",
                                  "Lindqvist Möbel GmbH", "Dr. Nagel & Kollegen", "Marks and Spencer plc"])
def test_names_with_a_proper_name_head(name):
    assert is_party_name(name)


# ---------------------------------------------------------------- the firm's own spellings
@pytest.mark.parametrize("written", [
    "Fairbairn & Stroud", "Fairbairn and Stroud", "Fairbairn Stroud Solicitors", "FAIRBAIRN STROUD",
    "Fairbairn Stroud Rechtsanwälte", "Fairbairn, Stroud LLP", "Fairbairn Stroud Advocaten", "Fairbairn Stroud Avocats",
    "Fairbairn Stroud Partnerschaft mbB",
])
def test_the_firm_under_another_spelling_is_the_firm(written):
    found = names(f"With compliments of {written}.\nRegards", FIRM)
    assert [(n, k, f) for n, k, f in found] == [(written, "law_firm", True)]


def test_another_firm_sharing_one_word_is_not_the_firm():
    assert names("Fairbairn Holdings Ltd and Stroud Legal LLP", FIRM) == [
        ("Fairbairn Holdings Ltd", "company", False), ("Stroud Legal LLP", "law_firm", False)]


# ---------------------------------------------------------------- renamed companies, legal-form variants
@pytest.mark.parametrize(("text", "current", "former"), [
    ("Larkspur Holdings Limited (formerly Larkspur Estates Limited)", "Larkspur Holdings Limited",
     "Larkspur Estates Limited"),
    ("Larkspur Holdings Ltd, formerly known as Larkspur Estates Ltd,", "Larkspur Holdings Ltd", "Larkspur Estates Ltd"),
    ("Larkspur Holdings Ltd (previously Larkspur Estates Ltd)", "Larkspur Holdings Ltd", "Larkspur Estates Ltd"),
    ("Nordwind Logistik GmbH (vormals Nordwind Spedition GmbH)", "Nordwind Logistik GmbH", "Nordwind Spedition GmbH"),
    ("Polder Vastgoed B.V., voorheen Polder Holding B.V.", "Polder Vastgoed B.V.", "Polder Holding B.V."),
    ("Larkspur Estates Ltd, now known as Larkspur Holdings Ltd", "Larkspur Holdings Ltd", "Larkspur Estates Ltd"),
    ("CERTIFICATE OF INCORPORATION ON CHANGE OF NAME\nCompany No. 01234567\nThe Registrar of Companies for England "
     "and Wales hereby certifies that\nLARKSPUR ESTATES LIMITED\nhaving by special resolution changed its name, is "
     "now incorporated under the name of\nLARKSPUR HOLDINGS LIMITED", "LARKSPUR HOLDINGS LIMITED",
     "LARKSPUR ESTATES LIMITED"),
])
def test_a_renamed_company_is_one_party_with_its_former_name(text, current, former):
    found = find_mentions(text)
    assert [(m.name, m.former_names) for m in found] == [(current, [former])]
    assert len(found[0].spans) == 2


@pytest.mark.parametrize(("a", "b"), [
    ("Larkspur Holdings Ltd", "Larkspur Holdings Limited"), ("Larkspur Holdings Ltd.", "LARKSPUR HOLDINGS LTD"),
    ("Eiderhof Bau GmbH", "Eiderhof Bau Gesellschaft mit beschränkter Haftung"),
    ("Eiderhof Bau GmbH", "Eiderhof Bau G.m.b.H."),
    ("Marks & Spencer plc", "Marks and Spencer Public Limited Company"), ("Polder Holding B.V.", "Polder Holding BV"),
])
def test_legal_form_variants_are_one_name(a, b):
    assert name_key(a).key == name_key(b).key


# ---------------------------------------------------------------- display names
def test_a_display_name_avoids_titles_salutations_and_capitals_while_another_form_exists():
    assert canonical_name({"Dr. Jonas Weller": 5, "Jonas Weller": 1}, kind="person") == "Jonas Weller"
    assert canonical_name({"Herrn Jonas Weller": 2, "Jonas Weller": 1}, kind="person") == "Jonas Weller"
    assert canonical_name({"BRANDT KOLLMAR Rechtsanwälte": 9, "Brandt Kollmar Rechtsanwälte": 1},
                          kind="law_firm") == "Brandt Kollmar Rechtsanwälte"
    assert canonical_name({"Dr. Jonas Weller": 1}, kind="person") == "Dr. Jonas Weller"   # the only form
    assert canonical_name({"KPMG AG": 2}, kind="company") == "KPMG AG"


def test_a_display_name_is_the_most_frequent_form_with_a_fixed_tie_rule():
    assert canonical_name({"Larkspur Holdings Ltd": 3, "Larkspur Holdings Limited": 2}) == "Larkspur Holdings Ltd"
    tie = {"Larkspur Holdings Limited": 2, "Larkspur Holdings Ltd.": 2}
    assert canonical_name(tie) == canonical_name(dict(reversed(list(tie.items())))) == "Larkspur Holdings Ltd."


def test_a_former_name_is_never_the_display_name_while_the_current_one_is_known():
    spellings = {"Larkspur Estates Limited": 7, "Larkspur Holdings Limited": 1}
    assert canonical_name(spellings, former=["Larkspur Estates Ltd"]) == "Larkspur Holdings Limited"
