"""``/v1/work-items`` over HTTP against a real ``ki serve`` app on a real port, real PostgreSQL, real runs.

Issue 18 "Tests": the same fault across files is one group and different faults are not; filters; cursor
paging returns every item exactly once while rows change; history survives retries; a bulk retry of "the
infrastructure casualties of stage X since T" releases exactly those; a deterministic failure retried
quarantines again; running items refused (409); cancel then retry; the confirmation token refuses a
changed filter or count; every scope case (no token, read-only token writing, revoked, wrong scope).
Faults are injected by replacing our own stage handlers (the store is never mocked). Cost: ~40-90 s.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import text

from ki.api.app import create_app
from ki.app.tokens import revoke
from ki.core.taxonomies import PIPELINE_STAGE_ORDER, WAITING_FOR_PREVIOUS_STAGE
from ki.store import claims as q
from tests.helpers.served import serve_app
from tests.helpers.state import rows
from tests.helpers.work_items import CORRUPT, FLAKY_INDEX, N_DOCS, OUTAGE, faulty_estate

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def served(make_ctx, data_dir, tmp_path, monkeypatch):
    """(base URL, headers by token name, ctx, ids, faults, app) after one real run with the faults."""
    ctx, ids, faults, headers = faulty_estate(make_ctx, data_dir, tmp_path / "share", monkeypatch)
    app = create_app(ctx)
    with serve_app(app) as base:
        yield base, headers, ctx, ids, faults, app
        app.state.ki.launcher.wait_idle(120)


def get(base, path, headers, **params):
    return httpx.get(base + path, headers=headers, params=params, timeout=30)


def post(base, path, headers, json=None, **params):
    return httpx.post(base + path, headers=headers, params=params, json=json, timeout=30)


def item_of(base, headers, oid, kind):
    page = get(base, "/v1/work-items", headers, kind=kind, limit=500).json()
    return next(i for i in page["items"] if i["source_object_id"] == oid)


def test_groups_filters_and_detail(served):
    base, h, ctx, ids, _faults, _app = served
    r = get(base, "/v1/work-items/groups", h["reader"])
    assert r.status_code == 200, r.text
    groups = {(g["kind"], g["count"], g["infrastructure"]): g for g in r.json()["groups"]}
    assert set(groups) == {("convert", 5, False), ("convert", 3, True), ("index", 1, False)}
    corrupt = groups[("convert", 5, False)]
    assert corrupt["error_class"] == "ValueError" and "is not a zip file" in corrupt["message"]
    assert len(corrupt["sample_paths"]) == 3 and all(p.endswith(".txt") for p in corrupt["sample_paths"])
    assert corrupt["first_seen"] <= corrupt["last_seen"]

    failed = get(base, "/v1/work-items", h["reader"], status="failed").json()["items"]
    assert sorted(i["source_object_id"] for i in failed) == sorted(ids[i] for i in [*CORRUPT, *FLAKY_INDEX])
    assert all(i["bucket"] == "quarantined" and i["id"].startswith("work_item:") for i in failed)
    awaiting = get(base, "/v1/work-items", h["reader"], bucket="failed").json()["items"]
    assert sorted(i["source_object_id"] for i in awaiting) == sorted(ids[i] for i in OUTAGE)
    assert all(i["status"] == "runnable" and i["next_retry_at"] for i in awaiting)
    infra = get(base, "/v1/work-items", h["reader"], infrastructure="true").json()["items"]
    assert {i["id"] for i in infra} == {i["id"] for i in awaiting}
    by_sig = get(base, "/v1/work-items", h["reader"], signature=corrupt["signature"]).json()["items"]
    assert len(by_sig) == 5
    assert len(get(base, "/v1/work-items", h["reader"], status="pending", kind="index").json()["items"]) == 8
    assert get(base, "/v1/work-items", h["reader"], path_prefix="/nowhere/").json()["items"] == []
    later = datetime.now(UTC).isoformat()
    assert get(base, "/v1/work-items", h["reader"], since=later).json()["items"] == []
    assert get(base, "/v1/work-items", h["reader"], status="nonsense").status_code == 422
    assert get(base, "/v1/work-items", h["reader"], cursor="garbage").status_code == 422

    one = get(base, f"/v1/work-items/{failed[0]['id']}", h["reader"]).json()
    assert one["history"][0]["outcome"] == "quarantined" and one["history"][0]["error_class"] == "ValueError"
    assert one["max_attempts"] == 3 and one["lease"] is None
    assert get(base, "/v1/work-items/work_item:00000000-0000-0000-0000-000000000000", h["reader"]).status_code == 404
    assert get(base, "/v1/work-items/not-an-id", h["reader"]).status_code == 404


def test_cursor_paging_returns_every_item_once_while_rows_change(served):
    base, h, ctx, ids, _faults, _app = served
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"kind": "fetch", "limit": 5, **({"cursor": cursor} if cursor else {})}
        page = get(base, "/v1/work-items", h["reader"], **params).json()
        seen += [i["id"] for i in page["items"]]
        pages += 1
        # rows change between pages: every fetch row is touched (updated_at moves), and a new file arrives
        with ctx.db.engine.begin() as conn:
            conn.execute(text("UPDATE processing_state SET updated_at = now() WHERE stage = 'fetch'"))
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert len(seen) == len(set(seen)) == N_DOCS


def test_bulk_retry_of_the_infrastructure_casualties_releases_exactly_those(served):
    base, h, ctx, ids, faults, app = served
    # an earlier casualty (yesterday's outage) is outside "since T": it stays as it is
    early = ids[OUTAGE[0]]
    with ctx.db.engine.begin() as conn:
        conn.execute(text("UPDATE processing_state SET updated_at = now() - interval '1 day' "
                          "WHERE source_object_id = :o AND stage = 'convert'"), {"o": early})
    since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    casualties = [ids[i] for i in OUTAGE[1:]]
    flt = {"kind": "convert", "infrastructure": "true", "since": since}
    r = post(base, "/v1/work-items/retry", h["operator"], json={"dry_run": True}, **flt)
    assert r.status_code == 200, r.text
    preview = r.json()
    assert preview["count"] == 2 and len(preview["sample"]) == 2 and preview["confirmation_token"]
    # no token / a changed filter / a changed limit are refused, and nothing moves
    assert post(base, "/v1/work-items/retry", h["operator"], json={}, **flt).json()["error"] == \
        "confirmation_required"
    token = preview["confirmation_token"]
    r = post(base, "/v1/work-items/retry", h["operator"], json={"confirmation_token": token}, kind="convert")
    assert (r.status_code, r.json()["error"]) == (409, "confirmation_mismatch")
    r = post(base, "/v1/work-items/retry", h["operator"], json={"confirmation_token": token, "limit": 2}, **flt)
    assert r.status_code == 409
    # a changed count: one more outage casualty since the preview
    extra = ids[CORRUPT[0]]
    with ctx.db.engine.begin() as conn:
        conn.execute(text("""UPDATE processing_state SET status = 'failed', last_error = last_error ||
                             '{"infrastructure": "docling answered HTTP 503"}' WHERE source_object_id = :o
                             AND stage = 'convert'"""), {"o": extra})
    r = post(base, "/v1/work-items/retry", h["operator"], json={"confirmation_token": token}, **flt)
    assert (r.status_code, r.json()["error"]) == (409, "confirmation_mismatch")
    assert "now 3" in r.json()["message"]
    with ctx.db.engine.begin() as conn:
        conn.execute(text("""UPDATE processing_state SET status = 'quarantined', last_error = last_error -
                             'infrastructure' WHERE source_object_id = :o AND stage = 'convert'"""), {"o": extra})

    before = {oid: rows(ctx, oid) for oid in ids}
    faults.active = False  # Docling is back
    r = post(base, "/v1/work-items/retry", h["operator"], json={"confirmation_token": token}, **flt)
    assert r.status_code == 200, r.text
    result = r.json()
    assert (result["acted"], result["remaining"], result["next_confirmation_token"]) == (2, 0, None)
    assert "queued" in result["message"]
    app.state.ki.launcher.wait_idle(120)
    with ctx.db.engine.connect() as conn:
        retried = conn.execute(text("""SELECT source_object_id FROM work_item_attempt WHERE outcome = 'retried'
                                       ORDER BY 1""")).scalars().all()
        audit = conn.execute(text("SELECT actor, details FROM audit_log WHERE action = 'work_items_retry'")).all()
    assert retried == sorted(casualties)
    assert len(audit) == 1 and audit[0].actor == "operator" and audit[0].details["count"] == 2
    assert audit[0].details["filter"] == {"kind": "convert", "infrastructure": True, "since": since}
    for oid in ids:
        now = rows(ctx, oid)
        if oid in casualties:
            assert now["convert"]["status"] == "done" and now["index"]["status"] == "done"
        else:  # nothing else moved
            assert {s: now[s]["status"] for s in PIPELINE_STAGE_ORDER} == \
                {s: before[oid][s]["status"] for s in PIPELINE_STAGE_ORDER}
    # the history of a released item keeps its outage failure before the retry and the success after it
    item = item_of(base, h["reader"], casualties[0], "convert")
    detail = get(base, f"/v1/work-items/{item['id']}", h["reader"]).json()
    assert [e["outcome"] for e in detail["history"]] == ["failed", "retried", "done"]
    assert detail["history"][0]["infrastructure"] == "docling answered HTTP 503"
    assert detail["history"][1]["actor"] == "operator"


def test_single_retry_cancel_and_running_items(served):
    base, h, ctx, ids, faults, app = served
    corrupt = item_of(base, h["reader"], ids[CORRUPT[0]], "convert")
    # a deterministic failure retried (the file did not change) quarantines again
    r = post(base, f"/v1/work-items/{corrupt['id']}/retry", h["operator"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "runnable" and "queued" in body["message"]
    assert body["invalidated_stages"] == list(PIPELINE_STAGE_ORDER[2:])
    app.state.ki.launcher.wait_idle(120)
    detail = get(base, f"/v1/work-items/{corrupt['id']}", h["reader"]).json()
    assert detail["status"] == "failed"
    assert [e["outcome"] for e in detail["history"]] == ["quarantined", "retried", "quarantined"]
    assert detail["history"][0]["signature"] == detail["history"][2]["signature"]
    # a done item is not retried; a running one is refused for retry and cancel alike
    done = item_of(base, h["reader"], ids[11], "fetch")
    assert post(base, f"/v1/work-items/{done['id']}/retry", h["operator"]).json()["error"] == "not_retryable"
    with ctx.db.engine.begin() as conn:  # its retry falls due and a worker claims it
        conn.execute(text("UPDATE processing_state SET next_retry_at = now() WHERE source_object_id = :o "
                          "AND stage = 'convert'"), {"o": ids[OUTAGE[0]]})
        busy = q.claim_row(conn, ids[OUTAGE[0]], "convert", worker="busy-worker", run_id=None)
        assert busy is not None
    outage = item_of(base, h["reader"], ids[OUTAGE[0]], "convert")
    assert outage["status"] == "running" and outage["lease"]["worker"] == "busy-worker"
    for action in ("retry", "cancel"):
        r = post(base, f"/v1/work-items/{outage['id']}/{action}", h["operator"])
        assert (r.status_code, r.json()["error"]) == (409, "running")
    with ctx.db.engine.begin() as conn:  # the worker gives it back (a run would wait for it otherwise)
        assert q.release_claim(conn, busy)
    # cancel then retry
    other = item_of(base, h["reader"], ids[CORRUPT[1]], "convert")
    r = post(base, f"/v1/work-items/{other['id']}/cancel", h["operator"])
    assert r.status_code == 200, r.text
    now = rows(ctx, ids[CORRUPT[1]])
    assert (now["convert"]["status"], now["convert"]["reason"]) == ("skipped", "cancelled")
    assert all(now[s]["reason"] == WAITING_FOR_PREVIOUS_STAGE for s in PIPELINE_STAGE_ORDER[2:])
    assert get(base, "/v1/work-items", h["reader"], status="cancelled").json()["items"][0]["id"] == other["id"]
    assert post(base, f"/v1/work-items/{other['id']}/cancel", h["operator"]).json()["error"] == "not_cancellable"
    faults.active = False
    r = post(base, f"/v1/work-items/{other['id']}/retry", h["operator"])
    assert r.status_code == 200, r.text
    app.state.ki.launcher.wait_idle(120)
    assert rows(ctx, ids[CORRUPT[1]])["index"]["status"] == "done"
    hist = [e["outcome"] for e in get(base, f"/v1/work-items/{other['id']}", h["reader"]).json()["history"]]
    assert hist == ["quarantined", "cancelled", "retried", "done"]
    with ctx.db.engine.connect() as conn:
        actions = conn.execute(text("SELECT action FROM audit_log WHERE action LIKE 'work_item%' ORDER BY id")
                               ).scalars().all()
    assert actions == ["work_item_retry", "work_item_cancel", "work_item_retry"]


def test_bulk_cancel_in_batches_with_limit(served):
    base, h, ctx, ids, _faults, _app = served
    flt = {"status": "failed", "kind": "convert"}
    preview = post(base, "/v1/work-items/cancel", h["operator"], json={"dry_run": True, "limit": 2}, **flt).json()
    assert preview["count"] == 5
    r = post(base, "/v1/work-items/cancel", h["operator"],
             json={"confirmation_token": preview["confirmation_token"], "limit": 2}, **flt).json()
    assert (r["acted"], r["remaining"]) == (2, 3)
    r = post(base, "/v1/work-items/cancel", h["operator"],
             json={"confirmation_token": r["next_confirmation_token"], "limit": 2}, **flt).json()
    assert (r["acted"], r["remaining"]) == (2, 1)
    assert len(get(base, "/v1/work-items", h["reader"], status="cancelled").json()["items"]) == 4


def test_every_scope_case(served):
    base, h, ctx, _ids, _faults, _app = served
    any_item = get(base, "/v1/work-items", h["reader"], status="failed").json()["items"][0]["id"]
    assert get(base, "/v1/work-items", {}).status_code == 401
    assert get(base, "/v1/work-items", {"Authorization": "Bearer ki_unknown"}).status_code == 401
    assert get(base, "/v1/work-items", h["pipeline"]).status_code == 403  # read:pipeline is not read:work_item
    assert post(base, f"/v1/work-items/{any_item}/retry", h["reader"]).status_code == 403
    assert post(base, "/v1/work-items/retry", h["reader"], json={"dry_run": True}).status_code == 403
    assert post(base, f"/v1/work-items/{any_item}/cancel", {}).status_code == 401
    assert get(base, "/v1/work-items/groups", h["operator"]).status_code == 200  # write implies read
    assert get(base, "/v1/work-items", h["gone"]).status_code == 200
    with ctx.db.engine.connect() as conn:
        gone_id = conn.execute(text("SELECT id FROM api_token WHERE name = 'gone'")).scalar_one()
    revoke(ctx.db.engine, gone_id)
    assert get(base, "/v1/work-items", h["gone"]).status_code == 401
    assert post(base, f"/v1/work-items/{any_item}/retry", h["gone"]).status_code == 401
