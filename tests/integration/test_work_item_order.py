"""A work-item retry never runs a stage before its predecessors — against a real served app.

The reproduction: cancelling, then retrying, the waiting ``index`` item of a file whose ``convert`` is
quarantined ran index first and quarantined it ``internal_error`` ("convert has not completed"). Now the
retry releases the file's earliest unfinished stage (convert), as the quarantine retry does, and index
waits for it; once convert is fixed, the run finishes both in order. Real PostgreSQL, a real run.
Cost: ~30-60 s.
"""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import text

from ki.api.app import create_app
from tests.helpers.served import serve_app
from tests.helpers.work_items import CORRUPT, faulty_estate

pytestmark = pytest.mark.timeout(600)


def _rows(ctx, oid: int) -> dict[str, tuple[str, str | None]]:
    with ctx.db.engine.connect() as conn:
        return {r.stage: (r.status, r.reason) for r in conn.execute(
            text("SELECT stage, status, reason FROM processing_state WHERE source_object_id = :o"), {"o": oid})}


def test_retrying_a_later_stage_releases_the_earliest_unfinished_one(make_ctx, data_dir, tmp_path, monkeypatch):
    ctx, ids, faults, h = faulty_estate(make_ctx, data_dir, tmp_path / "share", monkeypatch)
    oid = ids[CORRUPT[0]]
    assert _rows(ctx, oid)["convert"][0] == "quarantined"
    with ctx.db.engine.connect() as conn:
        index_item = conn.execute(text("SELECT work_item_id FROM processing_state WHERE source_object_id = :o "
                                       "AND stage = 'index'"), {"o": oid}).scalar_one()
    app = create_app(ctx)
    with serve_app(app) as base:
        url = f"{base}/v1/work-items/work_item:{index_item}"
        cancelled = httpx.post(f"{url}/cancel", headers=h["operator"])
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        faults.active = False  # the cause is fixed: convert succeeds from now on
        retried = httpx.post(f"{url}/retry", headers=h["operator"])
        assert retried.status_code == 200, retried.text
        body = retried.json()
        assert body["released_stage"] == "convert" and body["status"] == "waiting"
        assert "earlier stage convert" in body["message"]
        assert app.state.ki.launcher.wait_idle(120)
        rows = _rows(ctx, oid)
        assert rows["convert"][0] == "done" and rows["index"][0] == "done", rows
        history = httpx.get(url, headers=h["reader"]).json()["history"]
        assert "internal_error" not in str(history)
