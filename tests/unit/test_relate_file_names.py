"""DMS-export naming, compare documents, Outlook quoted headers and the placeholder scope of same-document
(issue 16 items 3, 4, 5, 8; spec insertion-pipeline.md "Relate"). Invented names and text, not corpus files.
"""

from __future__ import annotations

import datetime as dt

from ki.domain.relate import file_names
from ki.domain.relate.facts import FileFacts
from ki.domain.relate.policy_decide import decide, same_document_score
from ki.domain.relate.threads import is_reply_subject, quoted_headers, subject_key

BODY = ("The supplier shall deliver the goods within thirty days of each order and the customer shall pay "
        "every invoice within sixty days of receipt. Either party may terminate on ninety days written notice.")


def facts(path: str, text: str, **kw) -> FileFacts:
    return FileFacts(ref=path, path=path, format=path.rsplit(".", 1)[-1], title=text.splitlines()[0], text=text,
                     content_hash=kw.pop("h", f"h-{path}"), **kw)


def test_dms_numbers_in_every_export_style():
    cases = {"#4811234v3 - Share Purchase Agreement": ("4811234", 3, "Share Purchase Agreement"),
             "7990945.3 - Master Services Agreement": ("7990945", 3, "Master Services Agreement"),
             "4811234_3": ("4811234", 3, ""),
             "SPA (4811234v3)": ("4811234", 3, "SPA"),
             "DOCS-123456-v2 Lease": ("123456", 2, "Lease"),
             "#4811234 Memo": ("4811234", None, "Memo")}
    for stem, (number, version, rest) in cases.items():
        assert file_names.dms_number(stem) == file_names.DmsNumber(number, version), stem
        assert file_names.strip_dms(stem) == rest, stem
    # a client-matter number and a date are not document numbers
    assert file_names.dms_number("123456-0001 Lease v2") is None
    assert file_names.dms_number("20230620_1 memo") is None and file_names.strip_dms("20230620_1 memo") == \
        "20230620_1 memo"
    assert file_names.name_version("123456-0001 Lease v2") == 2


def test_copies_and_compares():
    assert file_names.has_copy_marker("Lease - Copy (2)") and file_names.has_copy_marker("Copy of Lease")
    assert file_names.has_copy_marker("Kopie van huurovereenkomst") and not file_names.has_copy_marker("Lease")
    assert file_names.compare_of("Workshare Compare - Lease v1 vs Lease v2", []) == file_names.Compare(
        "Lease v1", "Lease v2", 1, 2)
    assert file_names.compare_of("Report", ["Original document: SPA v2.docx", "Modified document: SPA v3.docx"]) \
        == file_names.Compare("SPA v2.docx", "SPA v3.docx", 2, 3)
    assert file_names.compare_of("Lease v2", ["Lease"]) is None


def test_one_dms_number_is_one_document_and_a_compare_is_a_redline_of_the_version_it_names():
    v1 = facts("Flat/#4811234v1 - Lease.docx", "Lease\n" + BODY)
    v2 = facts("Flat/#4811234v2 - Lease.docx", "Lease\nAn entirely rewritten text with nothing in common.")
    other = facts("Flat/#4811299v1 - Lease.docx", "Lease\n" + BODY.replace("thirty", "forty"))
    assert same_document_score(v2, v1) == 1.0
    assert same_document_score(other, v1) == 0.0  # two DMS numbers: not near-identical, two documents
    cmp = facts("Flat/Comparison of Lease v1 to Lease v2.pdf", "Lease\n" + BODY)
    v1n = facts("Flat/Lease v1.docx", "Lease\n" + BODY)
    v2n = facts("Flat/Lease v2.docx", "Lease\n" + BODY.replace("sixty", "ninety"))
    assert cmp.is_redline and cmp.name_version == 2 and cmp.name_key == "lease"
    assert decide(cmp, [v1n, v2n]).redline_against_ref == v1n.ref


def test_placeholder_matters_never_merge_across_folders():
    a = facts("Share/A/Precedent NDA.docx", "NDA\n" + BODY, matter="UNASSIGNED-1")
    b = facts("Share/B/Precedent NDA.docx", "NDA\n" + BODY, matter="UNASSIGNED-1")
    c = facts("Share/A/NDA signed.docx", "NDA\n" + BODY, matter="UNASSIGNED-1")
    assert same_document_score(a, b) == 0.0 and same_document_score(a, c) > 0.9
    assert decide(b, [a]).identity == "new"


def test_outlook_quoted_headers_in_english_and_dutch():
    [en] = quoted_headers("Thanks\n\nFrom: Jane Smith [mailto:jane@firm.example]\nSent: 05 July 2022 14:03\n"
                          "To: x\nSubject: RE: Lease\n\nold")
    assert (en.date, en.hhmm, en.address, en.name, en.subject_key) == (
        dt.date(2022, 7, 5), "14:03", "jane@firm.example", "Jane Smith", "lease")
    [nl] = quoted_headers("ok\nVan: Jan de Vries\nVerzonden: dinsdag 5 juli 2022 2:03 PM\nAan: y\n"
                          "Onderwerp: Antw: Huur\n")
    assert (nl.date, nl.hhmm, nl.address, nl.name, nl.subject_key) == (
        dt.date(2022, 7, 5), "14:03", None, "Jan de Vries", "huur")
    assert is_reply_subject("Antw: Doorst: x") and subject_key("RE: AW: WG: Doorst: Lease") == "lease"


def test_a_reply_without_in_reply_to_finds_its_parent_by_the_quoted_outlook_header():
    root = facts("M/a.eml", "Please see the draft.", mail={"message_id": "1@x", "subject": "Lease",
                 "date": "2022-07-05T14:03:00+01:00", "sender": "", "sender_name": "Jan de Vries"})
    other = facts("M/c.eml", "Unrelated.", mail={"message_id": "3@x", "subject": "Lease",
                  "date": "2022-07-04T09:00:00+01:00", "sender": "", "sender_name": "Jan de Vries"})
    reply = facts("M/b.eml", "Agreed.\nVan: Jan de Vries\nVerzonden: 5 juli 2022 14:03\nOnderwerp: Lease\n",
                  mail={"message_id": "2@x", "subject": "Lease", "date": "2022-07-06T09:00:00+01:00",
                        "sender": "b@y"})
    assert [(r.type, r.target_ref) for r in decide(reply, [root, other]).relations] == [("responds_to", root.ref)]


def test_a_configured_matter_reference_is_no_dms_number():
    """Issue 16 item 3: ``123456.001`` is a matter when the firm writes ``NNNNNN.NNN``; a DMS number otherwise."""
    from ki.config.reference_patterns import formats_for
    from ki.domain.relate.facts import FileFacts
    from ki.domain.relate.file_names import dms_number

    firm = formats_for(("NNNNNN.NNN",))
    assert dms_number("123456.001 - Lease") is not None
    assert dms_number("123456.001 - Lease", firm) is None
    assert dms_number("7990945.3 - Lease", firm).number == "7990945"
    a = FileFacts(ref="a", path="M/123456.001 - Lease v2.docx", format="docx", title="", text="Lease",
                  reference_patterns=("NNNNNN.NNN",))
    b = FileFacts(ref="b", path="M/123456.001 - Side letter.docx", format="docx", title="", text="Side letter",
                  reference_patterns=("NNNNNN.NNN",))
    assert a.dms is None and a.name_version == 2 and b.dms is None
