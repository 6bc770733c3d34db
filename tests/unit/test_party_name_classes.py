"""Party names in the forms firms write them (spec insertion-pipeline.md "Extract metadata", parties): courts in any
capitalisation and either place order, legal forms in any dotting, persons by initials and surname in an
English address block or behind a ``Client:`` label, a party in brackets in an attendance line, a law firm known
only by its letterhead, sentence ends and descriptions never glued into a name. Each test writes out the input
that failed before. Invented text, not corpus files.
"""

from __future__ import annotations

from ki.domain.entities.mentions import find_mentions
from ki.domain.entities.names import name_key


def found(text: str, firm: list[str] | None = None) -> list[tuple[str, str]]:
    return [(m.name, m.kind) for m in find_mentions(text, firm_names=firm)]


def test_english_courts_in_capitals():
    assert found("IN THE COUNTY COURT AT LEEDS\nClaim No: J65BM889\nBETWEEN:") == [("COUNTY COURT AT LEEDS", "court")]
    assert found("IN THE EMPLOYMENT TRIBUNAL (LEEDS)\nCase") == [("EMPLOYMENT TRIBUNAL (LEEDS)", "court")]
    assert found("before the Crown Court at Bristol") == [("Crown Court at Bristol", "court")]
    assert found("IN THE COURT OF APPEAL (CIVIL DIVISION)") == [("COURT OF APPEAL", "court")]
    assert found("LANDGERICHT HAMBURG\nIm Namen des Volkes") == [("LANDGERICHT HAMBURG", "court")]
    # the lower-case words are ordinary words, not a court
    assert found("the county court at leeds is closed") == []


def test_the_high_court_with_its_division_and_list_is_one_court():
    text = "IN THE HIGH COURT OF JUSTICE, KING'S BENCH DIVISION, COMMERCIAL COURT\nClaim No: CL-2022-000291"
    assert found(text) == [("THE HIGH COURT OF JUSTICE, KING'S BENCH DIVISION, COMMERCIAL COURT", "court")]
    assert name_key(found(text)[0][0], kind="court").key == name_key(
        "High Court of Justice, King's Bench Division, Commercial Court", kind="court").key
    assert found("High Court of Justice, Chancery Division\nBetween") == [
        ("High Court of Justice, Chancery Division", "court")]


def test_an_employment_tribunal_named_by_a_place_of_two_words_either_side():
    assert found("London Central Employment Tribunal\nCase number: 2296772/2024") == [
        ("London Central Employment Tribunal", "court")]
    assert found("Employment Tribunal (London Central)\nCase number") == [
        ("Employment Tribunal (London Central)", "court")]
    # a party label before the tribunal is no place
    assert found("Claimant Employment Tribunal") == [("Employment Tribunal", "court")]


def test_an_english_court_is_one_key_whichever_side_its_place_stands():
    keys = {name_key(n, kind="court").key for n in ("London Central Employment Tribunal",
                                                    "Employment Tribunal (London Central)")}
    assert keys == {"employment tribunal london central"}
    keys = {name_key(n, kind="court").key for n in ("COUNTY COURT AT LEEDS", "Leeds County Court",
                                                    "County Court at Leeds")}
    assert keys == {"county court leeds"}
    assert name_key("Employment Tribunal (Leeds)", kind="court").key != name_key(
        "Employment Tribunal (London South)", kind="court").key


def test_legal_forms_in_any_dotting():
    assert found("between Ridgeway Engineering p.l.c. and Northgate Energy Inc.") == [
        ("Ridgeway Engineering p.l.c.", "company"), ("Northgate Energy Inc.", "company")]
    assert found("RIDGEWAY ENGINEERING P.L.C.\nClaimant") == [("RIDGEWAY ENGINEERING P.L.C.", "company")]
    assert found("Acme Partners L.P. is the investor") == [("Acme Partners L.P.", "company")]
    keys = {name_key(n).key for n in ("Ridgeway Engineering p.l.c.", "Ridgeway Engineering PLC",
                                      "Ridgeway Engineering plc", "RIDGEWAY ENGINEERING P.L.C.")}
    assert keys == {"ridgeway engineering|plc"}


