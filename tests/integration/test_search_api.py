"""``GET /v1/search`` and the MCP ``search`` tool on a real ``ki serve``: paging, permissions, refusals.

Issue 15 item 5 (paging in the API). Real PostgreSQL and the embedded (tantivy) index, written through the
backend with seeded random grants (hypothesis is not installed: the seed is printed in every assertion):
paging by cursor and by offset returns every content a principal may see exactly once and nothing else;
the MCP tool pages the same way; a malformed cursor, another query's or another principal's cursor is a
422 (a tool error on MCP) with nothing written; a token without ``search`` gets 403, a token without a
principal 403 ``no_principal``, no token 401. Cost: ~10-20 s.
"""

from __future__ import annotations

import random

import httpx
import pytest
from sqlalchemy import text

from ki.adapters.search.backend import ChunkRow, IndexDocument
from ki.adapters.search.factory import backend_for
from ki.api.app import create_app
from ki.app.tokens import create_token
from ki.domain.access.projection import AccessProjection, GrantLevel, compile_projection
from tests.helpers.mcp_client import call_tool
from tests.helpers.postgres import insert_objects
from tests.helpers.served import serve_app

pytestmark = pytest.mark.timeout(300)
PRINCIPALS = ["user:anna", "user:bob", "user:carl", "group:lit"]
SEED = 20261201
WORD = "Mandatsunterlagen"


def _levels(rng: random.Random) -> list[GrantLevel]:
    levels = []
    for scope in ("source", "folder", "document"):
        if rng.random() < 0.7:
            allow = tuple(rng.sample([*PRINCIPALS, "*"], rng.randint(0, 2)))
            deny = tuple(rng.sample(PRINCIPALS, rng.randint(0, 1))) if rng.random() < 0.3 else ()
            levels.append(GrantLevel(scope, scope, allow, deny, inherit=rng.random() < 0.8))
    return levels


@pytest.fixture
def served(ctx):
    """(base URL, tokens by name, {oid: projection}, {oid: content hash}, ctx) on an index of 36 objects,
    18 contents (objects 2k and 2k+1 share bytes, each with its own random grants)."""
    rng = random.Random(SEED)
    backend = backend_for(ctx.db, ctx.config)
    ids = insert_objects(ctx, 36)
    projections: dict[int, AccessProjection] = {}
    contents: dict[int, str] = {}
    for i, oid in enumerate(ids):
        h = f"{i // 2:064x}"
        contents[oid] = h
        projections[oid] = compile_projection(_levels(rng))
        filler = " ".join(rng.choice(["Frist", "Vertrag", "Kanzlei", "Akte", "Termin"]) for _ in range(12))
        body = f"{' '.join([WORD] * (1 + i // 2 % 5))} {filler} Dokument {i // 2}"
        backend.write_document(IndexDocument(oid, h, f"Akte {i // 2}", [ChunkRow(0, body)], projections[oid], None))
    tokens = {p: create_token(ctx.db.engine, name=f"s-{p}", scopes=["search"], principal=p)[1] for p in PRINCIPALS}
    tokens["no-principal"] = create_token(ctx.db.engine, name="s-none", scopes=["search"])[1]
    tokens["reader"] = create_token(ctx.db.engine, name="reader", scopes=["read:pipeline"], principal="user:anna")[1]
    app = create_app(ctx)
    with serve_app(app) as base:
        yield base, {k: {"Authorization": f"Bearer {v}"} for k, v in tokens.items()}, projections, contents, ctx
        app.state.ki.launcher.wait_idle(60)


def _get(base: str, headers: dict, **params) -> httpx.Response:
    return httpx.get(f"{base}/v1/search", params={"mode": "lexical", **params}, headers=headers, timeout=60)


def _pages(fetch, first: dict) -> list[list[dict]]:
    """Every page: ``fetch(params)`` → JSON body, following ``next_cursor``."""
    pages, params = [], dict(first)
    for _ in range(100):
        body = fetch(params)
        pages.append(body["hits"])
        if body["next_cursor"] is None:
            assert body["next_offset"] is None
            return pages
        params = {**first, "cursor": body["next_cursor"]}
    raise AssertionError("paging did not end")


def _written(ctx) -> tuple:
    with ctx.db.engine.connect() as conn:
        return tuple(conn.execute(text(sql)).scalar_one() for sql in (
            "SELECT count(*) FROM audit_log", "SELECT coalesce(max(seq), 0) FROM index_change",
            "SELECT count(*) FROM chunk", "SELECT coalesce(max(updated_at)::text, '') FROM chunk"))


