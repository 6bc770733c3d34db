"""The record confirms a lexical round's candidates best first, only as many as are still wanted (issue 15's p95:
each confirmed candidate is a row the record reads, most of them not in memory on a large estate), and a refusal
still yields the exact top k. On both backends: real PostgreSQL with the real tantivy projection, and the
session's real OpenSearch node (marker ``opensearch``).

The refusals are made the way they happen: the record's permissions change and the engine has not applied the
change yet (the window between a permission update and the projection's sync).
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

import ki.adapters.search.lexical_search as lexical_search
from ki.adapters.search.backend import ChunkRow, IndexDocument
from ki.adapters.search.factory import backend_for
from ki.adapters.search.search import search_with_backend
from ki.domain.access.projection import AccessProjection
from tests.helpers.postgres import insert_objects
from tests.helpers.search_backend import backend_on

FILLER = "Die Parteien verhandeln über die Bedingungen des Vertrags und den Zeitplan der Übergabe."


@pytest.fixture(params=["postgres", pytest.param("opensearch", marks=pytest.mark.opensearch)])
def backend(request, ctx, monkeypatch):
    yield from backend_on(request, ctx, monkeypatch, lambda: backend_for(ctx.db, ctx.config))


def top(backend, ctx, limit):
    r = search_with_backend(backend, ctx.db.engine, "Kündigung", principals=["group:a"], limit=limit, mode="lexical")
    return [h.source_object_id for h in r.hits]


def test_the_record_confirms_the_best_candidates_first_and_a_refusal_keeps_the_exact_top_k(ctx, backend,
                                                                                            monkeypatch):
    """30 files hold the word (each a different number of times, in texts of different lengths). A 3-hit search
    confirms 3 + 1 + CONFIRM_MARGIN candidates in one query, not the round's 30. Then the record withdraws the 8
    best files from the searcher's group, unknown to the engine: the 10-hit search refuses them in its first
    check, checks the rest of the round in one more query, and returns exactly files 9-18 of the earlier ranking."""
    ids = insert_objects(ctx, 30)
    for i, oid in enumerate(ids):
        body = " ".join(["Kündigung"] * (1 + i % 4) + [FILLER] * (1 + i % 7))
        backend.write_document(IndexDocument(oid, f"{oid:064d}", f"Akte {i}", [ChunkRow(0, body)],
                                             AccessProjection(("group:a",))))
    before = top(backend, ctx, 30)
    assert sorted(before) == sorted(ids)

    checked: list[int] = []
    real_confirm = lexical_search.confirm

    def counting_confirm(conn, candidates, filters):
        checked.append(len(candidates))
        return real_confirm(conn, candidates, filters)

    monkeypatch.setattr(lexical_search, "confirm", counting_confirm)
    assert top(backend, ctx, 3) == before[:3]
    assert checked == [3 + 1 + lexical_search.CONFIRM_MARGIN]

    with ctx.db.engine.begin() as conn:
        conn.execute(text("UPDATE chunk SET allowed_principals = '{group:b}' WHERE source_object_id = ANY(:o)"),
                     {"o": before[:8]})
    checked.clear()
    assert top(backend, ctx, 10) == before[8:18]
    assert checked[0] == 10 + 1 + lexical_search.CONFIRM_MARGIN  # 8 of them refused by the record
    assert len(checked) == 2 and checked[1] >= 10 + 1 - 7  # after a refusal: the rest of the round at once