def test_a_person_in_an_english_address_block_by_full_name_or_initials():
    assert found("Our ref: 74625-001\nRobert Danvers\n115 King Street\nLeeds LS1 9JR\n3rd October 2023") == [
        ("Robert Danvers", "person")]
    assert found("Our ref: 74625-002\nR. Danvers\n115 King Street\nLeeds LS1 9JR\nLondon, 10th July 2023") == [
        ("R. Danvers", "person")]
    assert found("Robert Danvers\n115 King Street, Leeds LS1 9JR\nLeeds, 17th October 2023") == [
        ("Robert Danvers", "person")]
    assert found("Bas Brouwer\nKerkstraat 12\n6811 AB Arnhem") == [("Bas Brouwer", "person")]
    # a signature: the person's title, not an address, follows
    assert found("Samuel Harcourt\nPartner\n1 Moorgate Place\nLondon EC2R 6EA") == []


def test_a_person_behind_a_client_label_with_a_bracketed_note():
    assert found("INVOICE\nClient: Robert Danvers (client no. 74625)\nMatter: 74625-001") == [
        ("Robert Danvers", "person")]
    assert found("Client: R. Danvers (client no. 74625)\n") == [("R. Danvers", "person")]
    assert found("Opdrachtgever: Marloes de Boer\n") == [("Marloes de Boer", "person")]


def test_the_party_in_brackets_in_an_attendance_line():
    text = "ATTENDANCE NOTE\nAttending: Philippa Whitmore, Robert Danvers (Robert Danvers)\n\nCall with the client"
    assert found(text) == [("Robert Danvers", "person")]
    assert found("Aanwezig: Sanne Bakker, Bas Brouwer (Bas Brouwer)\n") == [("Bas Brouwer", "person")]
    # the person who attended for a company is no party; the company is
    assert found("Attending: Philippa Whitmore, Alistair Ogilvie (Holloway Media Limited)\n") == [
        ("Holloway Media Limited", "company")]
    # brackets elsewhere name no party
    assert found("We spoke to Robert Danvers (Robert Danvers) today.") == []


def test_a_letterhead_without_descriptor_is_a_law_firm_when_the_writer_acts_for_someone():
    text = ("Ogilvie Marston\n159 Cheapside, Cambridge CB2 6SH\nWhitcombe Hale\nFor the attention of Samuel Harcourt\n"
            "Dear Mr Harcourt\nWe act for Bluefield Media Inc. and refer to your letter.")
    assert found(text, ["Whitcombe Hale LLP"])[0] == ("Ogilvie Marston", "law_firm")
    # a private person writing from home stays a person
    text = "Robert Danvers\n115 King Street, Leeds LS1 9JR\nWhitcombe Hale LLP\nDear Mr Harcourt\nPlease call me."
    assert found(text, ["Whitcombe Hale LLP"])[0] == ("Robert Danvers", "person")


def test_a_sentence_end_is_not_part_of_a_law_firm_name():
    text = ("1. The Claimant replies to the Defence dated 15th May 2023.\n"
            "Solicitors for the Claimant: Whitcombe Hale LLP (ref. 89703-001)")
    assert found(text) == [("Whitcombe Hale LLP", "law_firm")]
    assert found("Received on 3 May 2023. Whitcombe Hale Solicitors act for the buyer.") == [
        ("Whitcombe Hale Solicitors", "law_firm")]
    assert found("Smith Bros. Ltd") == [("Smith Bros. Ltd", "company")]


def test_two_companies_in_a_party_list_are_no_person():
    text = "Parties: Pennant Healthcare Limited and Larkspur Energy B.V.\nThese heads of terms"
    assert found(text) == [("Pennant Healthcare Limited", "company"), ("Larkspur Energy B.V.", "company")]
    assert found("Parties: Niamh Ogilvie and Caldera Holdings Limited") == [
        ("Niamh Ogilvie", "person"), ("Caldera Holdings Limited", "company")]


