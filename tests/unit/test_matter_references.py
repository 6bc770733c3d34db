"""Matter references as configuration, the references the firm knows, and the evidence order (issue 16 items 1–2).

Pure: patterns and contexts (ki.config.reference_patterns), known references, client numbers and names
(ki.domain.matters.references), the evidence chain over an in-memory corpus (ki.domain.matters.evidence).
"""

from __future__ import annotations

import pytest

from ki.config.reference_patterns import PatternError, ReferenceFormats, template_regex
from ki.domain.matters.evidence import CorpusFile, infer_reference, organisation_names
from ki.domain.matters.references import (
    KnownReferences,
    case_numbers_in,
    content_reference,
    own_reference,
    path_reference,
    placeholder_reference,
    references_in,
    title_from_folder,
)


class MemoryCorpus:
    def __init__(self, files: list[CorpusFile]):
        self.files = files

    def files_under(self, folder):
        return [f for f in self.files if f.path.startswith(folder + "/")]

    def files_containing(self, needle):
        return [f for f in self.files if needle.lower() in f.text.lower()]

    def emails_linked(self, ids):
        return [f for f in self.files if f.mail and (f.mail.get("message_id") in ids
                                                     or f.mail.get("in_reply_to") in ids)]


@pytest.mark.parametrize("patterns, text, expected", [
    # the shipped defaults: YYYY-NNNN, client-matter NNNNNN-NNNN, M-NNNN, CODE-YYYY-NNN
    (None, "Unser Zeichen: 2024-0153 | Ihr Zeichen: 828/24 TP", ["2024-0153"]),
    (None, "Our ref: RJW/104233-0007\nYour ref: AB/123", ["104233-0007"]),
    (None, "file M-1234 and HARB-2023-017", ["M-1234", "HARB-2023-017"]),
    # DMS document numbers are document numbers, not matters
    (None, "#4811234v3 - Share Purchase Agreement.docx", []),
    (None, "LON\\104233-0007 and 104233-0007_3.docx", []),
    (None, "104233-0007/4811234v3", ["104233-0007"]),
    # numbers in other contexts: invoices, telephone, register numbers, ISO dates
    (None, "Invoice 2024-0117 · Tel. 0511-123456 · 2024-03-05", []),
    # configured formats replace the defaults
    (["NNNNNN.NNNN"], "Our ref: 104233.0007 (old 2024-0153)", ["104233.0007"]),
    (["YYYY.NNNN"], "Ons kenmerk: 2023.0145/PB", ["2023.0145"]),
    (["re:[A-Z]{3}\\d{5}"], "Matter ABC12345", ["ABC12345"]),
    # a digits-only format counts behind a label or in a subject tag, not on its own
    (["YYYYNNNN"], "KvK 20230145 · Factuur 20230146", []),
    (["YYYYNNNN"], "Ons kenmerk: 20230145", ["20230145"]),
    (["YYYYNNNN"], "Huur Westpoort [20230145]", ["20230145"]),
])
def test_formats_find_references_and_nothing_else(patterns, text, expected):
    assert references_in(text, ReferenceFormats(patterns)) == expected


@pytest.mark.parametrize("label", ["Unser Zeichen:", "Our ref:", "Our reference", "Matter no.", "Client-matter:",
                                   "Ons kenmerk:", "Uw kenmerk:", "Dossiernummer", "Notre référence :", "Az.:"])
def test_reference_contexts_in_four_languages(label):
    formats = ReferenceFormats(["NNNNNN-NNNN"])
    assert [c.labelled for c in formats.candidates(f"{label} 104233-0007")] == [True]


def test_subject_tags_and_templates():
    formats = ReferenceFormats()
    (tag,) = formats.candidates("RE: Lease – draft for review [#104233-0007]")
    assert tag.tagged and tag.counts
    assert template_regex("CODE-YYYY-NNN") == r"[A-Z]{2,6}\-(?:19|20)\d{2}\-\d\d\d"
    with pytest.raises(PatternError):
        template_regex("re:(unclosed")
    with pytest.raises(PatternError):
        template_regex("  ")


