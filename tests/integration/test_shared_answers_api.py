"""Answers shared by concurrent readers on a real ``ki serve``: never across access sets, never past a change.

Real PostgreSQL, the embedded (tantivy) index written through the backend, the app served by uvicorn on a loopback
port. The shared answers are given a one-hour life here, so whatever a test sees change is the key's doing (the
index's generation, the caller's access set, this server's own actions), never the clock:

* concurrent searches by two principals with different access sets, and by two tokens of one principal, each get
  exactly what their access set may see; one page is computed per access set;
* a document written and applied is found by the very next search, and an access change (granted, then revoked)
  shows in the very next search;
* concurrent status and runs reads share one computation each; a run this server launches is in the next runs
  read, and its end in the read after it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from ki.adapters.search.backend import ChunkRow, IndexDocument
from ki.adapters.search.factory import backend_for
from ki.api.app import create_app
from ki.api.shared_answers import SharedAnswers
from ki.app.tokens import create_token
from ki.domain.access.projection import AccessProjection
from tests.helpers.postgres import insert_objects
from tests.helpers.served import serve_app

pytestmark = pytest.mark.timeout(300)
WORD = "Zebrafinkenzucht"
NEW_WORD = "Quittengelee"
HOUR = 3600.0


def _write(backend, oid: int, body: str, allowed: tuple[str, ...]) -> None:
    backend.write_document(IndexDocument(oid, f"{oid:064x}", f"Akte {oid}", [ChunkRow(0, body)],
                                         AccessProjection(allowed), None))


@pytest.fixture
def served(ctx):
    """(base URL, headers by token name, object ids, backend, server state): object 0 only ``user:anna`` may see,
    object 1 everyone; objects 2 and 3 are not indexed yet."""
    backend = backend_for(ctx.db, ctx.config)
    ids = insert_objects(ctx, 4)
    _write(backend, ids[0], f"Kaufvertrag {WORD} nur für Anna", ("user:anna",))
    _write(backend, ids[1], f"Mietvertrag {WORD} für alle", ("*",))
    assert backend.projection().catch_up(block=True, timeout=60)
    tokens = {name: create_token(ctx.db.engine, name=name, scopes=scopes, principal=principal)[1]
              for name, scopes, principal in (("anna", ["search"], "user:anna"), ("anna-2", ["search"], "user:anna"),
                                              ("bob", ["search"], "user:bob"),
                                              ("operator", ["read:pipeline", "write:pipeline"], None))}
    app = create_app(ctx)
    state = app.state.ki
    state.search_answers = SharedAnswers(HOUR)
    state.status_answers = SharedAnswers(HOUR)
    state.runs_answers = SharedAnswers(HOUR)
    with serve_app(app) as base:
        yield base, {k: {"Authorization": f"Bearer {v}"} for k, v in tokens.items()}, ids, backend, state
        state.launcher.wait_idle(60)


def _hits(base: str, headers: dict, word: str) -> list[int]:
    r = httpx.get(f"{base}/v1/search", params={"q": word, "mode": "lexical"}, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    return sorted(h["source_object_id"] for h in r.json()["hits"])


def test_a_shared_page_never_reaches_another_access_set(served):
    base, headers, ids, _backend, state = served
    who = ["anna", "bob", "anna-2"] * 20
    with ThreadPoolExecutor(12) as pool:
        seen = list(pool.map(lambda name: (name, _hits(base, headers[name], WORD)), who))
    for name, hits in seen:
        assert hits == (ids[:2] if name.startswith("anna") else [ids[1]]), (name, hits)
    assert state.search_answers.computed == 2  # one page per access set: both of anna's tokens share hers


def test_a_change_of_the_index_is_in_the_next_search(served):
    base, headers, ids, backend, state = served
    assert _hits(base, headers["bob"], NEW_WORD) == []
    assert _hits(base, headers["bob"], NEW_WORD) == []
    assert state.search_answers.computed == 1  # the second read was the shared page
    _write(backend, ids[2], f"Rezept {NEW_WORD} für alle", ("*",))
    assert backend.projection().catch_up(block=True, timeout=60)
    assert _hits(base, headers["bob"], NEW_WORD) == [ids[2]]  # found by the first search after the change
    backend.update_access(ids[2], AccessProjection(("user:anna",)))  # revoked for bob
    assert backend.projection().catch_up(block=True, timeout=60)
    assert _hits(base, headers["bob"], NEW_WORD) == []
    assert _hits(base, headers["anna"], NEW_WORD) == [ids[2]]
    backend.update_access(ids[0], AccessProjection(("user:anna", "user:bob")))  # granted to bob
    assert backend.projection().catch_up(block=True, timeout=60)
    assert _hits(base, headers["bob"], WORD) == ids[:2]


def test_status_and_runs_are_shared_and_a_launch_is_read_at_once(served):
    base, headers, _ids, _backend, state = served
    op = headers["operator"]
    with httpx.Client(base_url=base, headers=op, timeout=60) as client, ThreadPoolExecutor(8) as pool:
        pages = list(pool.map(lambda _: client.get("/api/runs").json(), range(16)))
        statuses = list(pool.map(lambda _: client.get("/api/status").json(), range(16)))
        assert all(p == pages[0] for p in pages) and pages[0]["runs"] == [] and pages[0]["generated_at"]
        assert all(s == statuses[0] for s in statuses)
        assert state.runs_answers.computed == 1 and state.status_answers.computed == 1
        launched = client.post("/api/actions/pipeline")
        assert launched.status_code == 202, launched.text
        run_id = launched.json()["run"]["id"]
        assert [r["id"] for r in client.get("/api/runs").json()["runs"]] == [run_id]
        assert state.launcher.wait_idle(120)
        assert client.get("/api/runs").json()["runs"][0]["status"] == "completed"
        assert client.get("/api/status").json()["runs"] == []