def test_a_description_under_a_name_is_not_glued_to_it():
    text = "WRITTEN RESOLUTION OF THE SHAREHOLDERS\nof Robert Danvers\nPRIVATE COMPANY LIMITED BY SHARES\nCirculation"
    assert [k for _, k in found(text)] == []
    assert found("Klage gegen die Weserfeld\nUmwelttechnik AG wegen") == [("Weserfeld Umwelttechnik AG", "company")]


def test_the_company_being_taken_over_is_a_third_party_in_dutch_and_french():
    from ki.domain.entities.role_cues import add_role_hints

    def hints(text: str) -> list[tuple[str, list[tuple[str, str]]]]:
        mentions = find_mentions(text)
        add_role_hints(text, mentions)
        return [(m.name, m.hints) for m in mentions]

    assert hints("Opdrachtbevestiging – Project Zeilboot – overname De Jong Transport N.V.\nGeachte") == [
        ("De Jong Transport N.V.", [("other", "inferred")])]
    assert hints('De koper verwerft alle aandelen in Zuiderwaard Energie B.V. (de "Vennootschap").') == [
        ("Zuiderwaard Energie B.V.", [("other", "inferred")])]
    assert hints("Projet Voile – acquisition de Lumière SAS") == [("Lumière SAS", [("other", "inferred")])]
    assert hints("Zuiderwaard Energie B.V. verkoopt de machines.") == [("Zuiderwaard Energie B.V.", [])]


def test_a_folder_inside_a_clients_folder_names_the_client():
    from ki.domain.metadata.matter import folder_hints

    def hinted(path: str, text: str) -> list[tuple[str, list[tuple[str, str]]]]:
        mentions = find_mentions(text)
        folder_hints(path, None, mentions)
        return [(m.name, m.hints) for m in mentions]

    text = "Notulen\nSmit Holding B.V. en Van Dijk B.V. komen overeen"
    assert hinted("Cliënten/Smit Holding B.V/2023-05-01 Notulen.docx", text) == [
        ("Smit Holding B.V.", [("client", "folder")]), ("Van Dijk B.V.", [])]
    text = "Client: Robert Danvers (client no. 74625)\nRespondent: Holloway Media Limited\n"
    assert hinted("Clients/Robert Danvers (74625)/Invoice.pdf", text) == [
        ("Robert Danvers", [("client", "folder")]), ("Holloway Media Limited", [])]
    assert hinted("Clients/Greyfriars Capital LLC (34223)/Memo.docx", "Greyfriars Capital LLC and Kestrel Ltd") == [
        ("Greyfriars Capital LLC", [("client", "folder")]), ("Kestrel Ltd", [])]
    # a folder outside a clients folder names nobody by itself; a reference and subject name no client
    assert hinted("Archiv/Smit Holding B.V/Notulen.docx", "Smit Holding B.V.") == [("Smit Holding B.V.", [])]
    assert hinted("Clients/DRIF-2022-007 Supply and NDA/NDA.docx", "Drift Systems GmbH") == [
        ("Drift Systems GmbH", [])]


def _hints(text: str, firm: list[str] | None = None, title: str = "") -> list[tuple[str, str, list]]:
    from ki.domain.entities.role_cues import add_role_hints

    mentions = find_mentions(text, firm_names=firm)
    add_role_hints(text, mentions, title=title, firm_names=firm)
    return [(m.name, m.kind, m.hints) for m in mentions]


