"""The pure rules behind Relate: file facts, citations, threads, decisions (Classify's: test_matter_references).

Spec: insertion-pipeline.md "Classify", "Relate" and "Agentic stages"; the rules must generalise
(estates of other seeds score as well), so these tests use invented text, not corpus files.
"""

from __future__ import annotations

import datetime as dt

from ki.domain.relate.cues import citation_score, citations, words_match
from ki.domain.relate.dates import dates_in, dates_in_name
from ki.domain.relate.facts import FileFacts
from ki.domain.relate.policy_decide import canonical, decide
from ki.domain.relate.similarity import jaccard
from ki.domain.relate.threads import is_reply_subject, quoted_header, subject_key

# --- facts, dates, similarity, cues -------------------------------------------------------------


def facts(path: str, text: str, *, ref: str | None = None, h: str | None = None, **kw) -> FileFacts:
    return FileFacts(ref=ref or path, path=path, format=kw.pop("format", path.rsplit(".", 1)[-1]),
                     title=kw.pop("title", text.splitlines()[0] if text else ""), text=text,
                     content_hash=h or f"h-{path}", **kw)


def test_dates_and_stamps():
    assert [d for _, _, d in dates_in("am 20.03.2023, 2. März 2023, 16 May 2022, May 16, 2022")] == [
        dt.date(2023, 3, 20), dt.date(2023, 3, 2), dt.date(2022, 5, 16), dt.date(2022, 5, 16)]
    assert dates_in_name("RE_ x (20230620-1701).eml") == [dt.date(2023, 6, 20)]
    f = facts("Vertrag Entwurf v2.docx",
              "ENTWURF v2 – Stand: 06.03.2023 – Änderungen gegenüber Entwurf v1 vom 20.02.2023 markiert\nVertrag")
    assert (f.stamp.number, f.stamp.date, f.stamp.against_number) == (2, dt.date(2023, 3, 6), 1)
    assert dt.date(2023, 2, 20) not in f.text_dates and dt.date(2023, 3, 6) in f.text_dates


def test_name_keys_copy_markers_and_renditions():
    assert facts("2023-03-13 Mietvertrag Endfassung (2).docx", "x").name_key == "mietvertrag"
    assert facts("SPA_v3 (compare).docx", "x").name_key == facts("SPA_executed.pdf", "x").name_key == "spa"
    assert facts("Copy of SPA_execution_version.docx", "x").has_copy_marker
    assert not facts("SPA_v1.docx", "x").has_copy_marker
    assert facts("NDA_fully_signed.pdf", "x").rendition == "signed"
    assert facts("Klageschrift eingereicht 16.12.2024.pdf", "x").rendition == "filed"


def test_citations_resolve_by_word_and_date():
    letter = facts("Rechnung RE-2024-00001.pdf", "Rechnung Nr. RE-2024-00001\nHannover, 26.06.2024\n"
                   "Für unsere Tätigkeit gemäß Mandatsvereinbarung vom 02.02.2024 berechnen wir:")
    engagement = facts("Mandatsvereinbarung.pdf", "KANZLEI\nHannover, 02.02.2024\nMandatsvereinbarung\nText")
    other = facts("Vollmacht.pdf", "Vollmacht\nHannover, 02.02.2024")
    [cite] = [c for c in citations(letter) if c.date]
    assert cite.date == dt.date(2024, 2, 2)
    assert citation_score(cite, engagement) > 0 and citation_score(cite, other) == 0
    assert words_match("gewerbemietvertrags", "mietvertrag") and words_match("engagement", "mandatsvereinbarung")


def test_jaccard_ignores_line_wrapping():
    a = "Der Mieter zahlt die Miete monatlich im Voraus an den Vermieter."
    assert jaccard(a, a.replace(" im ", "\nim ")) == 1.0
    assert jaccard(a, "Ganz anderer Text ohne Bezug zur Miete und zum Vermieter hier.") < 0.2


def test_threads_helpers():
    assert subject_key("AW: RE: Entwurf  Mietvertrag") == subject_key("Entwurf Mietvertrag")
    assert is_reply_subject("WG: x") and not is_reply_subject("Entwurf")
    q = quoted_header("text\nAm 16.12.2024 um 16:18 schrieb Jan Keller <jan@x.example>:\n> q")
    assert (q.date, q.hhmm, q.address) == (dt.date(2024, 12, 16), "16:18", "jan@x.example")