def test_path_references_digits_only_at_the_start_of_a_folder():
    formats = ReferenceFormats(["YYYYNNNN"])
    ev = own_reference("Dossiers/20240117 Visser - huur/Concepten/x.docx", "geen kenmerk", formats=formats)
    assert (ev.reference, ev.source, ev.folder) == ("20240117", "path", "Dossiers/20240117 Visser - huur")
    # a file name that starts with a date stamp is no reference
    assert own_reference("Archief/2023/20230531 0900 Antw_ x.eml", "", formats=formats) is None


def known() -> KnownReferences:
    k = KnownReferences()
    k.add("104233-0007", ["104233/7"], "104233", "Harbour Crest Holdings Limited")
    k.add("104233-0008", [], "104233", "Harbour Crest Holdings Limited")
    k.add("2023.0145", ["2023-0145"], "27401", "Polder Holding B.V.")
    return k


def test_known_references_aliases_client_numbers_and_names():
    k = known()
    assert k.mentions("Your ref: 104233/7") == [("104233-0007", True)]
    assert k.mentions("uw kenmerk 2023-0145, factuur 2023-0145") == [("2023.0145", True)]
    assert k.clients_by_number("Client no. 27401") == {"2023.0145"}
    assert k.clients_by_number("", "Clients/Harbour Crest (104233)/x.pdf") == {"104233-0007", "104233-0008"}
    assert k.clients_by_number("27401 apples") == set()  # unlabelled numbers are not client numbers
    assert set(k.clients_by_name("HARBOUR CREST HOLDINGS LTD, 1 King Street")) == {"harbour crest holdings"}
    # a known reference beats a pattern guess and the path
    ev = own_reference("Matters/2024-0153 Other/x.pdf", "matter 104233-0008 mentioned twice: 104233-0008",
                       known=k)
    assert (ev.reference, ev.known) == ("104233-0008", True)


def test_evidence_with_imported_matters():
    k = known()
    corpus = MemoryCorpus([
        CorpusFile("Clients/Harbour Crest (104233)/a.pdf", "Our ref: 104233-0007"),
        CorpusFile("Clients/Harbour Crest (104233)/b.pdf", "Our ref: 104233-0008"),
        CorpusFile("DMS Export/#4811234v1 - Lease.docx", "Lease\n104233-0008/4811234v1"),
        CorpusFile("DMS Export/m1.eml", "Our matter number is 2023.0145", {"message_id": "m1@x"}),
    ])
    # header/footer text is part of the evidence text
    footer = infer_reference("DMS Export/#4811235v2 - Lease.docx", "Lease\nLON\\4811235.2\n104233-0007/4811235v2",
                             None, corpus, known=k)
    assert (footer.reference, footer.how) == ("104233-0007", "content")
    # a client with one matter: its number decides
    by_number = infer_reference("Post/Scan_1.pdf", "Client no. 27401\nPlease find enclosed.", None, corpus, known=k)
    assert (by_number.reference, by_number.how) == ("2023.0145", "client_number")
    # a client with two matters: the number narrows, the thread picks
    reply = infer_reference("Clients/Harbour Crest (104233)/c.eml", "Thanks", {"message_id": "m2@x",
                            "in_reply_to": "m1@x"}, corpus, known=k)
    assert reply is None  # the thread names a matter of another client: not one of the client's
    thread = infer_reference("DMS Export/m2.eml", "Thanks", {"message_id": "m2@x", "in_reply_to": "m1@x"}, corpus,
                             known=k)
    assert (thread.reference, thread.how) == ("2023.0145", "thread")
    # a client name of a client with one matter
    named = infer_reference("Inbox/letter.pdf", "From: Polder Holding BV\nDear Sirs", None, corpus, known=k)
    assert (named.reference, named.how) == ("2023.0145", "client_name")
    # a client name of a client with several matters decides nothing
    assert infer_reference("Inbox/l2.pdf", "HARBOUR CREST HOLDINGS LIMITED\nDear Sirs", None, corpus, known=k) is None


