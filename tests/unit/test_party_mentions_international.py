"""Party mentions of English, Dutch and DMS-export documents (issue 16 item 7; spec insertion-pipeline.md
"Extract metadata"): legal forms apart from the name, persons with an English address or after a party label,
Dutch and English courts, street names never persons. Invented text, not corpus files.
"""

from __future__ import annotations

from ki.domain.entities.mentions import KnownName, find_mentions
from ki.domain.metadata.matter import MatterContext


def found(text: str) -> list[tuple[str, str]]:
    return [(m.name, m.kind) for m in find_mentions(text)]


def test_a_title_in_capitals_is_not_a_company_with_a_glued_legal_form():
    text = ("SHARE PURCHASE AGREEMENT\nBETWEEN:\n(1) CALDERA HOLDINGS LIMITED, company number 09860411;\n"
            "LEASE\nHOUSE RULES\nThe Rheintal-GmbH agrees.")
    assert found(text) == [("CALDERA HOLDINGS LIMITED", "company"), ("Rheintal-GmbH", "company")]


def test_an_english_party_with_an_address_and_no_street_as_a_person():
    text = "(2) Niamh Ogilvie of 143 Colmore Row, Reading RG1 5BX (the \"Buyer\")."
    assert found(text) == [("Niamh Ogilvie", "person")]


def test_persons_after_party_labels_with_particles_and_initials():
    text = ("Rechtbank Rotterdam, kantonrechter\nVerzoekster: De Vries Techniek B.V.\nWerknemer: Marloes de Boer\n"
            "Employment Tribunal (Leeds)\nClaimant: N. Ogilvie\nRespondent: Holloway Technologies Limited\n")
    assert found(text) == [("Rechtbank Rotterdam", "court"), ("De Vries Techniek B.V.", "company"),
                           ("Marloes de Boer", "person"), ("Employment Tribunal (Leeds)", "court"),
                           ("N. Ogilvie", "person"), ("Holloway Technologies Limited", "company")]
    assert found("The claimant: see below") == []


def test_dutch_and_english_courts():
    assert found("RECHTBANK GELDERLAND\nin de zaak van") == [("RECHTBANK GELDERLAND", "court")]
    assert found("hoger beroep bij het Gerechtshof Den Haag en de Hoge Raad") == [
        ("Gerechtshof Den Haag", "court"), ("Hoge Raad", "court")]
    assert found("issued in the High Court and the County Court at Leeds") == [
        ("High Court", "court"), ("County Court at Leeds", "court")]


def test_a_party_label_takes_only_a_capitalised_name():
    assert found("Werknemer: zie hieronder\nclaimant: the employee") == []


def test_a_person_and_a_company_in_a_party_list_are_two_mentions():
    """english-s1's Heads of Terms: read as one company, the pair linked to Niamh or to Caldera depending on
    which entity existed first (the run-to-run party F1 difference)."""
    assert found("HEADS OF TERMS\nParties: Niamh Ogilvie and Caldera Holdings Limited\n") == [
        ("Niamh Ogilvie", "person"), ("Caldera Holdings Limited", "company")]
    assert found("Vertrag zwischen Almut Fehrs und Weserfeld Umwelttechnik GmbH") == [
        ("Almut Fehrs", "person"), ("Weserfeld Umwelttechnik GmbH", "company")]
    # "and Sons / Partners" belongs to the company's name; outside a party list nothing is split
    assert found("Parties: John Smith and Sons Limited") == [("John Smith and Sons Limited", "company")]
    assert found("We refer to Niamh Ogilvie and Caldera Holdings Limited.") == [
        ("Niamh Ogilvie and Caldera Holdings Limited", "company")]


def test_a_known_spelling_of_a_court_does_not_change_the_mention_written():
    """Which aliases the firm holds depends on which documents came first; the mention must not (english-s1:
    "Employment Tribunal" in one run, "Employment Tribunal (Leeds" in another, for the same heading)."""
    text = "Employment Tribunal (Leeds)\nCase number: 2225711/2022\nClaimant: N. Ogilvie\n"
    expected = [("Employment Tribunal (Leeds)", "court"), ("N. Ogilvie", "person")]
    for alias in (None, "Employment Tribunal", "Employment Tribunal (Leeds)", "Employment Tribunal (Leeds"):
        known = [KnownName(entity_id=5, name=alias, kind="court")] if alias else []
        assert [(m.name, m.kind) for m in find_mentions(text, known=known)] == expected, alias


def test_a_luxembourg_form_in_capitals():
    """Found by rule, not only once another document made the entity known (english-s1: the landlord of a lease
    in capitals was a party in one run and missing in another)."""
    text = '(1) HARBOUR CREST CAPITAL S.À R.L., a company incorporated in Luxembourg (the "Landlord");'
    assert found(text) == [("HARBOUR CREST CAPITAL S.À R.L.", "company")]


