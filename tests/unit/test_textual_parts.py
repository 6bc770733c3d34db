"""StructuredDocument.textual_parts(): every textual part the index stage chunks, with its kind (issue 20 item 1).

The search ↔ convert contract (OWNERS.md): ``parts`` keys are ``kind`` or ``kind:qualifier``; legacy
``footnotes`` / ``endnotes`` map to footnote / endnote; comments and tracked deletions come from their own fields.
"""

from __future__ import annotations

from ki.adapters.convert.model import (
    PART_KINDS,
    Address,
    Comment,
    MailMeta,
    Revision,
    StructuredDocument,
    TextualPart,
    part_kind,
)


def test_part_kind_reads_keys_and_legacy_names():
    assert part_kind("footnotes") == "footnote" and part_kind("endnotes") == "endnote"
    assert part_kind("header:1") == "header" and part_kind("annotation:p3") == "annotation"
    assert part_kind("Chart : 2") == "chart"
    assert part_kind("no such kind") == "other" and part_kind("") == "other"
    assert part_kind("body") == "other"  # the body is ``text``, never a part
    assert all(part_kind(k) in PART_KINDS for k in ("smartart:1", "form_field:Name", "embedded_name"))


def test_every_part_in_order_with_kind_key_anchor_and_author():
    doc = StructuredDocument(
        text="Der Mieter zahlt.", format="docx", converter="t",
        parts={"header:1": "Kanzlei Briefkopf", "footnotes": "Fußnote eins", "chart:2": "Umsatz 2024", "x-y": "Rest",
               "footer": "   "},
        comments=[Comment(comment_id="7", text="Bitte prüfen", anchor_text=" Der  Mieter ", author="A. Keller"),
                  Comment(comment_id="8", text="  ")],
        revisions=[Revision(kind="del", text="Kaution von drei Monatsmieten", author="B"),
                   Revision(kind="moveFrom", text="verschoben"), Revision(kind="ins", text="neu"),
                   Revision(kind="row_del", text="Zeile", author="B"),
                   Revision(kind="del", text="alte Fußnote", part="footnotes", author="C")],
        mail=MailMeta(bcc=[Address(name="Anna", address="anna@x.example")], attachments=["Anlage K1.pdf", ""]))
    assert doc.textual_parts() == [
        TextualPart("body", "body", "Der Mieter zahlt."),
        TextualPart("header", "header:1", "Kanzlei Briefkopf"),
        TextualPart("footnote", "footnotes", "Fußnote eins"),
        TextualPart("chart", "chart:2", "Umsatz 2024"),
        TextualPart("other", "x-y", "Rest"),
        TextualPart("comment", "comment:7", "Bitte prüfen", anchor="Der Mieter", author="A. Keller"),
        TextualPart("deleted", "deleted", "Kaution von drei Monatsmieten\nZeile", author="B"),
        TextualPart("deleted", "deleted:footnotes", "alte Fußnote", author="C"),
        TextualPart("mail_header", "mail_header", "Bcc: Anna <anna@x.example>"),
        TextualPart("attachment_name", "attachment_name", "Anlage K1.pdf"),
    ]


def test_empty_body_is_left_out():
    doc = StructuredDocument(text=" \n", format="pdf", converter="t", parts={"annotation:p1": "Notiz"})
    assert [(p.kind, p.text) for p in doc.textual_parts()] == [("annotation", "Notiz")]


def test_struck_words_are_indexed_in_their_sentence():
    doc = StructuredDocument(
        text="The quick fox.\nOver the lazy brown dog.\nKept.", format="docx", converter="t",
        original_text="The quick fox.\nOver the lazy brown frog.\nA struck paragraph.\nKept.",
        revisions=[Revision(kind="del", text="frog"), Revision(kind="ins", text="dog"),
                   Revision(kind="del", text="A struck paragraph."), Revision(kind="del", text="gone elsewhere")])
    deleted = [p for p in doc.textual_parts() if p.kind == "deleted"]
    assert [p.text for p in deleted] == ["Over the lazy brown frog.\nA struck paragraph.\ngone elsewhere"]
