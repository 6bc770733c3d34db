"""A walled matter's file names never reach a token whose principal may not see them — REST and MCP.

The reproduction: the README's assistant token (``read:work_item`` + ``search`` + a principal, here with
``read:pipeline`` too) searched correctly but listed work items, failure groups (sample paths, messages
repeating the file name) and ``GET /api/quarantine/{id}`` of any object, walled or not. Now every list and
detail is filtered by the token's principal (counts of hidden items shown, names never); a token without
a principal is an operator token and sees everything. Real PostgreSQL, a real run, a real served app,
the ``mcp`` SDK's client. Cost: ~30-60 s.
"""

from __future__ import annotations

import json

import httpx
import pytest
from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.api.app import create_app
from ki.app.launch import launch_insertion
from ki.app.tokens import create_token
from tests.helpers.mcp_client import call_tools
from tests.helpers.served import serve_app

pytestmark = pytest.mark.timeout(600)
WALLED = "Halvorsen"


@pytest.fixture
def walled(make_ctx, tmp_path):
    """(base URL, {name: headers}, ctx, {path: object id}) after one real run over an estate with a walled
    matter (its files and one of its quarantines named Halvorsen)."""
    root = tmp_path / "share"
    (root / "Offen").mkdir(parents=True)
    (root / f"Mandat {WALLED}").mkdir()
    for name in ("Brief an Mandant.txt", "Vertrag Lieferung.txt"):
        (root / "Offen" / name).write_text(f"{name}: Vertrag über die Lieferung von Waren.\n", encoding="utf-8")
    (root / "Offen" / "kaputt.pdf").write_bytes(b"%PDF-1.7\nnot a pdf\n")
    for name in (f"{WALLED} Vergleich.txt", f"{WALLED} Schriftsatz.txt"):
        (root / f"Mandat {WALLED}" / name).write_text(f"{name}: Vergleich mit {WALLED} AS.\n", encoding="utf-8")
    (root / f"Mandat {WALLED}" / f"{WALLED} kaputt.pdf").write_bytes(b"%PDF-1.7\nnot a pdf either\n")
    (root / f"Mandat {WALLED}" / ".ki-grants.json").write_text(
        json.dumps({"allow": ["group:partners"], "inherit": False}), encoding="utf-8")
    ctx = make_ctx(workers=2)
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    assert launch_insertion(ctx, trigger="cli", source_id=sid, wait_for_retries_seconds=0).status == "completed"
    with ctx.db.engine.connect() as conn:
        ids = dict(conn.execute(text("SELECT path, id FROM source_object WHERE source_id = :s"), {"s": sid}).fetchall())
    scopes = ["read:work_item", "write:work_item", "read:pipeline", "search"]
    headers = {name: {"Authorization": "Bearer " + create_token(ctx.db.engine, name=name, scopes=scopes,
                                                                principal=principal)[1]}
               for name, principal in (("assistant", "user:alice"), ("partner", "group:partners"),
                                       ("operator", None))}
    app = create_app(ctx)
    with serve_app(app) as base:
        yield base, headers, ctx, ids
        app.state.ki.launcher.wait_idle(60)


def _walled_id(ids: dict[str, int], suffix: str) -> int:
    return next(i for p, i in ids.items() if p.endswith(suffix))


