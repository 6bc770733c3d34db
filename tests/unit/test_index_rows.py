"""The index stage's streamed rows (issue 14 item 7e): chunk positions instead of chunk texts, rows built a
batch at a time, and the same rows as the whole list.

Pure: hypothesis over generated texts and parts; no database. About 3 s.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ki.adapters.convert.model import TextualPart
from ki.adapters.search.backend import PROFILE_KIND, row_ordinals
from ki.adapters.search.chunking import chunk_spans, chunk_text
from ki.adapters.search.embeddings import embedding_input
from ki.stages import index_rows
from ki.stages.index_rows import DocumentRows, PassagePlan

# words, every kind of whitespace str.strip knows (and the separators the chunker cuts at), umlauts
_ALPHABET = st.sampled_from(list("abcäöüß ") + ["\n", "\n\n", "\t", "\r\n", "\u00a0", "\u2028", "\x1c", "\x0b",
                                                "  ", "\u3000"])
_TEXTS = st.lists(_ALPHABET, min_size=0, max_size=600).map("".join)


@settings(max_examples=300, deadline=None)
@given(text_=_TEXTS, chunk=st.integers(8, 120), overlap=st.integers(0, 60))
def test_chunk_spans_are_stripped_bounded_ordered_and_cover_the_text(text_, chunk, overlap) -> None:
    if overlap >= chunk:
        with pytest.raises(ValueError):
            chunk_spans(text_, chunk_chars=chunk, overlap_chars=overlap)
        return
    spans = chunk_spans(text_, chunk_chars=chunk, overlap_chars=overlap)
    pieces = [text_[s:e] for s, e in spans]
    assert pieces == chunk_text(text_, chunk_chars=chunk, overlap_chars=overlap)
    assert all(p and p == p.strip() and len(p) <= chunk for p in pieces)
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(spans, spans[1:], strict=False))
    covered = set()
    for s, e in spans:
        covered.update(range(s, e))
    assert {i for i, c in enumerate(text_) if not c.isspace()} <= covered  # no character is lost
    if not text_.strip():
        assert spans == []


def test_chunk_spans_cut_at_paragraphs_then_lines_then_spaces() -> None:
    """The chunks of the implementation before spans (the values it gave), overlap included."""
    text_ = "  Erster Absatz hier.\n\nZweiter Absatz folgt\nmit Zeile und noch mehr Worten am Ende  "
    assert chunk_text(text_, chunk_chars=30, overlap_chars=5) == [
        "Erster Absatz hier.", "er.\n\nZweiter Absatz folgt", "olgt\nmit Zeile und noch mehr", "mehr Worten am Ende"]
    spans = chunk_spans(text_, chunk_chars=30, overlap_chars=5)
    assert spans[0] == (2, 21) and spans[-1][1] == len(text_) - 2


def _parts() -> list[TextualPart]:
    body = "\n\n".join(f"{i}. Absatz über den Vertrag und die Abnahme der Leistung." for i in range(400))
    return [TextualPart("body", "body", body), TextualPart("footnote", "footnote", "Fußnote eins. " * 40),
            TextualPart("comment", "comment:c1", "Bitte prüfen.", anchor="Abnahme", author="J. Ott")]


def _vectors(dim: int = 4):
    """A vector source that answers every ordinal (records the batches asked for)."""
    asked: list[list[int]] = []

    class Source:
        def get(self, inputs):
            asked.append(sorted(inputs))
            return {o: np.full(dim, o, dtype=np.float32) for o in inputs}

    return Source(), asked


def _key(row):
    return row.ordinal, row.kind, row.text, row.meta, None if row.embedding is None else row.embedding.tolist()


def test_document_rows_are_the_whole_list_built_a_batch_at_a_time(monkeypatch) -> None:
    monkeypatch.setattr(index_rows, "STREAM_ROWS", 7)
    parts = _parts()
    plan = PassagePlan.of(parts, chunk_chars=120, overlap_chars=20)
    whole = [(p.kind, piece, index_rows.part_meta(p)) for p in parts
             for piece in chunk_text(p.text, chunk_chars=120, overlap_chars=20)]
    assert [plan.passage(i) for i in range(len(plan))] == whole
    source, asked = _vectors()
    rows = DocumentRows("Profil", {"fields": {"title": "T"}}, plan, header="T · brief", vectors=source)
    assert len(rows) == len(whole) + 1 and row_ordinals(rows) == list(range(-1, len(whole)))
    built = list(rows)
    assert [(r.ordinal, r.kind, r.text, r.meta) for r in built] == [
        (-1, PROFILE_KIND, "Profil", {"fields": {"title": "T"}}),
        *[(i, k, t, m) for i, (k, t, m) in enumerate(whole)]]
    assert all(float(r.embedding[0]) == r.ordinal for r in built)
    assert max(len(a) for a in asked) == 7  # never more than one batch of vectors at once
    assert [_key(r) for r in rows[10:20]] == [_key(r) for r in built[10:20]]
    assert _key(rows[-1]) == _key(built[-1]) and _key(rows[0]) == _key(built[0])
    with pytest.raises(IndexError):
        rows[len(rows)]
    inputs = rows.inputs(0, 3)
    assert inputs == {-1: "Profil", 0: embedding_input(whole[0][1], "T · brief"),
                      1: embedding_input(whole[1][1], "T · brief")}
    batches = list(rows.input_batches(7))
    assert sum(len(b) for b in batches) == len(rows) and max(len(b) for b in batches) == 7


def test_rows_without_a_vector_source_have_no_vectors() -> None:
    plan = PassagePlan.of(_parts(), chunk_chars=200, overlap_chars=0)
    rows = DocumentRows("Profil", {}, plan)
    assert all(r.embedding is None for r in rows)
    assert PassagePlan.of([], chunk_chars=200, overlap_chars=0).__len__() == 0
