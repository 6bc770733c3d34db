"""Query semantics, the same on both backends (issue 15 items 1–5; issue 20 items 8–9): real PostgreSQL with the
real tantivy projection, and the session's real OpenSearch node (marker ``opensearch``), written through the
backend as the index stage does.

Each test asserts which documents come back, in which order, and what the hit says. Cost: ~1 s per test on the
embedded backend, ~2 s on OpenSearch.
"""

from __future__ import annotations

import pytest

from ki.adapters.search.backend import PROFILE_ORDINAL, ChunkRow, IndexDocument, SearchFilters
from ki.adapters.search.factory import backend_for
from ki.adapters.search.search import search_with_backend
from ki.domain.access.projection import AccessProjection
from tests.helpers.postgres import insert_objects
from tests.helpers.search_backend import backend_on

OPEN = AccessProjection(("*",))


def write(backend, oid, text, *, name="doc.txt", title=None, folder="", h=None, access=OPEN, parts=()):
    rows = [ChunkRow(PROFILE_ORDINAL, title or name, None, "profile",
                     {"fields": {k: v for k, v in (("title", title), ("name", name), ("folder", folder)) if v}}),
            ChunkRow(0, text)]
    for i, (kind, ptext) in enumerate(parts, 1):
        rows.append(ChunkRow(i, ptext, None, kind, {"key": kind}))
    backend.write_document(IndexDocument(oid, h or f"{oid:064d}", title, rows, access))


def paths(response):
    return [h.path.rsplit("/", 1)[-1] for h in response.hits]


@pytest.fixture(params=["postgres", pytest.param("opensearch", marks=pytest.mark.opensearch)])
def backend(request, ctx, monkeypatch):
    """The embedded backend, or OpenSearch (this test's own index on the session node)."""
    yield from backend_on(request, ctx, monkeypatch, lambda: backend_for(ctx.db, ctx.config))


@pytest.fixture
def corpus(ctx, backend):
    ids = insert_objects(ctx, 8)
    b = backend
    write(b, ids[0], "Der Gewerbemietvertrag über die Halle wird gekündigt.", name="a.txt")
    write(b, ids[1], "Der Mietvertrag über das Büro. Die Kündigung folgt.", name="b.txt")
    write(b, ids[2], "Der Untermietvertrag mit dem Kündigungsschreiben.", name="c.txt")
    write(b, ids[3], "Bitte <Datum einfügen> und <<Mandant>> eintragen; a<b and c>d.", name="d.txt")
    write(b, ids[4], "Here is some text that a person wrote.", name="e.txt")
    write(b, ids[5], "Some other text is here, and more text, text, text here.", name="f.txt")
    write(b, ids[6], "Nichts davon.", name="2024-03-05 Mietvertrag Endfassung.docx",
          folder="Akten/Thalbach Büroflächen")
    write(b, ids[7], "Kaufvertrag ohne Bezug.", name="g.txt", parts=[("comment", "Die Kaution ist zu hoch"),
                                                                  ("deleted", "drei Monatsmieten Kaution")])
    return ctx, b, ids


def run(b, ctx, q, **kw):
    return search_with_backend(b, ctx.db.engine, q, mode="lexical", **kw)


def test_compounds_found_below_exact(corpus):
    ctx, b, ids = corpus
    r = run(b, ctx, "Mietvertrag", limit=10)
    got = [h.source_object_id for h in r.hits]
    # the file named "… Mietvertrag …" and the exact passage first, the compounds after them
    assert set(got) == {ids[0], ids[1], ids[2], ids[6]}
    assert got.index(ids[1]) < got.index(ids[0]) and got.index(ids[1]) < got.index(ids[2])
    k = run(b, ctx, "Kündigung")
    assert [h.source_object_id for h in k.hits][:1] == [ids[1]] and ids[2] in [h.source_object_id for h in k.hits]


def test_file_names_and_folders_are_fields(corpus):
    ctx, b, ids = corpus
    r = run(b, ctx, "Endfassung")
    assert [h.source_object_id for h in r.hits] == [ids[6]]
    assert r.hits[0].part == "fields" and r.hits[0].matched == ["file name"]
    assert "«Endfassung»" in r.hits[0].snippet
    both = run(b, ctx, "Mietvertrag Büroflächen")
    assert both.hits[0].source_object_id == ids[6] and both.hits[0].matched == ["file name", "folder"]


def test_angle_brackets_hold_text(corpus):
    ctx, b, ids = corpus
    for q in ("Mandant", "Datum einfügen", "a<b", "c>d"):
        assert [h.source_object_id for h in run(b, ctx, q).hits] == [ids[3]], q
    assert "<<«Mandant»>>" in run(b, ctx, "Mandant").hits[0].snippet


def test_stop_word_phrase_ranks_the_verbatim_file_first(corpus):
    ctx, b, ids = corpus
    r = run(b, ctx, '"Here is some text"')
    assert [h.source_object_id for h in r.hits] == [ids[4]]
    assert r.hits[0].snippet.startswith("«Here is some text»")
    plain = run(b, ctx, "Here is some text")
    assert [h.source_object_id for h in plain.hits][:2] == [ids[4], ids[5]]


