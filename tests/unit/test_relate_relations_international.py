"""Typed relations in English and Dutch drafting (issue 16 item 1): amendment and answering language, own-date
formulas, citations wrapped across lines, identifier numbers, and annexes nobody cites.

Invented texts (not a generator's): the rules must hold for estates we never see. Pure functions, < 1 s.
"""

from __future__ import annotations

import datetime as dt

from ki.domain.relate.cues import citations
from ki.domain.relate.facts import FileFacts
from ki.domain.relate.policy_decide import decide
from ki.domain.relate.wants import Wants, listed_facts


def facts(path: str, text: str, **kw) -> FileFacts:
    return FileFacts(ref=path, path=path, format=path.rsplit(".", 1)[-1],
                     title=kw.pop("title", text.splitlines()[0]), text=text, content_hash=f"h-{path}", **kw)


def relations(x: FileFacts, pool: list[FileFacts]) -> set[tuple[str, str]]:
    return {(r.type, r.target_ref) for r in decide(x, pool).relations}


def test_variation_amends_the_agreement_dated_by_its_own_formula():
    lease = facts("M/Executed/Underlease.pdf", "UNDERLEASE\nTHIS UNDERLEASE is dated 3rd May 2021\nBETWEEN A and B")
    assert dt.date(2021, 5, 3) in lease.text_dates
    deed = facts("M/Executed/Deed of Variation.pdf", "DEED OF VARIATION\nDated 1 June 2023\n"
                 "This deed varies the underlease dated 3rd May 2021 between the parties.")
    assert relations(deed, [lease]) == {("amends", lease.ref)}


def test_dutch_pleadings_answer_what_they_react_to():
    summons = facts("Z/Dagvaarding.pdf", "DAGVAARDING\nHeden, 4 februari 2024, op verzoek van X B.V., eiseres,\n"
                    "heb ik gedagvaard Y B.V.")
    assert dt.date(2024, 2, 4) in summons.text_dates
    answer = facts("Z/Conclusie van antwoord.pdf", "CONCLUSIE VAN ANTWOORD\n"
                   "1. Gedaagde reageert hierbij op de dagvaarding van 4 februari 2024.\n2. Gedaagde betwist alles.")
    assert relations(answer, [summons]) == {("responds_to", summons.ref)}
    demand = facts("Z/Aanmaning.pdf", "Geachte heer Jansen,\nRotterdam, 2 januari 2024\nU betaalt niet.")
    reply = facts("Z/Reactie.pdf", "Wij treden op namens Y en reageren op uw brief van 2 januari 2024.")
    assert relations(reply, [demand]) == {("responds_to", demand.ref)}


def test_a_citation_wrapped_across_lines_and_amendment_language_on_the_next_line():
    articles = facts("C/Articles of Association (final).docx", "FINAL VERSION – 9 March 2023\nARTICLES OF ASSOCIATION")
    resolution = facts("C/Written resolution.pdf", "WRITTEN RESOLUTION\nCirculation date: 20 March 2023\n"
                       "THAT the draft articles of association dated 9 March\n"
                       "2023 be adopted in substitution for the existing articles.")
    [cite] = [c for c in citations(resolution) if c.date]
    assert cite.date == dt.date(2023, 3, 9)
    assert relations(resolution, [articles]) == {("amends", articles.ref)}


def test_identifier_numbers_are_no_citations():
    invoice = facts("B/Invoice 7.pdf", "INVOICE\nClient: Acme Ltd (client no. 752232)\nClaim no. 2225711/2022")
    assert [c for c in citations(invoice) if c.number] == []


def test_annex_nobody_cites_belongs_to_the_document_it_names_else_the_one_signed_agreement():
    lease = facts("L/Signed/Huurovereenkomst getekend.pdf", "HUUROVEREENKOMST\nGetekend te Delft op 1 mei 2024")
    letter = facts("L/Opdrachtbevestiging huur.pdf", "Opdrachtbevestiging – huurovereenkomst kantoor\nGeachte heer,")
    plan = facts("L/Bijlagen/Bijlage 1 - Tekening.pdf", "BIJLAGE 1\nTEKENING\n"
                 "Tekening van het gehuurde behorende bij de huurovereenkomst tussen A en B.")
    assert plan.annex_label == "bijlage 1" and plan.annex_of_words == ("huurovereenkomst", "tussen")
    assert relations(plan, [letter, lease]) == {("annex_of", lease.ref)}

    signed = facts("E/Executed/Compromise Agreement - signed.pdf", "COMPROMISE AGREEMENT\nBetween A and B")
    draft = facts("E/Drafts/Compromise Agreement v1.docx", "COMPROMISE AGREEMENT\nBetween A and B (draft)")
    annex = facts("E/Annexes/Exhibit A - Job description.pdf", "EXHIBIT A\nJOB DESCRIPTION\nThe employee shall …")
    assert relations(annex, [draft, signed]) == {("annex_of", signed.ref)}
    # two signed agreements and nothing to tell them apart: no guess
    nda = facts("E/Executed/NDA - signed.pdf", "CONFIDENTIALITY AGREEMENT\nThe recipient keeps the information "
                "confidential for three years and returns every copy on request.")
    assert relations(annex, [draft, signed, nda]) == set()


def test_a_closing_caption_makes_an_annex_and_its_wants_read_the_agreements():
    extract = facts("D/Company search.pdf", "Companies House\nACME LIMITED\nCompany status: Active\n"
                    "SCHEDULE 3 – COMPANY SEARCH")
    assert extract.annex_label == "schedule 3"
    wants = Wants.of(extract)
    listed = listed_facts({"path": "D/Executed/Share Purchase Agreement - signed.pdf", "title": "", "format": "pdf"})
    assert wants.by_listing(listed)
    assert not wants.by_listing(listed_facts({"path": "D/Notes/Attendance note.docx", "title": "Attendance note"}))
    assert Wants.from_json(wants.as_json()) == wants
