"""Mail attachments and mbox messages become documents of their own, linked to their container."""

from __future__ import annotations

import shutil

from sqlalchemy import text

from ki.index.postgres import search
from ki.launch import launch_insertion
from ki.sources.scan import register_local_source, scan_source
from ki.store.artifacts import STRUCTURED_JSON, get_artifact


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