def test_all_words_first_then_most(corpus):
    ctx, b, ids = corpus
    r = run(b, ctx, "Mietvertrag Kündigung Büro")
    got = [h.source_object_id for h in r.hits]
    assert got[0] == ids[1]  # the only passage with all three
    assert ids[0] in got and ids[2] in got  # then those with some of them: never silently empty
    assert run(b, ctx, "Kaufvertrag -Kaution").hits == []  # excluded anywhere in the document
    assert [h.source_object_id for h in run(b, ctx, "Kaufvertrag or Mandant").hits] in ([ids[7], ids[3]],
                                                                                         [ids[3], ids[7]])


def test_parts_marked_and_filterable(corpus):
    ctx, b, ids = corpus
    r = run(b, ctx, "Monatsmieten")
    assert [h.part for h in r.hits] == ["deleted"]
    assert run(b, ctx, "Monatsmieten", filters=SearchFilters(principals=None, not_kinds=("deleted",))).hits == []
    c = run(b, ctx, "zu hoch")
    assert [h.part for h in c.hits] == ["comment"]


def test_scores_paging_and_identical_copies(ctx, backend):
    ids = insert_objects(ctx, 25)
    b = backend
    for i, oid in enumerate(ids[:24]):
        write(b, oid, "Vergleich " * (1 + i % 5) + f"Dokument {i}", name=f"v{i}.txt")
    write(b, ids[24], "Vergleich " * 5 + "Dokument 4", name="copy.txt", h=f"{ids[4]:064d}")  # bytes of v4
    first = run(b, ctx, "Vergleich", limit=10)
    assert first.hits[0].score == 1.0 and all(0 < h.score <= 1 for h in first.hits)
    assert [h.score for h in first.hits] == sorted((h.score for h in first.hits), reverse=True)
    second = run(b, ctx, "Vergleich", limit=10, offset=10)
    third = run(b, ctx, "Vergleich", limit=10, offset=20)
    seen = [h.content_hash for r in (first, second, third) for h in r.hits]
    assert len(seen) == len(set(seen)) == 24 and third.next_offset is None and first.next_offset == 10
    copy = next(h for r in (first, second, third) for h in r.hits if h.content_hash == f"{ids[4]:064d}")
    assert len(copy.also_at) == 1


def test_fields_count_by_their_best_match_and_compound_heads(ctx, backend):
    """Issue 15: a document's fields score by their best match (a compound in title *and* file name stays below
    the exact word in the file name), and a file name ending in the word (its compound head) ranks above
    passages that merely mention the word."""
    ids = insert_objects(ctx, 7)
    b = backend
    write(b, ids[0], "Anlagen folgen.", name="Schreiben an das Landgericht.pdf")
    write(b, ids[1], "Anbei die Unterlagen.", name="Aufforderungsschreiben Müller.pdf")
    write(b, ids[2], "Wir nehmen Bezug auf Ihr Schreiben vom Montag und die Änderungen.", name="brief.txt")
    write(b, ids[3], "Der Beschluss liegt bei.", name="Sitzverlegung und Satzungsänderung.eml",
          title="Sitzverlegung und Satzungsänderung")
    write(b, ids[4], "Der Entwurf liegt bei.", name="Gesellschaftsvertrag mit Änderungen.docx")
    write(b, ids[5], "Die Lampe ist defekt.", name="Schreibtischlampe Rechnung.pdf")
    write(b, ids[6], "Nichts davon.", name="Notiz.txt")
    got = [h.source_object_id for h in run(b, ctx, "Schreiben").hits]
    assert got[:3] == [ids[0], ids[1], ids[2]]  # exact name, name ending in the word, a mention
    r = run(b, ctx, "Änderungen")
    got = [h.source_object_id for h in r.hits]
    assert got.index(ids[4]) < got.index(ids[3])  # exact in one field beats the compound in two
    assert r.hits[got.index(ids[3])].matched == ["title", "file name"]