def test_organisation_names_in_lines_and_running_text():
    text = ("Parties: Harbour Crest Holdings Limited and Northgate Energy Limited\n"
            "Client confirmed that no offer has been received from Northgate Retail Limited.\n"
            "1. Van der Veen Installatietechniek B.V., een besloten vennootschap\n"
            "of RIDGEWAY ENGINEERING LIMITED, a company\nASHDOWN PRYCE LLP")
    assert organisation_names(text, firm_names=["Ashdown Pryce"]) == [
        "Van der Veen Installatietechniek B.V", "RIDGEWAY ENGINEERING LIMITED", "Harbour Crest Holdings Limited",
        "Northgate Energy Limited", "Northgate Retail Limited"]


def test_parties_named_together_pick_one_matter():
    corpus = MemoryCorpus([
        CorpusFile("DMS Export/a.pdf", "Our ref: 104233-0007\nLease between Harbour Crest Limited and Kestrel Ltd"),
        CorpusFile("DMS Export/b.pdf", "Our ref: 104233-0008\nHarbour Crest Limited – board minutes"),
        CorpusFile("DMS Export/c.pdf", "Our ref: 555555-0001\nKestrel Ltd v Others – claim"),
    ])
    ev = infer_reference("DMS Export/d.docx", "LEASE\nBETWEEN:\n(1) HARBOUR CREST LIMITED (the Landlord);\n"
                         "(2) KESTREL LTD (the Tenant).", None, corpus)
    assert (ev.reference, ev.how) == ("104233-0007", "party")


def test_case_numbers_of_english_and_dutch_courts():
    text = ("Claim No: CL-2023-000451\nCase number: 2201234/2022\nZaaknummer: C/13/712345 / HA ZA 22-123\n"
            "Geschäftsnummer: 27 O 83/24")
    assert case_numbers_in(text) == ["27 O 83/24", "CL-2023-000451", "2201234/2022", "C/13/712345 / HA ZA 22-123"]


# --- the firm's default formats, text before path, the evidence order without a list ----------


def test_firm_reference_styles_and_what_is_not_one():
    text = ("Unser Zeichen: 2024-0153 · Our ref: HARB-2023-017 · Rechnung RE-2023-00146 · Az. 27 O 83/24 · "
            "Stand 2023-03-20 · Rechnung 2024-512 · Ihr Zeichen 828/24 TP")
    assert references_in(text) == ["2024-0153", "HARB-2023-017"]
    assert case_numbers_in("Geschäftsnummer: 27 O 83/24, Aktenzeichen 16 Ca 9417/24") == ["27 O 83/24",
                                                                                          "16 Ca 9417/24"]


def test_text_beats_path_and_labels_beat_mentions():
    misfiled = "Mandate/2024-0095 Juniper gg. Feldmann/01 Korrespondenz/Status update.pdf"
    assert own_reference(misfiled, "Our ref: PLAM-2022-052\nDear Mr Pfeiffer").reference == "PLAM-2022-052"
    assert own_reference(misfiled, "no reference here").reference == "2024-0095"
    assert path_reference(misfiled).folder == "Mandate/2024-0095 Juniper gg. Feldmann"
    labelled = content_reference("re 2024-0001 and 2024-0001\nIhr Zeichen: 2021-0056")
    assert (labelled.reference, labelled.source) == ("2021-0056", "content_label")
    assert content_reference("2024-0001 or 2024-0002") is None  # a tie decides nothing
    assert content_reference("Invoice 2024-0117\nAmount due: EUR 1,350.00") is None  # an invoice number


def test_placeholder_and_titles():
    assert placeholder_reference("E-Mail-Ablage/x.eml") == "UNASSIGNED-e-mail-ablage"
    assert placeholder_reference("Kanzleibroschüre.pdf") == "UNASSIGNED-root"
    assert title_from_folder("Clients/HARB-2023-017 Share Purchase", "HARB-2023-017") == "Share Purchase"


