"""The lexical query tree (issue 15 items 3–4): document fields scored by their best match, compound heads.

Real tantivy (an in-memory index built with ki's schema and row analysis); the OpenSearch rendering is checked
as DSL here and on the real node in tests/integration/test_search_semantics.py. Cost: < 1 s.
"""

from __future__ import annotations

import pytest

from ki.adapters.search.analysis import word_forms
from ki.adapters.search.lexical import PROFILE_KIND, LexRow, build_schema, field_streams, lex_document, to_tantivy
from ki.adapters.search.opensearch_index import to_dsl
from ki.adapters.search.query import FIELD_GROUPS, FIELD_TIE_BREAKER, HEAD_MARK, parse_query
from ki.adapters.search.query_plan import BestOf, LexFilters, Term, field_node, item_node, search_node


def profile(oid: int, **fields: str) -> LexRow:
    return LexRow(oid, -1, f"{oid:064d}", PROFILE_KIND, "", fields, ("*",), ())


def passage(oid: int, text: str) -> LexRow:
    return LexRow(oid, 0, f"{oid:064d}", "body", text, {}, ("*",), ())


@pytest.fixture(scope="module")
def index():
    import tantivy

    schema = build_schema()
    idx = tantivy.Index(schema)
    writer = idx.writer(15_000_000)
    rows = [
        profile(1, name="Sitzverlegung und Satzungsänderung.eml", title="Sitzverlegung und Satzungsänderung"),
        profile(2, name="Gesellschaftsvertrag mit Änderungen.docx"),
        profile(3, name="Änderungen.docx", title="Änderungen zum Vertrag"),
        profile(4, name="Schreiben an das Landgericht.pdf"),
        profile(5, name="Aufforderungsschreiben Müller.pdf"),
        profile(6, name="Schreibtischlampe Rechnung.pdf"),
        passage(7, "Wir nehmen Bezug auf Ihr Schreiben vom Montag und die Änderungen."),
        *[profile(30 + i, name=f"Entwurf {i} mit Änderungen.docx") for i in range(4)],
        *[profile(10 + i, name=f"Notiz {i}.txt") for i in range(20)],
    ]
    for r in rows:
        writer.add_document(lex_document(r))
    writer.commit()
    idx.reload()
    return schema, idx.searcher()


def scores(index, node) -> dict[int, float]:
    schema, searcher = index
    res = searcher.search(to_tantivy(node, schema), 50, count=False)
    return {int(searcher.doc(a)["oid"][0]): s for s, a in res.hits}


def ranked(index, query: str) -> list[int]:
    node = search_node(parse_query(query), 1, LexFilters(principals=("*",)))
    return [oid for oid, _ in sorted(scores(index, node).items(), key=lambda kv: -kv[1])]


def test_field_streams_mark_the_head_of_each_compound():
    exact, extra = field_streams("name", "Aufforderungsschreiben Müller.pdf")
    assert exact == "aufforderungsschreiben müller pdf"
    assert HEAD_MARK + "schreib" in extra.split()
    assert not any(t.startswith(HEAD_MARK) for t in field_streams("title", "Schreiben Müller")[1].split())
    assert HEAD_MARK + "ander" in field_streams("title", "Satzungsänderung")[1].split()


def test_fields_count_by_their_best_match_plus_a_tie_breaker(index):
    forms = word_forms("änderungen")
    title, name = scores(index, field_node("title", forms)), scores(index, field_node("name", forms))
    both = scores(index, BestOf((field_node("title", forms), field_node("name", forms)), FIELD_TIE_BREAKER))
    for oid in (1, 3):  # the word (or its compound) in title and file name
        hi, lo = max(title[oid], name[oid]), min(title[oid], name[oid])
        assert both[oid] == pytest.approx(hi + FIELD_TIE_BREAKER * lo, rel=1e-5)
    assert both[2] == pytest.approx(name[2], rel=1e-5)  # in one field only


def test_exact_word_in_one_field_beats_a_compound_in_two(index):
    order = ranked(index, "Änderungen")
    # exact in title + name, exact in the name, the compound in title + name (which would win if fields added up)
    assert order.index(3) < order.index(2) < order.index(1)
    assert 7 in order


def test_a_compound_ending_in_the_word_ranks_between_exact_names_and_mere_mentions(index):
    order = ranked(index, "Schreiben")
    assert order[:2] == [4, 5]  # exact in the name, then Aufforderungsschreiben
    assert order.index(5) < order.index(7)  # above the passage merely mentioning the word
    assert order.index(5) < order.index(6)  # Schreibtischlampe: "schreib" is its modifier, not its head


def test_the_tree_holds_a_best_of_per_field_group_in_both_renderings():
    node = item_node(parse_query("Schreiben").groups[0].items[0])
    best = [c for c in node.children if isinstance(c, BestOf)]
    assert len(best) == len(FIELD_GROUPS) == 2 and {b.tie_breaker for b in best} == {FIELD_TIE_BREAKER}
    heads = [t for b in best for fn in b.children for t in fn.children
             if isinstance(t, Term) and str(t.value).startswith(HEAD_MARK)]
    assert {t.field for t in heads} == {f"f_{n}_x" for n in ("title", "name", "folder", "type", "matter", "party")}
    dsl = to_dsl(best[0])
    assert set(dsl) == {"dis_max"} and dsl["dis_max"]["tie_breaker"] == FIELD_TIE_BREAKER
    assert [next(iter(q["bool"]["should"][0]["term"])) for q in dsl["dis_max"]["queries"]] == ["f_title", "f_name"]
