"""Spreadsheets, decks, OpenDocument and photos through the whole pipeline: converted in the workers, indexed
part by part (a hit names its sheet or slide), embedded workbooks and decks as children, no false alarms."""

from __future__ import annotations

import shutil
from pathlib import Path

from sqlalchemy import text

from ki.adapters.search.search import search as _search
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.store.artifacts import STRUCTURED_JSON, get_artifact

FORMATS = Path(__file__).resolve().parents[1] / "fixtures" / "formats"


def _hits(conn, query):
    return _search(conn.engine, query, principals=None, operator=True, mode="lexical").hits


def _insert(ctx, root):
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    summary = launch_insertion(ctx, source_id=sid, wait_for_retries_seconds=0)
    assert summary.status == "completed"
    return sid


def _quarantined(conn) -> dict[str, str]:
    rows = conn.execute(text("""SELECT so.path, ps.reason AS reason
                                FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
                                WHERE ps.status = 'quarantined'""")).fetchall()
    return {r.path.rsplit("/", 1)[-1]: r.reason for r in rows}


def test_docx_with_embedded_workbook_and_deck_has_both_children_done_and_searchable(ctx, tmp_path):
    root = tmp_path / "embedded"
    root.mkdir()
    shutil.copy(FORMATS / "tika_testWORD_embeded.docx", root / "memo.docx")
    _insert(ctx, root)
    with ctx.db.engine.connect() as conn:
        kids = {r.path.rsplit(" » ", 1)[1]: r for r in conn.execute(text(
            """SELECT c.id, c.path, c.content_hash FROM source_object c JOIN source_object p ON p.id = c.parent_id
               WHERE p.external_id = 'memo.docx'""")).fetchall()}
        workbook = kids["Microsoft_Office_Excel_Worksheet1.xlsx"]
        deck = kids["Microsoft_Office_PowerPoint_Presentation2.pptx"]
        for kid in (workbook, deck):
            states = dict(conn.execute(text("SELECT stage, status FROM processing_state WHERE source_object_id = :i"),
                                       {"i": kid.id}).fetchall())
            assert states["convert"] == states["index"] == "done", states
        assert get_artifact(conn, workbook.content_hash, STRUCTURED_JSON)["format"] == "xlsx"
        assert get_artifact(conn, deck.content_hash, STRUCTURED_JSON)["format"] == "pptx"
        skip = [h for h in _hits(conn, "SKIP1") if h.source_object_id == workbook.id]
        fox = {h.source_object_id for h in _hits(conn, "quick brown fox")}
        quarantined = _quarantined(conn)
    assert skip and skip[0].part == "sheet" and skip[0].part_key == "sheet:Sheet1"
    assert {workbook.id, deck.id} <= fox
    # only the legacy .doc inside may wait for a converter; the workbook, the deck and the memo never do
    assert set(quarantined) <= {"memo.docx » Microsoft_Office_Word_97_-_2003_Document1.doc"}, quarantined


def test_workbooks_decks_opendocument_and_a_photo_convert_and_hits_name_their_part(ctx, tmp_path):
    root = tmp_path / "estate"
    root.mkdir()
    for name in ("tika_testEXCEL.xlsx", "tika_testPPT.pptx", "tika_testODFwithOOo3.odt", "tika_testFooter.ods",
                 "tika_testJPEG_EXIF.jpg", "tika_testEXCEL_protected_passtika.xlsx", "tika_testODTEncrypted.odt",
                 "tika_testPPT.xps"):
        shutil.copy(FORMATS / name, root / name.removeprefix("tika_"))
    _insert(ctx, root)
    with ctx.db.engine.connect() as conn:
        quarantined = _quarantined(conn)
        squares = _hits(conn, "Numbers and their Squares")
        mystery = _hits(conn, "Mystery")
        canon = _hits(conn, "Canon EOS 40D")
        struck = _hits(conn, "complex")
        photo = conn.execute(text("SELECT id FROM source_object WHERE external_id = 'testJPEG_EXIF.jpg'")).scalar()
    assert quarantined == {"testEXCEL_protected_passtika.xlsx": "password_required",
                           "testODTEncrypted.odt": "password_required", "testPPT.xps": "unsupported_format"}
    assert [(h.part, h.part_key) for h in squares][:1] == [("sheet", "sheet:Feuil1")]
    assert [(h.part, h.part_key) for h in mystery][:1] == [("slide", "slide:3")]
    assert [h.source_object_id for h in canon] == [photo] and canon[0].part == "image_info"
    assert any(h.part == "deleted" and h.path.endswith("testODFwithOOo3.odt") for h in struck)
