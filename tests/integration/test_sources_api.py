"""``GET /api/sources``: each source's permission model and how many of its documents everyone sees.

A real insertion of the small estate into a real PostgreSQL; the app in-process (``TestClient``). One file
is made private on the share before the run (mode 0600), every other one is readable by others (0644):
the source reads the share, so all but that one (and the two poison files, never indexed) are open to
everyone. Then the source is made public deliberately, and the model follows.
"""

from __future__ import annotations

import os

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from ki.api.app import create_app
from ki.store.sources import set_source_config_key
from tests.helpers.console import insert_estate, make_tokens, small_estate

pytestmark = pytest.mark.timeout(600)


def test_sources_name_their_permission_model_and_open_documents(make_ctx, shared, tmp_path):
    ctx = make_ctx(workers=2)
    root = small_estate(shared, tmp_path)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    for p in files:
        os.chmod(p, 0o644)
    private = next(p for p in files if p.suffix == ".docx" and "Eingang" not in p.parts)
    os.chmod(private, 0o600)
    app = create_app(ctx)
    tokens = make_tokens(ctx.db.engine)
    with TestClient(app) as client:
        assert client.get("/api/sources").status_code == 401
        assert client.get("/api/sources", headers=tokens.header("searcher")).status_code == 403
        assert client.get("/api/sources", headers=tokens.header("reader")).json() == []
        summary = insert_estate(ctx, root)
        assert summary.status == "completed"
        (source,) = client.get("/api/sources", headers=tokens.header("reader")).json()
        with ctx.db.engine.connect() as conn:
            indexed = conn.execute(text("SELECT count(DISTINCT source_object_id) FROM chunk")).scalar_one()
        assert source["path"] == str(root) and source["kind"] == "local"
        assert source["permissions"] == "share"
        assert source["files"] == len(files) and source["quarantined"] == 2
        assert source["indexed"] == indexed == len(files) - 2
        assert source["open_to_everyone"] == indexed - 1  # all but the private file
        assert source["last_run"]["status"] == "completed" and source["last_scan_at"]
        with ctx.db.engine.begin() as conn:
            set_source_config_key(conn, source["id"], "permissions", "public")
        (public,) = client.get("/api/sources", headers=tokens.header("reader")).json()
        assert public["permissions"] == "public"
        app.state.ki.launcher.wait_idle(120)