def test_a_dutch_engagement_letter_and_invoice_name_the_client():
    firm = ["Van Houten Brink Advocaten N.V.", "Van Houten Brink"]
    letter = ("VAN HOUTEN BRINK\nZuidplein 120 · 1077 XV Amsterdam\nSmit Holding B.V.\nt.a.v. Thijs de Vries\n"
              "Kerkstraat 185\n6863 ES Arnhem\nOns kenmerk: 46326.002/IV\nAmsterdam, 25 april 2023\n"
              "Opdrachtbevestiging – raamovereenkomst Meijer Zorg\nGeachte heer de Vries,\n"
              "Wij hebben een conflictcheck uitgevoerd ten aanzien van Meijer Zorg BV.")
    assert _hints(letter, firm, title="VAN HOUTEN BRINK") == [
        ("VAN HOUTEN BRINK", "law_firm", []), ("Smit Holding B.V.", "company", [("client", "stated")]),
        ("Meijer Zorg BV", "company", [])]
    invoice = ("VAN HOUTEN BRINK\nZuidplein 120 · 1077 XV Amsterdam\nDECLARATIE\nDatum: 08-09-2022\n"
               "Cliënt: Smit Holding BV (cliëntnummer 46326)\nDossier: 46326.001 – statutenwijziging\n")
    assert _hints(invoice, firm)[1] == ("Smit Holding BV", "company", [("client", "stated")])
    assert _hints("Hartelijk dank voor uw opdracht aan Van Houten Brink Advocaten N.V. om Smit Holding B.V. bij "
                  "te staan.", firm)[1] == ("Smit Holding B.V.", "company", [("client", "stated")])
    assert _hints("Nous représentons Lumière SAS dans ce dossier.")[0] == ("Lumière SAS", "company",
                                                                          [("client", "stated")])


def test_a_report_prepared_by_the_firm_for_a_client():
    firm = ["Whitcombe Hale LLP"]
    text = ("LEGAL DUE DILIGENCE REPORT\nProject Osprey – Caldera Retail Limited\nReport date: March 31, 2023\n"
            "Prepared by Whitcombe Hale LLP for PENNANT HEALTHCARE LIMITED.\n")
    assert _hints(text, firm) == [("Caldera Retail Limited", "company", []), ("Whitcombe Hale LLP", "law_firm", []),
                                  ("PENNANT HEALTHCARE LIMITED", "company", [("client", "stated")])]
    text = ("JURIDISCH DUE DILIGENCE RAPPORT\nProject Kade – Zuiderwaard Energie B.V.\n"
            "Datum rapport: 21 augustus 2023\n"
            "Opgesteld door Van Houten Brink Advocaten N.V. voor Zuiderwaard Techniek BV.\n")
    assert _hints(text, ["Van Houten Brink Advocaten N.V."]) == [
        ("Zuiderwaard Energie B.V.", "company", []), ("Van Houten Brink Advocaten N.V", "law_firm", []),
        ("Zuiderwaard Techniek BV", "company", [("client", "stated")])]


def test_the_client_another_law_firm_names_is_the_counterparty():
    firm = ["Whitcombe Hale LLP", "Whitcombe Hale"]
    text = ("Ogilvie Marston\n159 Cheapside, Cambridge CB2 6SH\nWhitcombe Hale\nFor the attention of Samuel Harcourt\n"
            "1 Moorgate Place\nLondon EC2R 6EA\nWestmarch Retail Ltd. v Bluefield Media Inc.\nDear Mr Harcourt\n"
            "We act for Bluefield Media Inc. and refer to your letter.")
    assert [(n, h) for n, _, h in _hints(text, firm)] == [
        ("Ogilvie Marston", []), ("Whitcombe Hale", []), ("Westmarch Retail Ltd.", []),
        ("Bluefield Media Inc.", [("counterparty", "stated")])]
    # the firm's own letter: the client it acts for is the client
    text = ("WHITCOMBE HALE\n1 Moorgate Place, London EC2R 6EA\nTamarind Property S.à r.l.\n136 Bishopsgate\n"
            "Dear Ms Marston\nWe act for Oakmont Retail Ltd. concerning the unpaid invoices.")
    assert [(n, h) for n, _, h in _hints(text, firm)][-1] == ("Oakmont Retail Ltd.", [("client", "stated")])
