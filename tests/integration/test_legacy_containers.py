"""Legacy Office, archives, TNEF and signed mail through the whole pipeline (real PostgreSQL, real workers).

DESIGN.md "Converter routing" and "Quarantine reasons": a legacy ``.doc`` waits as ``needs_converter`` while
LibreOffice is absent (here: ``components.libreoffice`` points at nothing) and is released and converted once it
is there; zip members, the attachments inside a ``winmail.dat`` and those of an S/MIME signed Outlook message
become documents of their own, linked to their container, and are searchable.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from sqlalchemy import text

from ki.adapters.search.search import search
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.store.artifacts import STRUCTURED_JSON, get_artifact
from tests.helpers.ki_command import run_ki

pytestmark = pytest.mark.timeout(300)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats" / "legacy"
SIGNED_MSG = "simplejavamail_S_MIME test message signed.msg"


def _estate(tmp_path: Path, *names: str) -> Path:
    root = tmp_path / "estate"
    root.mkdir()
    for name in names:
        shutil.copy(FIXTURES / name, root / name)
    return root


def _run(ctx, sid: int) -> None:
    assert launch_insertion(ctx, source_id=sid, wait_for_retries_seconds=0).status == "completed"


def _rows(ctx, stage: str = "convert") -> dict[str, tuple]:
    with ctx.db.engine.connect() as conn:
        return {r.path.rsplit("/", 1)[-1]: (r.status, r.reason, r.message) for r in conn.execute(text(
            """SELECT so.path, ps.status, ps.reason, ps.last_error->>'message' AS message FROM processing_state ps
               JOIN source_object so ON so.id = ps.source_object_id WHERE ps.stage = :s"""), {"s": stage})}


def _hits(ctx, query: str) -> set[str]:
    hits = search(ctx.db.engine, query, principals=None, operator=True, mode="lexical").hits
    return {h.path.rsplit(" » ", 1)[-1].rsplit("/", 1)[-1] for h in hits}


def _body(ctx, name: str) -> dict:
    with ctx.db.engine.connect() as conn:
        h = conn.execute(text("SELECT content_hash FROM source_object WHERE path LIKE :p"),
                         {"p": f"%{name}"}).scalar_one()
        return get_artifact(conn, h, STRUCTURED_JSON)


def test_legacy_word_waits_for_libreoffice_then_is_released_and_read(make_ctx, data_dir, tmp_path):
    set_config_value(data_dir, "components.libreoffice", str(tmp_path / "no-such-dir" / "soffice"))
    ctx = make_ctx()
    sid = register_local_source(ctx, _estate(tmp_path, "tika_testWORD_2006ml.doc", "tika_testEXCEL.xls"))
    scan_source(ctx, sid)
    _run(ctx, sid)
    rows = _rows(ctx)
    status, reason, message = rows["tika_testWORD_2006ml.doc"]
    assert (status, reason) == ("quarantined", "needs_converter")
    assert "apt-get install libreoffice-writer-nogui" in message
    assert rows["tika_testEXCEL.xls"][0] == "done"  # .xls needs no component
    env = {k: v for k, v in os.environ.items() if not k.startswith("KI_")}
    env |= {"KI_DATA_DIR": str(ctx.settings.data_dir), "KI_DATABASE_URL": ctx.settings.database_url}
    assert "libreoffice: not installed: those files wait as needs_converter" in run_ki(env, "status").stdout

    set_config_value(data_dir, "components.libreoffice", "soffice")  # the installed one (CI installs it)
    status = json.loads(run_ki(env, "status", "--json").stdout)
    assert [(c["name"], c["available"]) for c in status["converters"]][0] == ("libreoffice", True)
    _run(ctx, sid)
    assert _rows(ctx)["tika_testWORD_2006ml.doc"][0] == "done"
    assert _rows(ctx, "index")["tika_testWORD_2006ml.doc"][0] == "done"
    body = _body(ctx, "tika_testWORD_2006ml.doc")
    assert body["metadata"]["converted_by"] == "libreoffice" and "frog" not in body["text"]
    assert any(r["kind"] == "del" and "frog" in r["text"] for r in body["revisions"])
    assert "tika_testWORD_2006ml.doc" in _hits(ctx, "frog")  # the struck word stays searchable


def test_zip_members_are_documents_with_their_archive_paths(ctx, tmp_path):
    sid = register_local_source(ctx, _estate(tmp_path, "tika_testZipEncrypted.zip", "tika_test-zip-of-zip.zip",
                                             "tika_testZip_relative.zip"))
    scan_source(ctx, sid)
    _run(ctx, sid)
    with ctx.db.engine.connect() as conn:
        paths = sorted(r.path.split("/estate/", 1)[1] for r in conn.execute(
            text("SELECT path FROM source_object WHERE parent_id IS NOT NULL")))
    assert paths == ["tika_test-zip-of-zip.zip » html-within-zip.zip",
                     "tika_test-zip-of-zip.zip » html-within-zip.zip » text.html",
                     "tika_testZipEncrypted.zip » unencrypted.txt"]
    assert {"text.html"} <= _hits(ctx, "just some text")
    assert "unencrypted.txt" in _hits(ctx, "hello world")
    refused = _body(ctx, "tika_testZipEncrypted.zip")["metadata"]["refused"]
    assert [(r["path"], r["reason"]) for r in refused] == [("encrypted.txt", "encrypted")]
    assert _body(ctx, "tika_testZip_relative.zip")["metadata"]["refused"][0]["reason"] == "unsafe_path"
    with ctx.db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM processing_state WHERE status = 'quarantined'")).scalar() == 0


def test_winmail_dat_in_a_mail_and_a_signed_outlook_message_give_their_attachments(ctx, tmp_path):
    sid = register_local_source(ctx, _estate(tmp_path, "mimekit_ukr.eml", SIGNED_MSG,
                                             "mozilla_alice.sig.SHA256.opaque.eml", "mozilla_alice.env.eml"))
    scan_source(ctx, sid)
    _run(ctx, sid)
    rows = _rows(ctx)
    assert rows["mimekit_ukr.eml » message.html"][0] == "done"
    assert rows[f"{SIGNED_MSG} » 03-07-2005 errata SharnErrata.pdf"][0] == "done"
    assert rows["mozilla_alice.env.eml"][:2] == ("quarantined", "encrypted")
    signed = _body(ctx, SIGNED_MSG)
    assert signed["metadata"]["signature"][0]["signer"] == "Benny Bottema"
    assert "For testing purposes in the Simple Java Mail project." in signed["text"]
    assert "mozilla_alice.sig.SHA256.opaque.eml" in _hits(ctx, "test message from Alice")
