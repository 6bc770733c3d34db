"""Persons written as initials and surname (issue 16; spec insertion-pipeline.md "Extract metadata"): parsing
(``N. Ogilvie``, ``N Ogilvie``, ``Ogilvie, N.``, ``Dr. N. Ogilvie``, ``R. Schmidt``, ``Boer, M. de``), which
full names an abbreviation can be, the one-candidate rule (ambiguous → none), the document-level merge of
mentions in either order of appearance, and the canonical name (the full name, whatever the counts).
Pure functions, no database.
"""

from __future__ import annotations

import pytest

from ki.domain.entities.mentions import find_mentions
from ki.domain.entities.names import canonical_name
from ki.domain.entities.persons import PersonName, abbreviates, expansion, is_abbreviated, natural_order, parse_person


@pytest.mark.parametrize("written, given, surname", [
    ("N. Ogilvie", ("n",), ("ogilvie",)),
    ("N Ogilvie", ("n",), ("ogilvie",)),
    ("Ogilvie, N.", ("n",), ("ogilvie",)),
    ("Dr. N. Ogilvie", ("n",), ("ogilvie",)),
    ("Mr N.J. Ogilvie", ("n", "j"), ("ogilvie",)),
    ("R. Schmidt", ("r",), ("schmidt",)),
    ("Frau Dr. R. Schmidt", ("r",), ("schmidt",)),
    ("H.-P. Müller", ("h", "p"), ("mueller",)),
    ("Boer, M. de", ("m",), ("de", "boer")),
    ("M. de Boer", ("m",), ("de", "boer")),
    ("Nicola Ogilvie", ("nicola",), ("ogilvie",)),
    ("NICOLA OGILVIE", ("nicola",), ("ogilvie",)),
    ("Marloes de Boer", ("marloes",), ("de", "boer")),
    ("Hans-Peter Müller", ("hans-peter",), ("mueller",)),
])
def test_parse_person(written, given, surname):
    assert parse_person(written) == PersonName(given, surname)


@pytest.mark.parametrize("written", ["Ogilvie", "Mr Ogilvie", "", "N. 1234", "A, B, C", "Dr."])
def test_not_a_two_part_person_name(written):
    parsed = parse_person(written)
    assert parsed is None or not parsed.abbreviated and not parsed.full


@pytest.mark.parametrize("short, full, expected", [
    ("N. Ogilvie", "Nicola Ogilvie", True),
    ("Ogilvie, N.", "Nicola Ogilvie", True),
    ("N. J. Ogilvie", "Nicola Jane Ogilvie", True),
    ("N. J. Ogilvie", "Nicola Ogilvie", True),      # a middle name the full spelling leaves out
    ("N. Ogilvie", "Nicola J. Ogilvie", True),
    ("H.-P. Müller", "Hans-Peter Mueller", True),
    ("R. Schmidt", "Rainer Schmidt", True),
    ("M. Ogilvie", "Nicola Ogilvie", False),         # another initial
    ("N. M. Ogilvie", "Nicola Jane Ogilvie", False),  # the second initial disagrees
    ("N. Ogilvy", "Nicola Ogilvie", False),          # another surname
    ("M. Boer", "Marloes de Boer", False),           # the particle belongs to the surname
    ("N. Ogilvie", "N. Ogilvie", False),             # both abbreviated: nothing to expand to
])
def test_abbreviates(short, full, expected):
    assert abbreviates(parse_person(short), parse_person(full)) is expected


def test_expansion_needs_exactly_one_compatible_full_name():
    assert expansion("N. Ogilvie", {1: ["Nicola Ogilvie"], 2: ["Marcus Ogilvie"]}) == 1
    assert expansion("N. Ogilvie", {1: ["Nicola Ogilvie"], 2: ["Niamh Ogilvie"]}) is None  # two N. Ogilvies
    assert expansion("N. Ogilvie", {2: ["Marcus Ogilvie"]}) is None
    assert expansion("Nicola Ogilvie", {1: ["Nicola Ogilvie"]}) is None  # not an abbreviation
    assert expansion("N. Ogilvie", {1: ["NICOLA OGILVIE", "Nicola Ogilvie"]}) == 1  # one key, two spellings


def test_natural_order_and_is_abbreviated():
    assert natural_order("Ogilvie, N.") == "N. Ogilvie"
    assert natural_order("Boer, M. de") == "M. de Boer"
    assert natural_order("Nicola Ogilvie") == "Nicola Ogilvie"
    assert is_abbreviated("N Ogilvie") and is_abbreviated("Dr. N. Ogilvie")
    assert not is_abbreviated("Nicola Ogilvie") and not is_abbreviated("Ogilvie")


def persons(text: str) -> list[tuple[str, int]]:
    return [(m.name, len(m.spans)) for m in find_mentions(text) if m.kind == "person"]


def test_a_document_naming_both_spellings_has_one_mention_in_either_order():
    full_first = "Claimant: Nicola Ogilvie\nRespondent: Holloway Technologies Limited\nClaimant: N. Ogilvie\n"
    short_first = "Claimant: N. Ogilvie\nRespondent: Holloway Technologies Limited\nClaimant: Nicola Ogilvie\n"
    assert persons(full_first) == [("Nicola Ogilvie", 2)]
    assert persons(short_first) == [("Nicola Ogilvie", 2)]


def test_initials_two_full_names_could_be_stay_a_mention_of_their_own():
    text = "Claimant: Nicola Ogilvie\nClaimant: Niamh Ogilvie\nApplicant: N. Ogilvie\n"
    assert persons(text) == [("Nicola Ogilvie", 1), ("Niamh Ogilvie", 1), ("N. Ogilvie", 1)]


def test_initials_in_labels_addresses_and_surname_first():
    assert persons("Claimant: Ogilvie, N.\n") == [("N. Ogilvie", 1)]
    assert persons("Claimant: Dr. N. Ogilvie\n") == [("N. Ogilvie", 1)]
    assert persons("(2) N. Ogilvie of 143 Colmore Row, Reading RG1 5BX") == [("N. Ogilvie", 1)]
    assert persons("Herrn\nR. Schmidt\nLahnstraße 17\n10115 Berlin\n") == [("R. Schmidt", 1)]
    assert persons("Werknemer: M. de Boer\n") == [("M. de Boer", 1)]
    # an undotted initial only after a party label; "A Tenant of 12 …" is a sentence, not a person
    assert persons("Respondent: N Ogilvie\n") == [("N Ogilvie", 1)]
    assert persons("A Tenant of 12 High Street, Leeds") == []


def test_the_full_name_is_canonical_whatever_the_counts():
    spellings = {"N. Ogilvie": 5, "Nicola Ogilvie": 1, "NICOLA OGILVIE": 2}
    assert canonical_name(spellings, kind="person") == "Nicola Ogilvie"
    assert canonical_name({"N. Ogilvie": 3}, kind="person") == "N. Ogilvie"
    # courts keep their rule: a written-out name before an abbreviation
    assert canonical_name({"ArbG Bremen": 3, "Arbeitsgericht Bremen": 1}, kind="court") == "Arbeitsgericht Bremen"