def test_paging_returns_every_visible_hit_exactly_once(served):
    base, tokens, projections, contents, _ctx = served
    for principal in PRINCIPALS:
        visible = {contents[o] for o, p in projections.items() if p.visible_to([principal])}

        def fetch(params, h=tokens[principal], who=principal):
            r = _get(base, h, **params)
            assert r.status_code == 200, (SEED, who, r.text)
            assert r.json()["principal"] == who
            return r.json()

        whole = fetch({"q": WORD, "limit": 200})["hits"]
        for limit in (1, 4, 7):
            pages = _pages(fetch, {"q": WORD, "limit": limit})
            assert all(len(p) == limit for p in pages[:-1]) and len(pages[-1]) <= limit, (SEED, principal, limit)
            hits = [h for p in pages for h in p]
            assert [h["source_object_id"] for h in hits] == [h["source_object_id"] for h in whole], (SEED, limit)
            assert len({h["content_hash"] for h in hits}) == len(hits), (SEED, principal, limit)
            assert {h["content_hash"] for h in hits} == visible, (SEED, principal, limit)
            for h in hits:  # the copy shown, and every "also at" copy, is one this principal may see
                assert projections[h["source_object_id"]].visible_to([principal]), (SEED, principal, h)
        by_offset = []
        for offset in range(0, len(whole) + 5, 5):
            by_offset += fetch({"q": WORD, "limit": 5, "offset": offset})["hits"]
        assert [h["source_object_id"] for h in by_offset] == [h["source_object_id"] for h in whole]


def test_mcp_search_pages_with_the_same_cursor(served):
    base, tokens, projections, contents, _ctx = served
    url = f"{base}/mcp/full"
    principal = "user:bob"

    def fetch(params):
        err, body = call_tool(url, tokens[principal], "search", {**params, "mode": "lexical"})
        assert not err, body
        return body

    pages = _pages(fetch, {"query": WORD, "limit": 3})
    hits = [h for p in pages for h in p]
    http = _get(base, tokens[principal], q=WORD, limit=200).json()["hits"]
    assert [h["source_object_id"] for h in hits] == [h["source_object_id"] for h in http]
    assert {h["content_hash"] for h in hits} == {c for o, c in contents.items()
                                                 if projections[o].visible_to([principal])}
    by_offset = fetch({"query": WORD, "limit": 3, "offset": 3})["hits"]
    assert [h["source_object_id"] for h in by_offset] == [h["source_object_id"] for h in hits[3:6]]
    err, message = call_tool(url, tokens[principal], "search", {"query": WORD, "cursor": "not-a-cursor"})
    assert err and "invalid_cursor" in message


def test_bad_cursors_and_refusals_write_nothing(served):
    base, tokens, _projections, _contents, ctx = served
    anna, bob = tokens["user:anna"], tokens["user:bob"]
    first = _get(base, anna, q=WORD, limit=2).json()
    assert first["next_cursor"]
    before = _written(ctx)
    cases = [
        (anna, {"q": WORD, "cursor": "not-a-cursor"}, 422, "invalid_cursor"),
        (anna, {"q": WORD, "cursor": "eyJvIjogMn0"}, 422, "invalid_cursor"),  # base64 JSON without its query
        (anna, {"q": "Frist", "cursor": first["next_cursor"]}, 422, "invalid_cursor"),  # another query's
        (bob, {"q": WORD, "cursor": first["next_cursor"]}, 422, "invalid_cursor"),  # another principal's
        (anna, {"q": WORD, "limit": 0}, 422, None),
        (anna, {"q": WORD, "offset": 5000}, 422, None),
        (anna, {"q": WORD, "mode": "fuzzy"}, 422, None),
        (anna, {"q": ""}, 422, None),
        (tokens["reader"], {"q": WORD}, 403, None),
        (tokens["no-principal"], {"q": WORD}, 403, "no_principal"),
        ({}, {"q": WORD}, 401, None),
        ({"Authorization": "Bearer ki_nonsense"}, {"q": WORD}, 401, None),
    ]
    for headers, params, status, code in cases:
        r = _get(base, headers, **params)
        assert r.status_code == status, (params, r.status_code, r.text)
        body = r.json()
        assert "hits" not in body and body["error"], body
        if code:
            assert body["error"] == code, body
    assert _written(ctx) == before
    # the good cursor still works after all that
    again = _get(base, anna, q=WORD, limit=2, cursor=first["next_cursor"])
    assert again.status_code == 200 and again.json()["offset"] == 2
