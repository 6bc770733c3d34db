"""Mail attachments and mbox messages become documents of their own, linked to their container."""

from __future__ import annotations

import shutil

from sqlalchemy import text

from ki.adapters.search.search import search as _search
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.store.artifacts import STRUCTURED_JSON, get_artifact


def search(conn, query, *, principals=None):
    """The lexical hits of ``query`` (as the local operator unless ``principals``)."""
    return _search(conn.engine, query, principals=principals, operator=principals is None, mode="lexical").hits


def _insert(ctx, root):
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    summary = launch_insertion(ctx, source_id=sid, wait_for_retries_seconds=0)
    assert summary.status == "completed"
    return sid, summary


def _children(ctx, parent_suffix):
    with ctx.db.engine.connect() as conn:
        return conn.execute(
            text("""SELECT c.id, c.path, c.content_hash, c.deleted_at, c.embedded_index
                    FROM source_object c JOIN source_object p ON p.id = c.parent_id
                    WHERE p.external_id = :e ORDER BY c.embedded_index"""),
            {"e": parent_suffix},
        ).fetchall()


def test_pdf_attachment_is_converted_indexed_and_linked(ctx, real_corpus, tmp_path):
    root = tmp_path / "mail"
    root.mkdir()
    shutil.copy(real_corpus / "eml" / "flanker_attached-pdf.eml", root)
    _insert(ctx, root)
    kids = _children(ctx, "flanker_attached-pdf.eml")
    assert [k.path.rsplit(" » ", 1)[1] for k in kids] == ["test.pdf"]
    with ctx.db.engine.connect() as conn:
        body = get_artifact(conn, kids[0].content_hash, STRUCTURED_JSON)
        assert body["format"] == "pdf" and body["text"].strip() == "Test."
        states = dict(conn.execute(text("SELECT stage, status FROM processing_state WHERE source_object_id = :i"),
                                   {"i": kids[0].id}).fetchall())
        assert states["fetch"] == states["convert"] == states["index"] == "done"
        hits = search(conn, "test")
    assert any(h.source_object_id == kids[0].id for h in hits)


def test_mbox_messages_become_documents_with_their_thread(ctx, real_corpus, tmp_path):
    root = tmp_path / "mbox"
    root.mkdir()
    shutil.copy(real_corpus / "eml" / "tika_complex.mbox", root)
    _insert(ctx, root)
    kids = _children(ctx, "tika_complex.mbox")
    assert len(kids) == 3
    with ctx.db.engine.connect() as conn:
        mails = [get_artifact(conn, k.content_hash, STRUCTURED_JSON)["mail"] for k in kids]
    assert mails[1]["in_reply_to"] == mails[0]["message_id"]
    assert mails[2]["in_reply_to"] == mails[1]["message_id"]


def test_signatures_and_inline_parts_are_not_documents(ctx, real_corpus, tmp_path):
    root = tmp_path / "signed"
    root.mkdir()
    shutil.copy(real_corpus / "eml" / "flanker_signed.eml", root)
    _insert(ctx, root)
    assert _children(ctx, "flanker_signed.eml") == []