# --- decisions -----------------------------------------------------------------------------------

BODY = ("§ 1 Mietgegenstand Der Vermieter vermietet dem Mieter die Fläche im Erdgeschoss mit ca. 500 m². "
        "§ 2 Mietzeit Das Mietverhältnis beginnt am 01.05.2024 und läuft fünf Jahre. "
        "§ 3 Miete Die monatliche Miete beträgt EUR 5.000,00 zuzüglich Umsatzsteuer. "
        "§ 4 Schlussbestimmungen Änderungen bedürfen der Schriftform. Gerichtsstand ist Hamburg.")


def test_duplicates_keep_the_canonical_copy_and_carry_no_relations():
    orig = facts("M/Vertrag.docx", "Vertrag\n" + BODY, h="same")
    copy = facts("M/Vertrag - Kopie.docx", "Vertrag\n" + BODY, h="same")
    assert canonical([copy, orig]) is orig
    assert decide(copy, [orig]).model_dump(include={"identity", "same_as_ref", "relations"}) == {
        "identity": "duplicate", "same_as_ref": "M/Vertrag.docx", "relations": []}
    assert decide(orig, [copy]).identity == "new"


def test_versions_link_to_the_first_version_and_redlines_to_their_base():
    v1 = facts("M/Mietvertrag Entwurf v1.docx", "ENTWURF v1 – Stand: 01.03.2024\nMietvertrag\n" + BODY)
    v2_text = "ENTWURF v2 – Stand: 08.03.2024\nMietvertrag\n" + BODY.replace("fünf", "zehn")
    v2 = facts("M/Mietvertrag Entwurf v2.docx", v2_text)
    red = facts("M/Mietvertrag Entwurf v2 mit Änderungen.docx",
                "ENTWURF v2 – Stand: 08.03.2024 – Änderungen gegenüber Entwurf v1 vom 01.03.2024 markiert\n"
                "Mietvertrag\n" + BODY.replace("fünf", "zehn"),
                original_text="ENTWURF v2 – Stand: 08.03.2024\nMietvertrag\n" + BODY, revision_kinds=("del", "ins"))
    other = facts("M/Vollmacht.pdf", "Vollmacht\nHiermit bevollmächtigt die Mandantin die Kanzlei umfassend.")
    result = decide(red, [v1, v2, other])
    assert (result.identity, result.same_as_ref, result.redline_against_ref) == ("version", v1.ref, v1.ref)
    assert decide(other, [v1, v2, red]).identity == "new"


def test_email_reply_attachment_and_annex_relations():
    root = facts("M/E-Mails/a.eml", "Bitte anbei der Entwurf.", format="eml",
                 mail={"message_id": "1@x", "subject": "Entwurf", "date": "2024-03-01T10:00:00+01:00",
                       "sender": "a@x"})
    reply = facts("M/E-Mails/b.eml", "Danke.\nAm 01.03.2024 um 10:00 schrieb A <a@x>:\n> Bitte", format="eml",
                  mail={"message_id": "2@x", "subject": "AW: Entwurf", "date": "2024-03-02T09:00:00+01:00",
                        "sender": "b@y", "attachments": ["Vertrag.docx"]})
    attachment = facts("M/E-Mails/b.eml » Vertrag.docx", "Vertrag\n" + BODY, h="doc", embedded=True)
    filed = facts("M/Vertrag.docx", "Vertrag\n" + BODY, h="doc")
    result = decide(reply, [root, attachment, filed])  # no In-Reply-To: the quoted header finds the parent
    assert {(r.type, r.target_ref) for r in result.relations} == {("responds_to", root.ref),
                                                                ("references", filed.ref)}
    annex = facts("M/Anlagen/Anlage K1 Liefervertrag.pdf", "Anlage K1\nLiefervertrag\nText des Vertrags.")
    claim = facts("M/Klageschrift.pdf", "Klageschrift\nBeweis: Liefervertrag vom 01.02.2023, Anlage K1")
    assert [(r.type, r.target_ref) for r in decide(annex, [claim]).relations] == [("annex_of", claim.ref)]
    assert decide(claim, [annex]).relations == []  # the main document does not also "reference" its annex