def test_the_imported_client_is_found_whether_or_not_its_entity_exists_yet():
    """english-s1: "Call with the client about Oliver Redgrave – …" named the client only when another file had
    already made Oliver Redgrave an entity; the imported list is known before any file."""
    text = "ATTENDANCE NOTE\nCall with the client about Oliver Redgrave – unfair dismissal claim.\n"
    person = MatterContext("matter:1", 1, "287898.0001", True, None, "Oliver Redgrave").client_gazetteer()
    assert person == [KnownName(None, "Oliver Redgrave", "person")]
    assert [(m.name, m.kind) for m in find_mentions(text, known=person)] == [("Oliver Redgrave", "person")]
    company = MatterContext("matter:2", 2, "343952.0001", True, None, "Harbour Crest Retail Limited")
    assert company.client_gazetteer() == [KnownName(None, "Harbour Crest Retail Limited", "company")]
    assert MatterContext("matter:3", 3, "2024-0001", False, None, "Oliver Redgrave").client_gazetteer() == []


def test_dutch_company_names_keep_their_particles():
    """``Van der``, ``van den``, ``Van 't`` begin a company's name; broken over two lines of a PDF too."""
    assert found("Wij treden op namens Van der Linden Zorg N.V. en reageren.") == [
        ("Van der Linden Zorg N.V.", "company")]
    assert found("Geschil met van den Berg Bouw BV over de oplevering") == [("van den Berg Bouw BV", "company")]
    assert found("VAN DER LINDEN ZORG N.V.\nGedaagde") == [("VAN DER LINDEN ZORG N.V.", "company")]
    assert found("Jansen van der Berg Holding B.V. verklaart") == [("Jansen van der Berg Holding B.V.", "company")]
    assert found("de raamovereenkomst tussen Van der Veen\nInstallatietechniek B.V. en u.") == [
        ("Van der Veen Installatietechniek B.V.", "company")]
    # a German article stays an article: the Geschäftsführer is no part of the company's name
    assert found("Der Geschäftsführer der Rheintal GmbH erklärt") == [("Rheintal GmbH", "company")]


def test_an_undotted_sa_is_a_legal_form():
    assert found("De koper, Noordzee International SA, gevestigd te Brussel") == [
        ("Noordzee International SA", "company")]
    assert found("NOORDZEE INTERNATIONAL SA\nAvenue Louise 54") == [("NOORDZEE INTERNATIONAL SA", "company")]


def test_a_registration_court_in_a_dutch_or_english_register_clause_is_no_party():
    text = ("Duinrand Europe GmbH, gevestigd te Düsseldorf, ingeschreven bij Amtsgericht Düsseldorf onder nummer "
            "HRB 94824, hierna: \"Koper\"")
    assert found(text) == [("Duinrand Europe GmbH", "company")]
    assert found("Rheintal GmbH, registered with the Amtsgericht Köln under no. HRB 1234") == [
        ("Rheintal GmbH", "company")]
    assert found("Klage beim Amtsgericht Düsseldorf eingereicht") == [("Amtsgericht Düsseldorf", "court")]


def test_a_dutch_post_code_is_no_landgericht():
    assert found("Kerkstraat 12\n5674 LG Eindhoven") == []
    assert found("Urteil des LG Köln vom 3. März") == [("LG Köln", "court")]


def test_a_law_firm_named_by_a_dutch_descriptor():
    assert found("Advocatenkantoor Brouwer\nZuidas 146, 3068 PL Rotterdam") == [
        ("Advocatenkantoor Brouwer", "law_firm")]


def test_a_person_residing_somewhere_is_a_party():
    text = ("DE ONDERGETEKENDEN:\n1. Van Leeuwen Bouw B.V., statutair gevestigd te Zwolle;\n"
            "2. Bas Brouwer, wonende te Arnhem, hierna: \"Werknemer\".")
    assert found(text) == [("Van Leeuwen Bouw B.V.", "company"), ("Bas Brouwer", "person")]
    assert found("Jan van der Berg, woonachtig te Utrecht") == [("Jan van der Berg", "person")]
    assert found("Almut Fehrs, wohnhaft in Hamburg") == [("Almut Fehrs", "person")]
    assert found("Niamh Ogilvie, residing at Reading") == [("Niamh Ogilvie", "person")]


def test_a_person_after_a_company_in_a_party_list():
    assert found("ARBEIDSOVEREENKOMST\ntussen De Vries Techniek B.V. en Marloes de Boer\nDatum: 17 april 2019") == [
        ("De Vries Techniek B.V.", "company"), ("Marloes de Boer", "person")]
    # not outside a party list: a company and a signatory's name in running text
    assert found("Overleg met De Vries Techniek B.V. en Marloes de Boer.") == [("De Vries Techniek B.V.", "company")]