def test_rescan_keeps_children_and_tombstone_removes_them(make_ctx, real_corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("KI_PIPELINE__DELETION_CONFIRMATIONS", "1")
    ctx = make_ctx()
    root = tmp_path / "mail2"
    root.mkdir()
    shutil.copy(real_corpus / "eml" / "tika_testRFC822_multipart_attachments.eml", root)
    (root / "keep.txt").write_text("ein Dokument, das bleibt")
    sid, _ = _insert(ctx, root)
    before = _children(ctx, "tika_testRFC822_multipart_attachments.eml")
    assert sorted(k.path.rsplit(" » ", 1)[1] for k in before) == ["Test TxtA.txt", "Test TxtB.txt"]
    # a second run with nothing changed converts nothing and keeps the same child rows
    scan_source(ctx, sid)
    launch_insertion(ctx, source_id=sid, wait_for_retries_seconds=0)
    assert [k.id for k in _children(ctx, "tika_testRFC822_multipart_attachments.eml")] == [k.id for k in before]
    # the mail disappears: it and its attachments are tombstoned, their chunks gone
    (root / "tika_testRFC822_multipart_attachments.eml").unlink()
    report = scan_source(ctx, sid)
    assert report.tombstoned == ["tika_testRFC822_multipart_attachments.eml"]
    after = _children(ctx, "tika_testRFC822_multipart_attachments.eml")
    assert all(k.deleted_at is not None for k in after)
    with ctx.db.engine.connect() as conn:
        n = conn.execute(text("SELECT count(*) FROM chunk WHERE source_object_id = ANY(:ids)"),
                         {"ids": [k.id for k in after]}).scalar()
    assert n == 0


# ---------------------------------------------------------------------------- issue 20 item 2, issue 14 item 7


FIXTURES = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures"


def _states(conn, oid):
    return dict(conn.execute(text("SELECT stage, status FROM processing_state WHERE source_object_id = :i"),
                             {"i": oid}).fetchall())


def test_docx_embedded_objects_become_children_converted_indexed_with_the_parents_source(ctx, tmp_path):
    root = tmp_path / "docx"
    root.mkdir()
    shutil.copy(FIXTURES / "ooxml" / "tika_testWORD_EMFAndAttachments.docx", root / "annexes.docx")
    shutil.copy(FIXTURES / "ooxml" / "tika_testWORD_charts.docx", root / "chart.docx")
    _insert(ctx, root)
    kids = _children(ctx, "annexes.docx")
    assert [k.path.rsplit(" » ", 1)[1] for k in kids] == ["Microsoft_Word_Document.docx", "TestText.txt",
                                                          "oleObject2.pdf"]
    expected = ["This is test word document for parser.", "This is Text File", "This is test PDF document for parser."]
    with ctx.db.engine.connect() as conn:
        sources = set(conn.execute(text("SELECT DISTINCT source_id FROM source_object WHERE id = ANY(:i) OR "
                                        "external_id = 'annexes.docx'"), {"i": [k.id for k in kids]}).scalars())
        assert len(sources) == 1  # children live in their container's source: its permissions
        for kid, want in zip(kids, expected, strict=True):
            body = get_artifact(conn, kid.content_hash, STRUCTURED_JSON)
            assert want in body["text"]
            assert _states(conn, kid.id)["index"] == "done"
        parent = conn.execute(text("SELECT content_hash FROM source_object WHERE external_id = 'chart.docx'")).scalar()
        chart = get_artifact(conn, parent, STRUCTURED_JSON)
        assert "wants a peach" in chart["parts"]["chart:1"]
        hits = search(conn, "Text File")
    assert any(h.source_object_id == kids[1].id for h in hits)


def test_inline_mail_images_and_spacers_are_never_quarantined(ctx, real_corpus, tmp_path):
    from PIL import Image

    root = tmp_path / "inline"
    root.mkdir()
    shutil.copy(real_corpus / "msg" / "mail-parser_mail_outlook_1.msg", root / "newsletter.msg")
    Image.new("P", (400, 1)).save(root / "spacer.gif")
    _insert(ctx, root)
    assert _children(ctx, "newsletter.msg") == []  # five cid-referenced images stay with the mail
    with ctx.db.engine.connect() as conn:
        quarantined = conn.execute(text("SELECT count(*) FROM processing_state WHERE status = 'quarantined'")).scalar()
        spacer = conn.execute(text("SELECT id, content_hash FROM source_object WHERE external_id = 'spacer.gif'")).one()
        body = get_artifact(conn, spacer.content_hash, STRUCTURED_JSON)
    assert quarantined == 0
    assert body["text"] == "" and body["metadata"]["ocr_skipped"] == ["too_small"]


def test_pdf_attachments_become_children_and_annotation_only_pages_convert(ctx, real_corpus, tmp_path):
    from tests.helpers.pdf_build import latin_pdf

    root = tmp_path / "pdf"
    root.mkdir()
    shutil.copy(real_corpus / "pdf" / "tika_testPDF_multiFormatEmbFiles.pdf", root / "bundle.pdf")
    note = (b"<< /Type /Annot /Subtype /Text /Rect [300 700 320 720] /Contents (Verjaehrung pruefen) "
            b"/T (Dr. Weber) /P PAGE >>")
    (root / "note.pdf").write_bytes(latin_pdf([[]], annotations={0: [note]}))
    _insert(ctx, root)
    kids = _children(ctx, "bundle.pdf")
    assert kids and all(k.content_hash for k in kids)
    with ctx.db.engine.connect() as conn:
        assert all(_states(conn, k.id)["convert"] in ("done", "quarantined") for k in kids)
        row = conn.execute(text("SELECT id, content_hash FROM source_object WHERE external_id = 'note.pdf'")).one()
        body = get_artifact(conn, row.content_hash, STRUCTURED_JSON)
        states = _states(conn, row.id)
    assert states["convert"] == "done"  # not empty_text: the page's text is its note
    assert body["text"] == "" and body["parts"] == {"annotation:p1": "[Dr. Weber] Verjaehrung pruefen"}


def test_a_file_over_its_conversion_budget_is_quarantined_too_large_with_the_figure(make_ctx, tmp_path,
                                                                                   monkeypatch):
    """Issue 14 item 7d through the pipeline: a classified quarantine, never an outage; the rest converts."""
    from ki.adapters.convert import isolation

    monkeypatch.setenv("KI_PIPELINE__CONVERT__TIMEOUT_SECONDS", "1.0")
    isolation.reset_pools()
    ctx = make_ctx()
    root = tmp_path / "budget"
    root.mkdir()
    line = "Zeile mit Text und Umlauten äöü\n"
    (root / "huge.txt").write_bytes((line * 3_000_000).encode("cp1252"))  # 96 MB: over 1 s even in a warm worker
    (root / "small.txt").write_text("ein kleiner Vermerk")
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    launch_insertion(ctx, source_id=sid, wait_for_retries_seconds=0)
    with ctx.db.engine.connect() as conn:
        rows = {r.external_id: r for r in conn.execute(text(
            "SELECT so.external_id, ps.status, ps.last_error FROM processing_state ps "
            "JOIN source_object so ON so.id = ps.source_object_id WHERE ps.stage = 'convert'"))}
    isolation.reset_pools()
    assert rows["small.txt"].status == "done"
    huge = rows["huge.txt"]
    assert huge.status == "quarantined" and huge.last_error["reason"] == "too_large"
    assert huge.last_error["details"]["limit_seconds"] == 1.0 and huge.last_error["deterministic"] is True