def test_file_names_score_by_the_statistics_of_file_names(ctx, backend):
    """Issue 15 item 3, found on make_estate seed 7 / 200 matters (file-name recall@10 0.862 embedded vs 0.974 on
    OpenSearch): a client's name in two e-mails' long file names (their subjects) ranks those two above ten
    replies that mention the client once in a longer body. tantivy averaged a field's length over every row of
    its index (the passages too, which hold no file name), so a long file name looked about three times its
    real length and both named files fell out of the top 10; Lucene counts only the rows holding the field,
    and the profile rows now have a tantivy index of their own (ki.adapters.search.projection). Fails with the profile
    rows among the passages."""
    ids = insert_objects(ctx, 22)
    b = backend
    for i, oid in enumerate(ids):
        if i < 2:
            name = f"Allerhof GmbH ._. Hölscher GmbH – draft supply agreement (2021051{i}-1458).eml"
            body = ["Please find attached the revised draft of the supply agreement for your review."]
        elif i < 12:
            name = f"RE_ Supply agreement with Hölscher GmbH ({i}).eml"
            body = [f"Dear Mr Meier, as discussed with Allerhof yesterday we will send the revised draft of the "
                    f"supply agreement next week, kind regards {i}"]
        else:
            name, body = f"Invoice {i}.pdf", []
        body += [f"Payment {i}.{n} is due within thirty days of the invoice date for services rendered."
                 for n in range(2)]
        rows = [ChunkRow(PROFILE_ORDINAL, name, None, "profile", {"fields": {"name": name}})]
        rows += [ChunkRow(o, text) for o, text in enumerate(body, 1)]
        b.write_document(IndexDocument(oid, f"{oid:064d}", name, rows, OPEN))
    r = run(b, ctx, "allerhof")
    got = [h.source_object_id for h in r.hits]
    assert len(got) == 10 and sorted(got[:2]) == sorted(ids[:2]), got
    assert all(h.matched == ["file name"] for h in r.hits[:2])
    assert {h.source_object_id for h in r.hits[2:]} <= set(ids[2:12])


#: Size of the huge document of the CI-sized 120 MB check (bench/search_bigfile.py runs the full size).
BIG_DOC_MB = 8
_SENTENCES = [
    "Die Kündigung des Mietvertrags wurde dem Mieter fristgerecht zugestellt.",
    "Der Vergleich sieht eine Zahlung von 12.000 Euro vor.",
    "Die Kaution ist nach Ende des Mietverhältnisses zurückzuzahlen.",
    "Der Mieter widerspricht der Kündigung wegen Eigenbedarfs.",
    "Über einen Vergleich wurde im Termin nicht verhandelt.",
    "Die Mietkaution beträgt drei Monatsmieten.",
    "Die Parteien schließen folgenden Vergleich.",
    "Das Protokoll der Sitzung liegt bei.",
]


def test_a_huge_document_takes_one_place_in_a_top_ten(ctx, backend):
    """Issue 15 ("a 120 MB single file changes no other query's top-10"), CI-sized: one huge text holding every
    common word thousands of times takes at most one place in any top 10 — the other nine or ten are the other
    files in the order they had before (each query still answers a full page; before exact top-k, every place
    went to that one file): above ``retrieval.large_document_passages`` (2,000) it is kept in the "large
    documents" index, so its passages do not enter the BM25 statistics the others are ranked by
    (tests/integration/test_search_large_documents.py; bench/search_bigfile.py at 120 MB). It is still found
    (ranked by its own index's statistics, where these words are in every passage: below the small files).
    ~40 s embedded, ~60 s on OpenSearch (4,700 rows)."""
    import random

    from ki.adapters.search.chunking import chunk_text

    rng = random.Random(15)
    ids = insert_objects(ctx, 41)
    b = backend
    for i, oid in enumerate(ids[:40]):
        text = " ".join(rng.choice(_SENTENCES) for _ in range(rng.randint(1, 12)))
        name = f"{rng.choice(['Kündigung', 'Vergleich', 'Kaution', 'Akte', 'Notiz'])} {i}.txt"
        write(b, oid, text, name=name)
    queries = ["Kündigung", "Vergleich", "Mieter", "Kaution", "Kündigung Mieter", '"schließen folgenden Vergleich"']
    before = {q: [h.source_object_id for h in run(b, ctx, q).hits] for q in queries}
    assert all(len(v) == 10 for v in before.values()), before  # each query has more than 10 answers
    big = []
    size = 0
    while size < BIG_DOC_MB << 20:
        para = " ".join(rng.choice(_SENTENCES) for _ in range(12))
        big.append(para)
        size += len(para.encode()) + 2
    chunks = chunk_text("\n\n".join(big), chunk_chars=2000, overlap_chars=200)
    rows = [ChunkRow(PROFILE_ORDINAL, "Gesamtexport", None, "profile", {"fields": {"name": "Gesamtexport.txt"}})]
    rows += [ChunkRow(i, c) for i, c in enumerate(chunks)]
    b.write_document(IndexDocument(ids[40], f"{ids[40]:064d}", "Gesamtexport", rows, OPEN))
    found_big = 0
    for q in queries:
        after = [h.source_object_id for h in run(b, ctx, q).hits]
        others = [o for o in after if o != ids[40]]
        assert len(after) == 10 and len(others) >= 9, (q, after)
        assert others == before[q][:len(others)], (q, before[q], after)
        found_big += ids[40] in [h.source_object_id for h in run(b, ctx, q, limit=60).hits]
        page2 = [h.source_object_id for h in run(b, ctx, q, offset=10).hits]
        assert ids[40] not in page2 or ids[40] not in after  # one place in all, not one per page
    assert found_big == len(queries)  # it does match: the huge file is ranked, not dropped
