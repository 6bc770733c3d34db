"""A clause-restricted search on the embedded backend scores only clause rows, with the scores of the filter form.

Spec: insertion-pipeline.md "Index" (clause rows at ordinals 1000+; exact top k whatever the corpus). The lexical
half renders a ``kind`` filter (``--clauses``, ``--in``) onto every scored leaf of the query
(:func:`ki.adapters.search.lexical.to_tantivy`) instead of filtering the whole query's matches afterwards, and the
projection adds each batch's clause rows after its passages. Checked on the real projection of a real record
(PostgreSQL, tantivy): 60 documents, 330 rows, texts drawn from a few sentences so that many rows tie; every match
of every query, under each filter and principal set, has the same score in both forms (exact floats), on every
index.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from ki.adapters.search.backend import ChunkRow, IndexDocument, SearchFilters
from ki.adapters.search.lexical import read_hits, to_tantivy
from ki.adapters.search.postgres import PostgresBackend
from ki.adapters.search.projection import LexicalProjection
from ki.adapters.search.query import parse_query
from ki.adapters.search.query_plan import LexFilters, search_node
from ki.adapters.search.search import search_with_backend
from ki.domain.access.projection import AccessProjection, principal_set
from ki.store.index_record import record_epoch
from tests.helpers.postgres import insert_objects

SENTENCES = [
    "Die Haftung des Verkäufers ist auf den Kaufpreis beschränkt.",
    "Der Mieter zahlt die Kaution in drei Raten.",
    "Die Kündigung des Mietvertrags erfolgt fristgerecht zum Monatsende.",
    "Liability for indirect damages is excluded.",
    "Dieser Vertrag unterliegt deutschem Recht.",
    "Vertraulichkeit: die Parteien behandeln alle Informationen vertraulich.",
    "Die Vergütung ist binnen 30 Tagen nach Rechnungsstellung fällig.",
]
CLAUSE_TYPES = ("liability", "security", "termination", "governing_law", "confidentiality")
QUERIES = ["Haftung", "Kaution Mieter", "Kündigung", "liability damages", "Vertrag", '"deutschem Recht"',
           "Haftung -Kaufpreis", "Vergütung Rechnungsstellung fällig", "Mietvertrag", "Parteien Informationen"]
GRANTS = [("group:a",), ("group:b",), ("*",), ("group:a", "group:b")]


@pytest.fixture
def indexed(ctx, tmp_path):
    rng = random.Random(37)
    backend = PostgresBackend(ctx.db, index_root=tmp_path / "search")
    for n, oid in enumerate(insert_objects(ctx, 60)):
        rows = [ChunkRow(i, " ".join(rng.sample(SENTENCES, 2))) for i in range(4)]
        rows += [ChunkRow(1000 + j, rng.choice(SENTENCES), None, "clause",
                          {"clause_type": rng.choice(CLAUSE_TYPES), "number": f"§ {j + 1}", "heading": "Klausel"})
                 for j in range(1 + n % 2)]
        backend.write_document(IndexDocument(oid, f"{oid:064d}", f"Vertrag {n}", rows,
                                             AccessProjection(GRANTS[n % len(GRANTS)])))
    # the projection of the record built in one apply, as a rebuild makes it
    with ctx.db.engine.connect() as conn:
        epoch = record_epoch(conn)
    projection = LexicalProjection(ctx.db.engine, tmp_path / "rebuilt", epoch)
    assert projection.catch_up(block=True, timeout=120)
    yield backend, projection
    projection.close()


def every_match(searcher, query) -> list[tuple[float, int, int]]:
    result = searcher.search(query, 1000, count=True)
    assert result.count == len(result.hits)
    return sorted((h.score, h.source_object_id, h.ordinal) for h in read_hits(searcher, result, 1))


def test_scoped_leaves_score_every_row_exactly_as_the_filter_form(indexed):
    _backend, projection = indexed
    searchers = [index.searcher() for index in projection.indexes()]
    schema = projection.schema
    compared = ties = 0
    for q in QUERIES:
        parsed = parse_query(q)
        for principals in (None, principal_set(["user:x", "group:a"]), principal_set(["user:y", "group:b"])):
            for kinds, clause_types in ((("clause",), None), (("clause",), ("liability", "security")),
                                        (("body",), None)):
                for tier in (1, 2) if parsed.has_relaxed_tier else (1,):
                    node = search_node(parsed, tier, LexFilters(principals, kinds=kinds, clause_types=clause_types))
                    for s in searchers:
                        before = every_match(s, to_tantivy(node, schema, scope_leaves=False))
                        after = every_match(s, to_tantivy(node, schema))
                        assert after == before, (q, principals, kinds, clause_types)
                        compared += len(before)
                        ties += sum(c - 1 for c in Counter(score for score, _, _ in before).values())
    assert compared > 2000 and ties > 1000  # many rows matched, many of them tied


def test_a_clause_search_returns_clause_rows_of_the_asked_type_only(indexed, ctx):
    backend, _projection = indexed
    response = search_with_backend(backend, ctx.db.engine, "Haftung", mode="lexical", limit=50,
                                   filters=SearchFilters(principals=None, kinds=("clause",),
                                                         clause_types=("liability",)))
    assert response.hits and {(h.part, h.clause_type) for h in response.hits} == {("clause", "liability")}
    assert all(h.ordinal >= 1000 for h in response.hits)


def test_each_segment_holds_its_clause_rows_after_its_passages(indexed):
    _backend, projection = indexed
    import tantivy

    main = projection.indexes()[0].searcher()
    result = main.search(tantivy.Query.all_query(), 1000, count=True)
    assert result.count == 330
    kinds: dict[int, list[tuple[int, str]]] = {}
    for _score, addr in result.hits:
        kinds.setdefault(addr.segment_ord, []).append((addr.doc, main.doc(addr)["kind"][0]))
    for rows in kinds.values():
        order = [kind for _doc, kind in sorted(rows)]
        assert order == sorted(order, key=lambda k: k == "clause"), order  # passages, then clause rows
    assert sum(kind == "clause" for rows in kinds.values() for _d, kind in rows) == 90
