"""The console API with httpx against a real PostgreSQL and real insertion runs.

Issue 17 "Tests": every endpoint, every auth case (no token, wrong scope, revoked), 409 on env pins
and stale versions, 422 without a write, the save/re-run rule table row by row, retry semantics,
the preview's counts against the buckets, costs against scripted usage rows, runs. The app runs
in-process (``TestClient`` is httpx over ASGI); local runs execute in the app's background thread
exactly as under ``ki serve``. Cost: ~30-60 s (four small real insertion runs).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from ki.adapters.convert.soffice import find_soffice
from ki.api.app import create_app
from ki.app.config_edits import config_version
from ki.core.taxonomies import PIPELINE_STAGE_ORDER
from ki.store.status import bucket_counts
from tests.helpers.console import insert_estate, make_tokens, small_estate

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def console(make_ctx):
    """(client, tokens, ctx) on a fresh database; waits for background runs at the end."""
    ctx = make_ctx(workers=2)
    app = create_app(ctx)
    tokens = make_tokens(ctx.db.engine)
    with TestClient(app) as client:
        yield client, tokens, ctx
        app.state.ki.launcher.wait_idle(120)


@pytest.fixture
def inserted(console, shared, tmp_path):
    """The console on a database holding the small estate after one real insertion run."""
    client, tokens, ctx = console
    summary = insert_estate(ctx, small_estate(shared, tmp_path))
    assert summary.status == "completed"
    return client, tokens, ctx


def wait_for_run(client, headers, run_id: int, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = client.get("/api/runs", headers=headers).json()["runs"]
        run = next(r for r in runs if r["id"] == run_id)
        if run["status"] in ("completed", "failed"):
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} did not finish in {timeout} s")


# --- authentication and scopes ----------------------------------------------------------------------


def test_auth_cases(console):
    client, tokens, ctx = console
    r = client.get("/api/status")
    assert r.status_code == 401 and r.json()["error"] == "unauthenticated"
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert client.get("/api/status", headers={"Authorization": "Bearer ki_nonsense"}).status_code == 401
    assert client.get("/api/status", headers={"Authorization": "Basic dXNlcjpwdw=="}).status_code == 401
    assert client.get("/api/status", headers=tokens.header("reader")).status_code == 200
    # wrong scope: a search-only token may not read the pipeline; a reader may not write or administer
    r = client.get("/api/status", headers=tokens.header("searcher"))
    assert r.status_code == 403 and "read:pipeline" in r.json()["message"]
    assert client.post("/api/actions/pipeline", headers=tokens.header("reader")).status_code == 403
    assert client.put("/api/config", headers=tokens.header("reader"),
                      json={"changes": {"pipeline.max_file_mb": 9}, "version": "0"}).status_code == 403
    assert client.get("/api/tokens", headers=tokens.header("operator")).status_code == 403
    # admin implies every scope
    assert client.get("/api/status", headers=tokens.header("admin")).status_code == 200
    # revoked: refused from the next request on
    from ki.app.tokens import revoke
    from ki.store.tokens import list_tokens

    with ctx.db.engine.connect() as conn:
        reader_id = next(t.id for t in list_tokens(conn) if t.name == "reader")
    revoke(ctx.db.engine, reader_id)
    r = client.get("/api/status", headers=tokens.header("reader"))
    assert r.status_code == 401 and "revoked" in r.json()["message"]
    # tokens are stored hashed: the token text is nowhere in the table
    with ctx.db.engine.connect() as conn:
        dump = json.dumps([list(r) for r in conn.execute(text("SELECT * FROM api_token")).fetchall()], default=str)
    assert all(t not in dump for t in tokens.values.values())
    # /healthz is open and names no path
    health = client.get("/healthz")
    assert health.status_code == 200
    body = health.json()
    assert {c["name"] for c in body["components"]} == {"database", "orchestrator", "libreoffice"}
    office = next(c for c in body["components"] if c["name"] == "libreoffice")
    installed = find_soffice("soffice") is not None
    assert (office["status"], office["detail"].split(" ", 1)[0]) == (("ok", "converts") if installed else
                                                                    ("warning", "not"))
    assert str(ctx.settings.data_dir) not in health.text and "/tmp" not in health.text


def test_page_session_cookie_and_same_origin(console):
    client, tokens, _ = console
    page = client.get("/", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"] == "/login"
    own = {"Origin": "http://testserver"}
    bad = client.post("/login", data={"token": "ki_wrong"}, headers=own, follow_redirects=False)
    assert bad.status_code == 401 and "not valid" in bad.text
    cross = client.post("/login", data={"token": tokens.values["operator"]}, headers={"Origin": "https://evil.example"},
                        follow_redirects=False)
    assert cross.status_code == 403
    ok = client.post("/login", data={"token": tokens.values["operator"]}, headers=own, follow_redirects=False)
    assert ok.status_code == 303
    cookie = ok.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    page = client.get("/")
    assert page.status_code == 200 and 'id="stages"' in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    # the cookie authenticates reads; a write needs the page's own origin
    assert client.get("/api/session").json() == {"name": "operator", "scopes": ["read:pipeline", "write:pipeline"],
                                                 "principal": None, "via": "cookie"}
    r = client.post("/api/actions/pipeline")
    assert r.status_code == 403 and r.json()["error"] == "cross_origin"
    r = client.post("/api/actions/pipeline", headers={"Origin": "https://evil.example"})
    assert r.status_code == 403
    r = client.post("/api/actions/pipeline", headers={"Origin": "http://testserver"})
    assert r.status_code == 202
    client.post("/logout")
    assert client.get("/api/status").status_code == 401


# --- status, runs, actions -----------------------------------------------------------------------------


def test_status_counts_match_the_buckets_and_runs_are_listed(inserted):
    client, tokens, ctx = inserted
    status = client.get("/api/status", headers=tokens.header("reader")).json()
    with ctx.db.engine.connect() as conn:
        counts = bucket_counts(conn)
    assert [s["stage"] for s in status["stages"]] == list(PIPELINE_STAGE_ORDER)
    assert [s["name"] for s in status["stages"]][:3] == ["Fetch", "Parse", "Classify"]
    for s in status["stages"]:
        assert s["buckets"] == counts[s["stage"]]
        assert s["total"] == sum(counts[s["stage"]].values()) == 11
    assert status["stages"][1]["buckets"]["quarantined"] == 2  # the two poison files, at Parse
    assert status["stages"][0]["buckets"]["done"] == 11
    assert status["runs"] == []
    runs = client.get("/api/runs", headers=tokens.header("reader")).json()
    assert runs["total"] == 1 and runs["runs"][0]["status"] == "completed" and runs["runs"][0]["kind"] == "insertion"
    assert runs["runs"][0]["processed"] > 0 and runs["runs"][0]["duration_seconds"] > 0
    assert client.get("/api/runs?kind=sync", headers=tokens.header("reader")).json()["total"] == 0
    assert client.get("/api/runs?limit=0", headers=tokens.header("reader")).status_code == 422
    # text no field can hold (NUL) is refused before it reaches the database (found by the fuzzer)
    for bad in (client.get("/api/quarantine?error_class=%00", headers=tokens.header("reader")),
                client.put("/api/config", headers=tokens.header("operator"),
                           json={"changes": {"firm.name": "a\u0000b"}, "version": "0"})):
        assert bad.status_code == 422 and "NUL" in bad.json()["message"]
    assert not (ctx.settings.data_dir / "config.json").exists()


def test_start_pipeline_runs_in_the_background_with_a_follow_up(console, shared, tmp_path):
    client, tokens, ctx = console
    from ki.adapters.sources.scan import register_local_source, scan_source

    scan_source(ctx, register_local_source(ctx, small_estate(shared, tmp_path)))
    op = tokens.header("operator")
    started = time.monotonic()
    first = client.post("/api/actions/pipeline", headers=op)
    assert first.status_code == 202
    assert time.monotonic() - started < 10  # the request does not wait for the run
    run = first.json()["run"]
    assert run["status"] == "running" and run["trigger"] == "api" and run["provider"] == "local"
    second = client.post("/api/actions/pipeline", headers=op).json()
    status = client.get("/api/status", headers=op).json()
    if second["follow_up"]:  # the first run was still active: no second runner beside it
        assert second["run"]["id"] == run["id"]
    assert wait_for_run(client, op, run["id"])["status"] == "completed"
    ctx_app = client.app.state.ki
    assert ctx_app.launcher.wait_idle(120)
    runs = client.get("/api/runs", headers=op).json()["runs"]
    assert all(r["status"] == "completed" for r in runs)
    if second["follow_up"]:
        assert [r["trigger"] for r in runs] == ["follow_up", "api"]
    assert status["stages"][0]["total"] == 11
    with ctx.db.engine.connect() as conn:
        actions = conn.execute(text("SELECT actor, action FROM audit_log WHERE action = 'pipeline_start'")).fetchall()
    assert [tuple(a) for a in actions] == [("operator", "pipeline_start")] * 2


def test_active_run_progress_in_status(console, shared, tmp_path):
    client, tokens, ctx = console
    from ki.store.runs import active_runs

    with ctx.db.engine.begin() as conn:
        conn.execute(text("""INSERT INTO pipeline_runs (kind, label, provider, status, trigger, processed, done,
                             started_at) VALUES ('insertion', 'Insertion', 'local', 'running', 'api', 30, 30,
                             now() - interval '10 seconds')"""))
        assert len(active_runs(conn)) == 1
    status = client.get("/api/status", headers=tokens.header("reader")).json()
    (run,) = status["runs"]
    assert run["processed"] == 30 and run["total"] == 30  # nothing owed: an empty pipeline
    assert 2.0 < run["rate_per_second"] < 3.5


def test_status_counts_are_shared_and_stay_fresh(console):
    client, tokens, ctx = console
    from tests.helpers.postgres import insert_objects

    oids = insert_objects(ctx, 3)
    with ctx.db.engine.begin() as conn:
        conn.execute(text("INSERT INTO processing_state (source_object_id, stage, status) "
                          "SELECT unnest(CAST(:o AS bigint[])), 'fetch', 'pending'"), {"o": oids})
    rd = tokens.header("reader")
    first = client.get("/api/status", headers=rd).json()
    assert first["stages"][0]["buckets"]["pending"] == 3
    with ctx.db.engine.begin() as conn:  # another process finishes the rows
        conn.execute(text("UPDATE processing_state SET status = 'done'"))
    started = time.monotonic()
    while client.get("/api/status", headers=rd).json()["stages"][0]["buckets"]["done"] != 3:
        assert time.monotonic() - started < 5, "the shared count did not refresh"
        time.sleep(0.1)
    later = client.get("/api/status", headers=rd).json()
    assert later["generated_at"] > first["generated_at"]


# --- configuration --------------------------------------------------------------------------------------


def test_config_fields_pins_versions_and_validation(console, monkeypatch):
    client, tokens, ctx = console
    op = tokens.header("operator")
    monkeypatch.setenv("KI_PIPELINE__CLAIM_TIMEOUT_SECONDS", "600")
    cfg = client.get("/api/config", headers=op).json()
    f = cfg["fields"]
    assert {"value": 512, "default": 512, "minimum": 1, "source": "default", "type": "integer",
            "editable": True}.items() <= f["pipeline.max_file_mb"].items()
    assert f["pipeline.claim_timeout_seconds"]["source"] == "env"
    assert f["pipeline.claim_timeout_seconds"]["env_var"] == "KI_PIPELINE__CLAIM_TIMEOUT_SECONDS"
    assert f["pipeline.claim_timeout_seconds"]["value"] == 600 and not f["pipeline.claim_timeout_seconds"]["editable"]
    assert f["components.orchestrator_provider"]["choices"] == ["local", "hatchet"]
    assert f["components.docling_api_key"]["secret"] and f["components.docling_api_key"]["value"] is None
    assert f["pipeline.stages.relate.enabled"]["run_rule"] == "on_enable"
    assert {s["stage"]: s["producer_version"] for s in cfg["stages"]}["relate"] == "mvp-10"
    version = cfg["version"]
    path = ctx.settings.data_dir / "config.json"

    def put(changes, v=version, **kw):
        return client.put("/api/config", headers=op, json={"changes": changes, "version": v}, **kw)

    # env-pinned → 409 naming the variable, nothing written (not even the other, valid change)
    r = put({"pipeline.max_file_mb": 64, "pipeline.claim_timeout_seconds": 60})
    assert r.status_code == 409 and r.json()["env_var"] == "KI_PIPELINE__CLAIM_TIMEOUT_SECONDS"
    assert not path.exists()
    # invalid → 422 with field errors, nothing written
    r = put({"pipeline.max_file_mb": 0, "pipeline.stages.relate.max_attempts": 50, "pipeline.nope": 1,
             "pipeline.stages.relate.producer_version": "x"})
    assert r.status_code == 422
    assert set(r.json()["fields"]) == {"pipeline.max_file_mb", "pipeline.stages.relate.max_attempts", "pipeline.nope",
                                       "pipeline.stages.relate.producer_version"}
    assert not path.exists()
    # no version → 428; a dry run writes nothing
    assert client.put("/api/config", headers=op, json={"changes": {"pipeline.max_file_mb": 64}}).status_code == 428
    dry = client.put("/api/config?dry_run=true", headers=op,
                     json={"changes": {"pipeline.stages.relate.rerun_token": "x1"}, "version": version}).json()
    assert dry["requires_run"] and dry["dry_run"] and not path.exists()
    # a good edit (If-Match works as well as the body field), then the same version again is stale
    r = client.put("/api/config", headers=op | {"If-Match": f'"{version}"'},
                   json={"changes": {"pipeline.max_file_mb": 64, "pipeline.stages.relate.max_attempts": 5}})
    assert r.status_code == 200, r.text
    saved = r.json()
    assert saved["changed"] == ["pipeline.max_file_mb", "pipeline.stages.relate.max_attempts"]
    assert saved["requires_run"] is False and saved["version"] == config_version(ctx.settings.data_dir) != version
    stale = put({"pipeline.max_file_mb": 32})
    assert stale.status_code == 409 and stale.json()["current_version"] == saved["version"]
    assert json.loads(path.read_text())["pipeline"]["max_file_mb"] == 64
    cfg = client.get("/api/config", headers=op).json()
    assert cfg["fields"]["pipeline.max_file_mb"]["source"] == "saved" and cfg["version"] == saved["version"]
    with ctx.db.engine.connect() as conn:
        row = conn.execute(text("SELECT actor, details FROM audit_log WHERE action = 'config_update'")).one()
    assert row.actor == "operator"
    assert row.details["changes"]["pipeline.max_file_mb"] == {"from": 512, "to": 64}


# The spec's rule, row by row: (key, from, to, requires a run).
RULE_TABLE = [
    ("pipeline.stages.relate.enabled", False, True, True),        # re-enabling a stage
    ("pipeline.stages.relate.enabled", True, False, False),       # disabling a stage
    ("pipeline.stages.relate.rerun_token", "", "r2", True),       # a stage version bump
    ("pipeline.stages.relate.max_attempts", 3, 7, False),
    ("pipeline.auto_insert_after_sync", True, False, False),
    ("pipeline.max_file_mb", 512, 100, False),
    ("pipeline.claim_timeout_seconds", 900, 300, False),
    ("pipeline.retry_base_seconds", 5, 2, False),
    ("components.docling_url", None, "http://docling:5001", True),  # a new converter releases capability quarantines
]


@pytest.mark.parametrize(("key", "before", "after", "needs_run"), RULE_TABLE)
def test_save_rerun_rule(console, key, before, after, needs_run):
    client, tokens, ctx = console
    op = tokens.header("operator")
    default = client.get("/api/config", headers=op).json()
    if default["fields"][key]["value"] != before:
        r = client.put("/api/config", headers=op, json={"changes": {key: before}, "version": default["version"]})
        assert r.status_code == 200, r.text
    version = client.get("/api/config", headers=op).json()["version"]
    r = client.put("/api/config", headers=op, json={"changes": {key: after}, "version": version})
    assert r.status_code == 200, r.text
    assert r.json()["requires_run"] is needs_run
    assert bool(r.json()["reasons"]) is needs_run
    # the page reads the same rule from the field's run_rule
    assert client.get("/api/config", headers=op).json()["fields"][key]["run_rule"] is not None or not needs_run


# --- quarantine and retry -------------------------------------------------------------------------------


def test_quarantine_list_detail_and_retry(inserted):
    client, tokens, ctx = inserted
    rd, op = tokens.header("reader"), tokens.header("operator")
    page = client.get("/api/quarantine", headers=rd).json()
    assert page["total"] == 2 and {i["stage"] for i in page["items"]} == {"convert"}
    assert {i["path"].rsplit("/", 1)[-1] for i in page["items"]} == {"kaputt.pdf", "defekt.docx"}
    item = page["items"][0]
    assert item["deterministic"] is True and "traceback" not in item["error"] and item["error"]["class"]
    assert page["facets"]["stage"] == {"convert": 2}
    reason = item["error"]["reason"]
    filtered = client.get(f"/api/quarantine?reason={reason}", headers=rd).json()
    assert filtered["total"] == sum(1 for i in page["items"] if i["error"]["reason"] == reason)
    assert client.get("/api/quarantine?stage=index", headers=rd).json()["total"] == 0
    paged = client.get("/api/quarantine?limit=1&offset=1", headers=rd).json()
    assert paged["total"] == 2 and len(paged["items"]) == 1 and paged["items"][0]["path"] == page["items"][1]["path"]
    oid = item["source_object_id"]
    detail = client.get(f"/api/quarantine/{oid}", headers=rd).json()
    conv = next(s for s in detail["stages"] if s["stage"] == "convert")
    assert detail["quarantined_stages"] == ["convert"]
    assert conv["error"]["traceback"] and conv["error"]["deterministic"] is True and conv["attempts"] == 1
    assert [s["bucket"] for s in detail["stages"]][2:] == ["waiting"] * 5
    assert client.get("/api/quarantine/999999", headers=rd).status_code == 404
    # retry: releases the earliest quarantined stage (even when a later one is asked for), starts a run
    r = client.post(f"/api/quarantine/{oid}/retry?stage=index", headers=op)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["released_stage"] == "convert" and body["requested_stage"] == "index"
    assert body["invalidated_stages"] == list(PIPELINE_STAGE_ORDER[2:])
    assert body["max_attempts"] == 3 and body["deterministic"] is True and "quarantine again" in body["warning"]
    assert body["previous_error"]["class"] == item["error"]["class"]
    assert body["run"]["trigger"] == "quarantine_retry"
    # while released it is not quarantined: a second retry is a 409 (or the run already re-quarantined it)
    wait_for_run(client, op, body["run"]["id"])
    client.app.state.ki.launcher.wait_idle(60)
    with ctx.db.engine.connect() as conn:
        audit = conn.execute(text("SELECT actor, details FROM audit_log WHERE action = 'quarantine_retry'")).one()
        again = conn.execute(text("SELECT status, attempts FROM processing_state WHERE source_object_id = :o "
                                  "AND stage = 'convert'"), {"o": oid}).one()
    assert audit.actor == "operator" and audit.details["overruled_error"]["class"] == item["error"]["class"]
    assert tuple(again) == ("quarantined", 1)  # deterministic: quarantined again on its first attempt
    # a row that is not quarantined → 409
    good = next(o for o, in ctx.db.engine.connect().execute(text(
        "SELECT source_object_id FROM processing_state WHERE stage = 'convert' AND status = 'done' LIMIT 1")))
    r = client.post(f"/api/quarantine/{good}/retry", headers=op)
    assert r.status_code == 409 and r.json()["error"] == "not_quarantined"
    assert client.post("/api/quarantine/0/retry", headers=op).status_code == 422


# --- re-run preview and re-run ---------------------------------------------------------------------------


def test_rerun_preview_counts_and_rerun(inserted):
    client, tokens, ctx = inserted
    op = tokens.header("operator")
    with ctx.db.engine.connect() as conn:
        counts = bucket_counts(conn)
    p = client.get("/api/stages/extract_decisions/rerun-preview", headers=op).json()
    c = counts["extract_decisions"]
    assert p["files"] == c["done"] + c["skipped"] + c["disabled"] == 9  # the poison files are still waiting
    assert p["buckets"] == {"done": c["done"], "skipped": c["skipped"], "disabled": c["disabled"]}
    assert p["downstream_stages"] == ["index"]
    assert p["spent_usd"] == 0.0 and p["estimate_usd"] == 0.0  # rules policies: no model calls
    assert p["estimate_seconds"] is not None and p["estimate_seconds"] > 0
    conv = client.get("/api/stages/convert/rerun-preview", headers=op).json()
    assert conv["downstream_stages"] == list(PIPELINE_STAGE_ORDER[2:])
    assert conv["per_stage"][0]["cache_hits"] == conv["files"] == 9
    assert client.get("/api/stages/nope/rerun-preview", headers=op).status_code == 422
    # "Re-run all files": bump the rerun_token, then start the run
    version = client.get("/api/config", headers=op).json()["version"]
    r = client.put("/api/config", headers=op, json={"changes": {"pipeline.stages.extract_decisions.rerun_token": "r1"},
                                                     "version": version})
    assert r.json()["requires_run"] is True
    run = client.post("/api/actions/pipeline", headers=op).json()["run"]
    done = wait_for_run(client, op, run["id"])
    assert done["status"] == "completed" and done["processed"] == 2 * 9  # extract_decisions + index, per file
    with ctx.db.engine.connect() as conn:
        versions = conn.execute(text("SELECT DISTINCT producer_version FROM processing_state "
                                     "WHERE stage = 'extract_decisions' AND producer_version IS NOT NULL")).scalars()
        assert list(versions) == ["mvp-1+r1"]


# --- costs and the model catalog -------------------------------------------------------------------------


def test_costs_against_scripted_usage(console):
    client, tokens, ctx = console
    from ki.adapters.agents.usage import record_usage
    from tests.helpers.postgres import insert_objects

    a, b, c = insert_objects(ctx, 3)
    with ctx.db.engine.begin() as conn:
        mid = conn.execute(text("INSERT INTO matter (project_id, reference, title) VALUES (1, '2024-0153', 'Miete') "
                                "RETURNING id")).scalar_one()
        conn.execute(text("INSERT INTO matter_assignment (source_object_id, matter_id, method) VALUES "
                          "(:a, :m, 'rules'), (:b, :m, 'rules')"), {"a": a, "b": b, "m": mid})
    now = datetime.now(UTC)
    old = now - timedelta(days=40)
    for oid, stage, model, pt, ct, at in [
        (a, "classify_matter", "gpt-4o-mini", 1_000_000, 0, now),        # $0.15
        (b, "classify_matter", "gpt-4o-mini", 0, 1_000_000, now),        # $0.60
        (c, "relate", "gpt-4o", 100_000, 10_000, now),                   # $0.25 + $0.10
        (a, "relate", "house-model", 5_000, 500, now),                   # no price: unpriced
        (b, "relate", "gpt-4o", 1_000_000, 0, old),                      # $2.50, outside the window
    ]:
        record_usage(ctx.db, stage=stage, model=model, source_object_id=oid, prompt_tokens=pt, completion_tokens=ct,
                     at=at)
    rd = tokens.header("reader")
    all_time = client.get("/api/costs", headers=rd).json()
    assert all_time["total_usd"] == pytest.approx(0.15 + 0.60 + 0.35 + 2.50)
    since = (now - timedelta(days=7)).isoformat()
    recent = client.get("/api/costs", headers=rd, params={"since": since}).json()
    by_stage = {s["key"]: s for s in recent["by_stage"]}
    assert by_stage["classify_matter"]["cost_usd"] == pytest.approx(0.75) and by_stage["classify_matter"]["calls"] == 2
    assert by_stage["relate"]["cost_usd"] == pytest.approx(0.35) and by_stage["relate"]["unpriced_calls"] == 1
    by_model = {m["key"]: m["cost_usd"] for m in recent["by_model"]}
    assert by_model == pytest.approx({"gpt-4o-mini": 0.75, "gpt-4o": 0.35, "house-model": 0.0})
    assert {m["key"]: m["cost_usd"] for m in recent["by_matter"]} == pytest.approx({"2024-0153": 0.75})
    assert client.get("/api/costs", headers=rd, params={"since": now.isoformat(), "until": since}).status_code == 422
    assert client.get("/api/costs", headers=rd, params={"since": "2026-01-01T00:00:00"}).status_code == 422
    preview = client.get("/api/stages/classify_matter/rerun-preview", headers=rd).json()
    assert preview["spent_usd"] == pytest.approx(0.75) and preview["spent_calls"] == 2


def test_model_catalog_resolves_aliases_through_the_gateway(console, monkeypatch):
    client, tokens, _ = console
    from ki.app.catalog import reset_catalog_cache
    from tests.helpers.loopback import JsonServer

    info = {"data": [{"model_name": "ki-classify", "litellm_params": {"model": "openai/gpt-4o-mini"},
                      "model_info": {"input_cost_per_token": 1.5e-07, "output_cost_per_token": 6e-07}},
                     {"model_name": "ki-relate", "litellm_params": {"model": "azure/house-model"}, "model_info": {}}]}
    models = {"data": [{"id": "ki-classify"}, {"id": "ki-relate"}, {"id": "gpt-4o"}]}
    rd = tokens.header("reader")
    with JsonServer({"/model/info": info, "/v1/models": models}) as gw:
        monkeypatch.setenv("KI_LLM_BASE_URL", gw.url)
        monkeypatch.setenv("KI_LLM_MODEL", "gpt-4o")
        reset_catalog_cache()
        version = client.get("/api/config", headers=rd).json()["version"]
        client.put("/api/config", headers=tokens.header("operator"), json={"version": version, "changes": {
            "pipeline.stages.classify_matter.model": "ki-classify", "pipeline.stages.relate.model": "ki-relate",
            "pipeline.stages.extract_metadata.model": "not-served"}})
        cat = client.get("/api/models/catalog", headers=rd).json()
        assert cat["gateway"] == "configured" and gw.url not in json.dumps(cat)
        e = {x["stage"]: x for x in cat["entries"]}
        assert {"alias": "ki-classify", "resolved": "openai/gpt-4o-mini",
                "kind": "gateway"}.items() <= e["classify_matter"].items()
        assert e["classify_matter"]["input_usd_per_million"] == pytest.approx(0.15)
        assert e["classify_matter"]["output_usd_per_million"] == pytest.approx(0.60)
        assert e["relate"]["resolved"] == "azure/house-model" and e["relate"]["input_usd_per_million"] is None
        assert "no price" in e["relate"]["reason"]
        assert e["extract_metadata"]["resolved"] is None
        assert "does not list not-served" in e["extract_metadata"]["reason"]
        assert e["extract_decisions"]["alias"] == "gpt-4o" and e["extract_decisions"]["resolved"] == "gpt-4o"
        assert e["extract_decisions"]["input_usd_per_million"] == pytest.approx(2.5)
        assert e["index"]["kind"] == "none"
        health = {c["name"]: c for c in client.get("/healthz").json()["components"]}
        assert health["model_gateway"]["status"] == "ok"
    reset_catalog_cache()
    cat = client.get("/api/models/catalog", headers=rd).json()  # the gateway is gone: bare aliases, with the reason
    e = {x["stage"]: x for x in cat["entries"]}
    assert e["classify_matter"]["alias"] == "ki-classify" and e["classify_matter"]["resolved"] is None
    assert "could not be asked" in e["classify_matter"]["reason"]
    reset_catalog_cache()


# --- tokens and audit over the API ------------------------------------------------------------------------


def test_token_endpoints_and_audit(console):
    client, tokens, _ = console
    adm = tokens.header("admin")
    made = client.post("/api/tokens", headers=adm, json={"name": "script", "scopes": ["read:pipeline"]})
    assert made.status_code == 201
    new = made.json()
    assert client.get("/api/status", headers={"Authorization": f"Bearer {new['token']}"}).status_code == 200
    again = client.post("/api/tokens", headers=adm, json={"name": "script", "scopes": ["read:pipeline"]})
    assert again.status_code == 422 and "already named" in again.json()["message"]
    assert client.post("/api/tokens", headers=adm, json={"name": "x", "scopes": ["root"]}).status_code == 422
    listed = client.get("/api/tokens", headers=adm).json()
    assert {t["name"] for t in listed} == {"reader", "operator", "admin", "searcher", "script"}
    assert all("token" not in t for t in listed)
    assert client.delete(f"/api/tokens/{new['id']}", headers=adm).json()["revoked_at"]
    assert client.get("/api/status", headers={"Authorization": f"Bearer {new['token']}"}).status_code == 401
    assert client.delete(f"/api/tokens/{new['id']}", headers=adm).status_code == 404
    audit = client.get("/api/audit", headers=tokens.header("reader")).json()
    assert [(e["actor"], e["action"]) for e in audit["entries"][:2]] == [("admin", "token_revoke"),
                                                                         ("admin", "token_create")]
