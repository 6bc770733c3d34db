"""Large documents apart (issue 15: "a 120 MB single file inserted into the dev estate changes no other query's
top-10"), on both backends: real PostgreSQL with the real tantivy projection, and the session's real OpenSearch
node (marker ``opensearch``), written through the backend as the index stage does.

A document of more than ``retrieval.large_document_passages`` passages lives in a "large documents" index of its
own (tantivy: ``large/`` beside the main index; OpenSearch: ``<index>.large``), so its passages never enter the
BM25 statistics (document count, document frequencies, average length) the other documents are ranked by. The
threshold is 50 here so the large document stays small (200 passages). Cost at load ~2: ~10 s embedded, ~30 s
on OpenSearch.
"""

from __future__ import annotations

import random

import pytest

from ki.adapters.search.backend import PROFILE_ORDINAL, ChunkRow, IndexDocument
from ki.adapters.search.factory import backend_for
from ki.adapters.search.search import search_with_backend
from ki.config.loader import set_config_value
from ki.domain.access.projection import AccessProjection
from tests.helpers.postgres import insert_objects
from tests.helpers.search_backend import backend_on

OPEN = AccessProjection(("*",))
THRESHOLD = 50
SENTENCES = [
    "Die Kündigung des Mietvertrags erfolgt fristgerecht zum Monatsende.",
    "Der Mieter zahlt die Kaution in drei Raten.",
    "Der Vermieter hat die Kaution nicht zurückgezahlt.",
    "Ein Vergleich wurde vor dem Landgericht geschlossen.",
    "Die Parteien schließen folgenden Vergleich.",
    "Das Protokoll der Sitzung liegt bei.",
    "Die Frist zur Stellungnahme endet am Freitag.",
    "Der Mieter widerspricht der Kündigung.",
]
QUERIES = ["Kündigung", "Vergleich", "Mieter", "Kaution", "Kündigung Mieter", '"schließen folgenden Vergleich"',
           "Mieter -Kaution", "Protokoll Frist"]
UNIQUE = "Zebrafinkenzucht"


def write(backend, oid, passages, *, name):
    rows = [ChunkRow(PROFILE_ORDINAL, name, None, "profile", {"fields": {"name": name}})]
    rows += [ChunkRow(i, p) for i, p in enumerate(passages)]
    backend.write_document(IndexDocument(oid, f"{oid:064d}", name, rows, OPEN))


def top(backend, ctx, q, **kw):
    return [h.source_object_id for h in search_with_backend(backend, ctx.db.engine, q, mode="lexical", **kw).hits]


def keeps_order(before, after, big):
    """Whether ``after`` is ``before`` with at most ``big`` taking one place (the others in the same order)."""
    others = [o for o in after if o != big]
    return len(others) >= len(after) - 1 and others == before[:len(others)]


def where(backend, oid):
    """(rows of ``oid`` in the main index, rows in the large-documents index), read from the engine itself."""
    if backend.name == "opensearch":
        backend.client.indices.refresh(index=backend.both)
        body = {"query": {"term": {"source_object_id": oid}}}
        return tuple(backend.client.count(index=i, body=body)["count"] for i in (backend.index, backend.large_index))
    import tantivy

    proj = backend.projection()
    assert proj.catch_up(block=True, timeout=120)
    query = tantivy.Query.term_query(proj.schema, "oid", oid)
    main, large, profiles = (ix.searcher().search(query, 1, count=True).count for ix in proj.indexes())
    return main + profiles, large  # OpenSearch keeps a small document's profile row in its main index


def configured_backend(ctx, large_passages):
    set_config_value(ctx.settings.data_dir, "retrieval.large_document_passages", large_passages)
    ctx.reload_config()
    return backend_for(ctx.db, ctx.config)


@pytest.fixture(params=["postgres", pytest.param("opensearch", marks=pytest.mark.opensearch)])
def backend(request, ctx, monkeypatch):
    """The embedded backend, or OpenSearch (this test's own index pair on the session node), threshold 50."""
    for b in backend_on(request, ctx, monkeypatch, lambda: configured_backend(ctx, THRESHOLD)):
        assert b.large_passages == THRESHOLD
        yield b