def test_evidence_order_thread_case_number_folder_party():
    corpus = MemoryCorpus([
        CorpusFile("Akten/2024/Keller - Miete/Mandatsvereinbarung.pdf", "Unser Zeichen: 2024-0153"),
        CorpusFile("Akten/2024/Keller - Miete/Rechnung.pdf", "Unser Zeichen: 2024-0153"),
        CorpusFile("Akten/2024/Keller - Miete/E-Mails/a.eml", "Mietvertrag", {"message_id": "m1@x"}),
        CorpusFile("Akten/2024/Other/Brief.pdf", "Unser Zeichen: 2024-0200 Az. 3 O 7/24 Oakmont Industries AB"),
        CorpusFile("Scans/Scan_1.pdf", "Unser Zeichen: 2021-0001"),
    ])
    folder = infer_reference("Akten/2024/Keller - Miete/Entwurf.docx", "Mietvertrag Entwurf", None, corpus)
    assert (folder.reference, folder.how) == ("2024-0153", "folder")
    thread = infer_reference("E-Mail-Ablage/AW_ a.eml", "quoted", {"message_id": "m2@x", "in_reply_to": "m1@x"},
                             corpus)
    assert (thread.reference, thread.how) == ("2024-0153", "thread")
    case = infer_reference("Scans/Scan_2.pdf", "Landgericht\nGeschäftsnummer: 3 O 7/24", None, corpus)
    assert (case.reference, case.how) == ("2024-0200", "case_number")
    party = infer_reference("Eingang/Fax.pdf", "TELEFAX\nFrom: Oakmont Industries AB, James", None, corpus)
    assert (party.reference, party.how) == ("2024-0200", "party")
    assert infer_reference("Vorlagen/Muster.docx", "Our ref: [Matter No.]", None, corpus) is None
    assert organisation_names("KESSLER CLAUSSEN Rechtsanwälte PartG mbB\nFrom: Nordwind AG, Jan") == ["Nordwind AG"]


@pytest.mark.parametrize(("path", "reference"), [
    ("Mandate/2024-031 Halvorsen Properties Ltd - Office Lease Speicherstadt/Correspondence/x.eml", "2024-031"),
    ("Mandate/2023-112 Kessler, Johanna - Kündigungsschutz/2023-11-03 Kündigung Arbeitgeber.pdf", "2023-112"),
    ("Akten/2024/031 Halvorsen/x.pdf", None),          # a year folder, then a number: no reference
    ("Dossiers/2024/031 Visser/x.pdf", None),
    ("Akten/2024/0031 Visser/x.pdf", None),
    ("Akten/031/24 Visser/x.pdf", None),
    ("Files/24-0031 Larkspur/x.pdf", "24-0031"),
    ("Files/117/24 Larkspur/x.pdf", None),             # "/" separates folders: not NNN/YY
])
def test_default_short_year_number_forms_at_the_start_of_a_folder(path, reference):
    ev = own_reference(path, "")
    assert (ev.reference if ev else None) == reference


@pytest.mark.parametrize(("text", "expected"), [
    ("Unser Zeichen: 2024-031", ["2024-031"]),          # the firm's own label
    ("Our ref: RJW/2024/031", ["2024/031"]),
    ("Ons kenmerk: 117/24", ["117/24"]),
    ("Notre référence : 24-0031", ["24-0031"]),
    ("Ihr Zeichen: 828/24 TP", []),                     # the other side's reference
    ("Your ref: 2024-031", []),
    ("Az. 14 HKO 27/24 und 828/24", []),                # a case number, a bare number
    ("Rechnung Nr. 2024-031", []),                      # an invoice number
    ("Telefonat am 2024-031 wegen 117/24", []),         # unlabelled
    ("#2024-031v3 Vertrag", []),                        # a DMS document number
])
def test_default_short_forms_count_only_behind_the_firms_own_label(text, expected):
    assert references_in(text) == expected


def test_a_configured_list_replaces_the_defaults_and_config_shows_the_defaults():
    from ki.config.reference_patterns import DEFAULT_PATTERNS
    from ki.config.settings import FirmConfig

    assert FirmConfig().matter_reference_patterns == list(DEFAULT_PATTERNS)
    assert FirmConfig(matter_reference_patterns=[]).matter_reference_patterns == list(DEFAULT_PATTERNS)
    assert FirmConfig(matter_reference_patterns=["NNNNNN.NNNN"]).matter_reference_patterns == ["NNNNNN.NNNN"]
    assert references_in("Unser Zeichen: 2024-031", ReferenceFormats(["NNNNNN.NNNN"])) == []