def test_a_principal_never_sees_a_walled_matters_names(walled):
    base, h, ctx, ids = walled
    quarantined = _walled_id(ids, f"{WALLED} kaputt.pdf")
    with ctx.db.engine.connect() as conn:
        walled_item = conn.execute(text("SELECT work_item_id FROM processing_state WHERE source_object_id = :o "
                                        "AND stage = 'convert'"), {"o": quarantined}).scalar_one()

    def rest(name: str) -> dict[str, httpx.Response]:
        return {
            "items": httpx.get(f"{base}/v1/work-items?limit=500", headers=h[name]),
            "groups": httpx.get(f"{base}/v1/work-items/groups", headers=h[name]),
            "quarantine": httpx.get(f"{base}/api/quarantine", headers=h[name]),
            "detail": httpx.get(f"{base}/api/quarantine/{quarantined}", headers=h[name]),
            "item": httpx.get(f"{base}/v1/work-items/work_item:{walled_item}", headers=h[name]),
            "preview": httpx.post(f"{base}/v1/work-items/retry?kind=convert", headers=h[name],
                                  json={"dry_run": True}),
            "search": httpx.get(f"{base}/v1/search", params={"q": WALLED}, headers=h[name]),
        }

    seen = rest("assistant")
    for what, r in seen.items():
        assert WALLED not in r.text, (what, r.text[:500])
    assert seen["detail"].status_code == 404 and seen["item"].status_code == 404
    items = seen["items"].json()
    assert items["hidden"] >= 3 and items["items"]  # the open folder's items are listed, the walled counted
    quarantine = seen["quarantine"].json()
    assert quarantine["total"] == 2 and quarantine["hidden"] == 1 and len(quarantine["items"]) == 1
    groups = seen["groups"].json()["groups"]
    assert sum(g["count"] for g in groups) == 2 and sum(g["hidden_samples"] for g in groups) == 1
    assert seen["preview"].json()["count"] == 2 and seen["preview"].json()["hidden_samples"] == 1
    # a principal behind the wall, and an operator token (no principal), see the names
    for name in ("partner", "operator"):
        other = rest(name)
        assert other["detail"].status_code == 200 and WALLED in other["detail"].text
        assert WALLED in other["items"].text and WALLED in other["quarantine"].text
        assert other["items"].json()["hidden"] == 0
    assert WALLED in rest("partner")["search"].text
    # MCP alike
    outcomes = call_tools(f"{base}/mcp/full", h["assistant"], [
        ("list_work_items", {"limit": 500}), ("list_failure_groups", {}),
        ("get_work_item", {"id": f"work_item:{walled_item}"}), ("search", {"query": WALLED}),
        ("retry_work_items", {"kind": "convert"}), ("pipeline_status", {})])
    for kind, payload in outcomes:
        assert WALLED not in json.dumps(payload), (kind, payload)
    assert outcomes[0][0] == "ok" and outcomes[0][1]["hidden"] >= 3
    assert outcomes[2][0] == "tool_error" and "not_found" in outcomes[2][1]
    assert outcomes[3][1]["hits"] == []


def test_a_principal_acts_only_on_what_it_may_see_and_reads_no_walled_name_in_the_audit(walled):
    """Writes and the audit log alike: a principal's bulk retry leaves the walled matter's items as they
    are (counted ``hidden``), its retry of a walled item is an unknown id, and the audit entries about
    walled files (and the folder an operator typed as a filter) never reach it."""
    base, h, ctx, ids = walled
    quarantined = _walled_id(ids, f"{WALLED} kaputt.pdf")
    with ctx.db.engine.connect() as conn:
        walled_item = conn.execute(text("SELECT work_item_id FROM processing_state WHERE source_object_id = :o "
                                        "AND stage = 'convert'"), {"o": quarantined}).scalar_one()

    def bulk(name: str, query: str) -> dict:
        dry = httpx.post(f"{base}/v1/work-items/retry?{query}", headers=h[name], json={"dry_run": True})
        assert dry.status_code == 200, dry.text
        real = httpx.post(f"{base}/v1/work-items/retry?{query}", headers=h[name],
                          json={"dry_run": False, "confirmation_token": dry.json()["confirmation_token"]})
        assert real.status_code == 200, real.text
        return real.json()

    done = bulk("assistant", "kind=convert")
    assert (done["acted"], done["hidden"], done["remaining"]) == (1, 1, 0), done
    assert WALLED not in json.dumps(done)
    with ctx.db.engine.connect() as conn:  # the walled item was not touched
        assert conn.execute(text("SELECT status FROM processing_state WHERE work_item_id = :w"),
                            {"w": walled_item}).scalar_one() == "quarantined"
    for verb in ("retry", "cancel"):
        r = httpx.post(f"{base}/v1/work-items/work_item:{walled_item}/{verb}", headers=h["assistant"])
        assert r.status_code == 404 and WALLED not in r.text, r.text
    mcp = call_tools(f"{base}/mcp/full", h["assistant"], [("retry_work_item", {"id": f"work_item:{walled_item}"})])
    assert mcp[0][0] == "tool_error" and "not_found" in mcp[0][1] and WALLED not in json.dumps(mcp)
    # the operator acts on the walled matter: an entry about its file, and a filter naming its folder
    r = httpx.post(f"{base}/v1/work-items/work_item:{walled_item}/retry", headers=h["operator"])
    assert r.status_code == 200, r.text
    bulk("operator", f"path_prefix=Mandat {WALLED}/nothing here")
    seen = httpx.get(f"{base}/api/audit?limit=500", headers=h["assistant"])
    assert seen.status_code == 200 and WALLED not in seen.text, seen.text
    assert seen.json()["hidden"] >= 1
    assert {"work_items_retry"} <= {e["action"] for e in seen.json()["entries"]}
    full = httpx.get(f"{base}/api/audit?limit=500", headers=h["operator"]).json()
    assert full["hidden"] == 0 and WALLED in json.dumps(full)
    assert any(e["action"] == "work_item_retry" and e["source_object_id"] == quarantined for e in full["entries"])