def test_a_large_document_moves_no_other_documents_ranking(ctx, backend):
    """40 small files, then one of 201 passages holding every common word many times: in each query's top 10 the
    other files keep exactly their order (the large one may take one place; with pooled statistics `Mieter`,
    `Vergleich`, `Kaution` reorder — checked with the threshold above 201), and the large file is found first for
    a word only it holds. Then both indexes are rebuilt from the record at another threshold (the large file in
    the main index) and back: the first rebuild finds the same things, the second gives the same top 10s."""
    rng = random.Random(15)
    ids = insert_objects(ctx, 41)
    b, big = backend, ids[40]
    for i, oid in enumerate(ids[:40]):
        passages = [" ".join(rng.choice(SENTENCES) for _ in range(rng.randint(1, 8))) for _ in range(rng.randint(1, 3))]
        write(b, oid, passages, name=f"{rng.choice(['Kündigung', 'Vergleich', 'Kaution', 'Akte', 'Notiz'])} {i}.txt")
    before = {q: top(b, ctx, q) for q in QUERIES}
    assert {q: len(v) for q, v in before.items()} == {q: 5 if "-" in q else 10 for q in QUERIES}
    passages = [" ".join(rng.choice(SENTENCES) for _ in range(12)) for _ in range(200)]
    passages.insert(137, f"Anlage: Bericht über die {UNIQUE} im Gewerbehof.")
    write(b, big, passages, name="Gesamtexport.txt")
    assert where(b, big) == (0, 202)
    after = {q: top(b, ctx, q) for q in QUERIES}
    for q in QUERIES:
        assert len(after[q]) == min(10, len(before[q]) + after[q].count(big)) and after[q].count(big) <= 1, q
        assert keeps_order(before[q], after[q], big), (q, before[q], after[q])
    # it does match common words — ranked by its own index's statistics, where they are in every passage and
    # weigh little, so after the small files that hold them — and pages stay one list
    full = top(b, ctx, "Kündigung", limit=60)
    assert big in full and full[:10] == after["Kündigung"]
    assert top(b, ctx, "Kündigung", offset=10, limit=50) == full[10:]
    assert big not in after["Mieter -Kaution"]  # it holds Kaution: excluded as a document
    assert top(b, ctx, UNIQUE) == [big]

    pooled = configured_backend(ctx, 1000)  # every document in the main index: rebuilt from the record
    if pooled.name == "opensearch":
        pooled.ensure_embedder(None)
    assert top(pooled, ctx, UNIQUE) == [big]
    assert where(pooled, big) == (202, 0) and where(pooled, ids[0])[1] == 0
    moved = [q for q in QUERIES if not keeps_order(before[q], top(pooled, ctx, q), big)]
    assert moved  # pooled statistics do move other files: what the split prevents

    apart = configured_backend(ctx, THRESHOLD)
    if apart.name == "opensearch":
        apart.ensure_embedder(None)
    assert {q: top(apart, ctx, q) for q in QUERIES} == after
    assert where(apart, big) == (0, 202)


def test_a_document_moves_between_indexes_across_the_threshold(ctx, backend):
    """One document rewritten with 10, 80, 5, 80 passages: its rows are all in the main index, then all in the
    large one, back, and again (never in both, never in neither); each time a word it holds is found once, and
    a small neighbour stays where it is. Deleting it removes it from whichever index holds it."""
    ids = insert_objects(ctx, 2)
    b, doc, small = backend, ids[0], ids[1]
    write(b, small, ["Ein kurzer Vermerk zur Akte."], name="Vermerk.txt")
    for n, expected in ((10, (11, 0)), (80, (0, 81)), (5, (6, 0)), (80, (0, 81))):
        write(b, doc, [f"Absatz {i}: die {UNIQUE} des Mandanten." for i in range(n)], name="Wachsend.txt")
        assert where(b, doc) == expected, n
        assert top(b, ctx, UNIQUE) == [doc]
        assert top(b, ctx, "Vermerk") == [small] and where(b, small) == (2, 0)
    b.delete_object(doc)
    assert where(b, doc) == (0, 0)
    assert top(b, ctx, UNIQUE) == []
