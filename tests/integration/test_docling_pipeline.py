"""Docling Serve inside the pipeline: routing, capability release, outages and a rejected request.

DESIGN.md "Converter routing" and "Quarantine reasons" (capability quarantines are released when
configuration adds the capability); issue "Parse stage at full breadth" items 1 and 3.
"""

from __future__ import annotations

import shutil

import pytest
from sqlalchemy import text

from ki.adapters.convert import docling as docling_mod
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from tests.helpers.docling_stub import DoclingStub, Scenario

pytestmark = pytest.mark.timeout(120)

SCAN = "pdf/tika_testOCR.pdf"  # image-only page: needs OCR


@pytest.fixture(autouse=True)
def _fresh_cooldown():
    docling_mod.reset_cooldown()
    yield
    docling_mod.reset_cooldown()


@pytest.fixture
def stub():
    with DoclingStub() as server:
        yield server


def _states(ctx, stage="convert"):
    with ctx.db.engine.connect() as conn:
        return {
            r.external_id: (r.status, r.reason, r.infrastructure)
            for r in conn.execute(
                text("""SELECT so.external_id, ps.status, ps.reason, ps.last_error->>'infrastructure' AS infrastructure
                        FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
                        WHERE ps.stage = :s"""),
                {"s": stage},
            )
        }


@pytest.fixture
def estate(tmp_path, real_corpus):
    root = tmp_path / "scans"
    root.mkdir()
    shutil.copy(real_corpus / SCAN, root / "scan.pdf")
    (root / "note.txt").write_text("Aktenvermerk: Telefonat mit dem Mandanten.", encoding="utf-8")
    return root


def _no_ocr(monkeypatch):
    """Pin the routing to the no-OCR install so the test is about Docling alone."""
    import ki.adapters.convert.router as router

    if hasattr(router, "ocr_enabled"):
        monkeypatch.setattr(router, "ocr_enabled", lambda config: False)


def test_scan_quarantined_without_docling_is_released_and_converted_once_configured(
    make_ctx, data_dir, estate, stub, monkeypatch
):
    _no_ocr(monkeypatch)
    ctx = make_ctx()
    sid = register_local_source(ctx, estate)
    scan_source(ctx, sid)
    assert launch_insertion(ctx, source_id=sid, wait_for_retries_seconds=0).status == "completed"
    assert _states(ctx)["scan.pdf"][:2] == ("quarantined", "needs_ocr")

    stub.scenario = Scenario(fixture="scanned_pdf")
    set_config_value(data_dir, "components.docling_url", stub.url)
    set_config_value(data_dir, "components.docling_client_timeout_seconds", 20)
    summary = launch_insertion(ctx, source_id=sid, wait_for_retries_seconds=0)
    assert summary.status == "completed"
    assert _states(ctx)["scan.pdf"][0] == "done"
    assert _states(ctx, "index")["scan.pdf"][0] == "done"
    assert stub.count("/v1/convert/file/async") == 1  # the text file never went to Docling
    with ctx.db.engine.connect() as conn:
        body = conn.execute(text("""SELECT a.body FROM artifact a
                                    JOIN source_object so ON so.content_hash = a.content_hash
                                    WHERE so.external_id = 'scan.pdf' AND a.kind = 'structured_json'""")).scalar()
    assert body["converter"] == "ki.docling" and body["text"].strip()


def test_docling_outage_never_quarantines(make_ctx, data_dir, estate, stub, monkeypatch):
    _no_ocr(monkeypatch)
    monkeypatch.setenv("KI_PIPELINE__RETRY_BASE_SECONDS", "0.05")
    ctx = make_ctx(infrastructure_retry_max_seconds=0.2)
    set_config_value(data_dir, "components.docling_url", stub.url)
    set_config_value(data_dir, "components.docling_client_timeout_seconds", 5)
    stub.scenario = Scenario(outcome="http", http_status=503, on="submit")
    sid = register_local_source(ctx, estate)
    scan_source(ctx, sid)
    launch_insertion(ctx, source_id=sid, wait_for_retries_seconds=0.3)
    status, reason, infrastructure = _states(ctx)["scan.pdf"]
    assert status == "failed" and "503" in infrastructure
    # the outage ends: the next run converts it; nothing was ever quarantined
    stub.scenario = Scenario(fixture="scanned_pdf")
    launch_insertion(ctx, source_id=sid, wait_for_retries_seconds=2)
    assert _states(ctx)["scan.pdf"][0] == "done"
    with ctx.db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM processing_state WHERE status = 'quarantined'")).scalar() == 0


def test_rejected_request_quarantines_that_file_and_the_run_goes_on(make_ctx, data_dir, estate, stub, monkeypatch):
    """A Docling 422 is that file's verdict (``conversion_failed`` with the server's detail), not a
    configuration error that stops every run: the other file is processed."""
    _no_ocr(monkeypatch)
    ctx = make_ctx()
    set_config_value(data_dir, "components.docling_url", stub.url)
    stub.scenario = Scenario(outcome="http", http_status=422, on="submit")
    sid = register_local_source(ctx, estate)
    scan_source(ctx, sid)
    summary = launch_insertion(ctx, source_id=sid, wait_for_retries_seconds=0)
    assert summary.status == "completed"
    status, reason, _ = _states(ctx)["scan.pdf"]
    assert (status, reason) == ("quarantined", "conversion_failed")
    assert _states(ctx, "index")["note.txt"][0] == "done"
    with ctx.db.engine.connect() as conn:
        last_error = conn.execute(text("""SELECT last_error FROM processing_state ps JOIN source_object so
                                          ON so.id = ps.source_object_id
                                          WHERE so.external_id = 'scan.pdf' AND stage = 'convert'""")).scalar()
    assert last_error["class"] == "DoclingRequestRejected" and last_error["deterministic"] is True
    assert last_error["details"]["http_status"] == 422 and "422" in last_error["message"]
