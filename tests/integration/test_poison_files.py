"""A file that makes Docling Serve fail while every other file converts is a poison file: its faults
count toward its own budget and it is quarantined ``poison_suspected`` with the evidence, the breaker
never opening for it; the same server down for everyone is an outage that quarantines nothing.

Spec: work-queue.md "Poison messages"; docs/design-decisions.md "Whose fault is a fault that only one
file meets". A real loopback Docling (tests/helpers/docling_stub.py) answers HTTP 500 for one upload
name only (``DoclingStub.by_file``); images go to Docling (``pipeline.ocr.prefer_docling``).
"""

from __future__ import annotations

import io

import pytest
from PIL import Image, ImageDraw
from sqlalchemy import text

from ki.adapters.breaker import BREAKERS
from ki.adapters.convert import docling as docling_mod
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.core.served import SERVED
from tests.helpers.docling_stub import DoclingStub, Scenario

pytestmark = pytest.mark.timeout(180)

FILES = 6
POISON = "poison.png"


@pytest.fixture(autouse=True)
def _fresh():
    docling_mod.reset_cooldown()
    BREAKERS.reset()
    SERVED.reset()
    yield
    docling_mod.reset_cooldown()
    BREAKERS.reset()
    SERVED.reset()


@pytest.fixture
def stub():
    with DoclingStub() as server:
        yield server


def _png(i: int) -> bytes:
    image = Image.new("RGB", (320, 200), (255, 255 - 20 * i, 255))
    ImageDraw.Draw(image).text((20, 80), f"Scan {i}: Aktenvermerk", fill=(0, 0, 0))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _estate(tmp_path):
    root = tmp_path / "scans"
    root.mkdir()
    (root / POISON).write_bytes(_png(0))
    for i in range(1, FILES):
        (root / f"scan{i}.png").write_bytes(_png(i))
    return root


def _convert_rows(ctx) -> dict[str, dict]:
    with ctx.db.engine.connect() as conn:
        return {r.external_id: {"status": r.status, "reason": r.reason, "last_error": r.last_error,
                                "attempts": r.attempts}
                for r in conn.execute(text("""
                    SELECT so.external_id, ps.status, ps.reason, ps.last_error, ps.attempts
                    FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
                    WHERE ps.stage = 'convert'"""))}


def _setup(make_ctx, data_dir, stub, monkeypatch, tmp_path, retry_base_seconds=0.05):
    monkeypatch.setenv("KI_PIPELINE__RETRY_BASE_SECONDS", str(retry_base_seconds))
    ctx = make_ctx(infrastructure_retry_max_seconds=max(0.2, retry_base_seconds), workers=2)
    set_config_value(data_dir, "components.docling_url", stub.url)
    set_config_value(data_dir, "components.docling_client_timeout_seconds", 10)
    ctx.reload_config()
    sid = register_local_source(ctx, _estate(tmp_path))
    scan_source(ctx, sid)
    return ctx, sid


def test_one_file_failing_while_the_others_convert_is_quarantined_poison_suspected(
        make_ctx, data_dir, stub, monkeypatch, tmp_path):
    stub.by_file[POISON] = Scenario(outcome="http", http_status=500, on="submit")
    ctx, sid = _setup(make_ctx, data_dir, stub, monkeypatch, tmp_path)
    summary = launch_insertion(ctx, source_id=sid, wait_for_retries_seconds=20)
    assert summary.status == "completed"
    rows = _convert_rows(ctx)
    poison = rows.pop(POISON)
    assert (poison["status"], poison["reason"]) == ("quarantined", "poison_suspected"), poison["last_error"]
    evidence = poison["last_error"]["details"]
    assert evidence["dependency"] == "docling" and "500" in evidence["fault"]
    assert evidence["others_succeeded"] >= 1 and evidence["stages"] == ["convert"]
    # its budget: max_attempts (3) faults held against it, besides outage-presumed ones
    assert poison["attempts"] - poison["last_error"]["infrastructure_attempts"] == 3
    assert {r["status"] for r in rows.values()} == {"done"} and len(rows) == FILES - 1
    # the breaker never opened for one poison file
    assert not BREAKERS.open_dependencies() and not list(BREAKERS.episodes)
    with ctx.db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM work_item_attempt WHERE stage = 'convert' "
                                 "AND reason = 'poison_suspected'")).scalar() >= 3
    submits = [r for r in stub.requests if r.path.endswith("/v1/convert/file/async")]
    assert sum(1 for r in submits if r.files and r.files[0][1] == POISON) == poison["attempts"]


def test_the_same_server_down_for_everyone_quarantines_nothing(make_ctx, data_dir, stub, monkeypatch, tmp_path):
    stub.scenario = Scenario(outcome="http", http_status=500, on="submit")
    ctx, sid = _setup(make_ctx, data_dir, stub, monkeypatch, tmp_path, retry_base_seconds=30)
    for _ in range(4):  # four runs, each retrying every file once (their retries made due)
        with ctx.db.engine.begin() as conn:
            conn.execute(text("UPDATE processing_state SET next_retry_at = now() WHERE status = 'failed'"))
        BREAKERS.reset()
        launch_insertion(ctx, source_id=sid, wait_for_retries_seconds=0)
    rows = _convert_rows(ctx)
    assert len(rows) == FILES
    for name, r in rows.items():
        assert r["status"] == "failed", (name, r["last_error"])
        outage = r["last_error"]["infrastructure"]  # the 500, or a call the open breaker refused
        assert r["reason"] is None and ("500" in outage or "circuit breaker open" in outage), outage
        assert r["attempts"] == r["last_error"]["infrastructure_attempts"]  # none held against the file
    assert max(r["attempts"] for r in rows.values()) > 3  # past max_attempts, still not the file's fault
    with ctx.db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM processing_state WHERE status = 'quarantined'")).scalar() == 0
    # the server answers again: the next run converts every file
    stub.scenario = Scenario()
    BREAKERS.reset()
    with ctx.db.engine.begin() as conn:
        conn.execute(text("UPDATE processing_state SET next_retry_at = now() WHERE status = 'failed'"))
    launch_insertion(ctx, source_id=sid, wait_for_retries_seconds=5)
    assert {r["status"] for r in _convert_rows(ctx).values()} == {"done"}
