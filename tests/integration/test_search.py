"""Search on the embedded backend: permissions, access-only re-index, ordinal diffs, embedder record, duplicates.

Spec: insertion-pipeline.md "Index" (permission projection on every chunk, deny beats allow; a failed
ACL read is neither public nor revoked; access_only_reindex updates permissions and bumps
access_version without re-splitting or re-embedding; re-index diffs by ordinal, never orphaned;
the model name and dimension recorded on the index, another model refused before any write);
DESIGN.md "Duplicates and permissions" (embedded once per blob, own permissions per object, search
collapses identical content per principal); notes/opensearch.md §3 (RRF, same filter in both halves).

The permission property tests use a seeded random generator (hypothesis is not installed): every
case is reproducible from its seed, printed on failure.

Tests taking the ``backend_kind`` fixture run twice: on the embedded backend and on the OpenSearch
backend (``components.opensearch_url`` pointed at the session's real node, marker ``opensearch``);
the OpenSearch runs also check that the index holds exactly the record's rows afterwards.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

import ki.adapters.search.embedding_cache as cache_module
import ki.stages.index as index_stage
import ki.stages.index_rows as index_rows
from ki.adapters.search.backend import ChunkRow, EmbedderMismatch, IndexDocument, SearchFilters
from ki.adapters.search.embedder import EmbedderIdentity
from ki.adapters.search.embeddings import HashingEmbedder
from ki.adapters.search.factory import backend_for
from ki.adapters.search.hybrid import hybrid_search
from ki.adapters.search.postgres import PostgresBackend
from ki.adapters.search.search import search
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.domain.access.folder_grants import GRANTS_FILE, write_grants_file
from ki.domain.access.projection import AccessProjection, GrantLevel, compile_projection, principal_set
from tests.helpers.postgres import insert_objects

PRINCIPALS = ["user:anna", "user:bob", "user:carl", "user:dora", "group:lit", "group:corp"]
MODES = ("lexical", "vector", "hybrid")


def _set(ctx, key: str, value) -> None:
    set_config_value(ctx.settings.data_dir, key, value if isinstance(value, str) else json.dumps(value))
    ctx.reload_config()


@pytest.fixture(params=["postgres", pytest.param("opensearch", marks=pytest.mark.opensearch)])
def backend_kind(request, ctx, monkeypatch):
    """Run the test on the embedded backend and on OpenSearch (this test's own index on the session node)."""
    if request.param == "postgres":
        yield "postgres"
        return
    node = request.getfixturevalue("opensearch_node")
    monkeypatch.setenv("KI_OPENSEARCH_REFRESH_INTERVAL", "100ms")  # refresh=wait_for returns sooner
    _set(ctx, "components.opensearch_url", node.url)
    backend = backend_for(ctx.db, ctx.config)
    assert backend.name == "opensearch"
    backend.drop_index()
    yield "opensearch"
    backend.drop_index()


def _backend(ctx):
    return backend_for(ctx.db, ctx.config)


def _assert_index_matches_record(ctx) -> None:
    """On OpenSearch: the index holds exactly the record's rows, with the record's permissions (no orphans)."""
    backend = _backend(ctx)
    if backend.name != "opensearch":
        return
    backend.client.indices.refresh(index=backend.index)
    fields = ["source_object_id", "ordinal", "content_hash", "allowed_principals", "denied_principals",
              "access_version"]
    hits = backend.client.search(index=backend.index, body={"size": 10000, "_source": fields,
                                                              "query": {"match_all": {}}})["hits"]["hits"]
    in_index = sorted((h["_source"]["source_object_id"], h["_source"]["ordinal"], h["_source"]["content_hash"],
                       tuple(sorted(h["_source"]["allowed_principals"])),
                       tuple(sorted(h["_source"]["denied_principals"])), h["_source"]["access_version"])
                      for h in hits)
    record = sorted((r.source_object_id, r.ordinal, r.content_hash, tuple(sorted(r.allowed_principals)),
                     tuple(sorted(r.denied_principals)), r.access_version)
                    for r in _rows(ctx, "SELECT * FROM chunk WHERE NOT is_deleted"))
    assert in_index == record


def _run(ctx, **kw):
    summary = launch_insertion(ctx, trigger="test", wait_for_retries_seconds=0, **kw)
    assert summary.status == "completed", summary.error
    return summary


def _rows(ctx, sql: str, **params):
    with ctx.db.engine.connect() as conn:
        return conn.execute(text(sql), params).fetchall()


def _index_row(ctx, path_suffix: str):
    return _rows(ctx, """SELECT ps.status, ps.last_error, ps.attempts FROM processing_state ps
                         JOIN source_object so ON so.id = ps.source_object_id
                         WHERE ps.stage = 'index' AND so.external_id = :e""", e=path_suffix)[0]


def _chunks(ctx, external_id: str):
    return _rows(ctx, """SELECT c.id, c.ordinal, c.allowed_principals, c.denied_principals, c.access_version,
                                c.embedding IS NOT NULL AS has_vector, c.updated_at
                         FROM chunk c JOIN source_object so ON so.id = c.source_object_id
                         WHERE so.external_id = :e ORDER BY c.ordinal""", e=external_id)


def _paths(ctx, query: str, principals, *, mode: str = "hybrid", limit: int = 50) -> list[str]:
    resp = search(ctx.db, query, principals=principals, operator=principals is None, limit=limit, mode=mode,
                  config=ctx.config)
    return [Path(h.path).name for h in resp.hits]


def _words(rng: random.Random, n: int) -> str:
    return " ".join("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 9))) for _ in range(n))


# --- the property: no search ever shows a chunk to a principal without a grant or with a deny ----------


def _random_levels(rng: random.Random) -> list[GrantLevel]:
    levels = []
    for scope in ("project", "source", "folder", "folder", "document"):
        if rng.random() < 0.6:
            allow = tuple(rng.sample(PRINCIPALS + ["*"], rng.randint(0, 3)))
            deny = tuple(rng.sample(PRINCIPALS, rng.randint(0, 2))) if rng.random() < 0.4 else ()
            levels.append(GrantLevel(scope, scope, allow, deny, inherit=rng.random() < 0.8))
    return levels


def test_permission_property_no_search_half_leaks(ctx, backend_kind):
    """Random grant sets × principals × lexical/vector/hybrid: every hit is visible to its searcher;
    every content a principal may see and that matches the content's own word is found (per principal)."""
    rng = random.Random(20261129)
    emb = HashingEmbedder(32)
    backend = _backend(ctx)
    assert backend.name == backend_kind
    ids = insert_objects(ctx, 24)
    # 24 objects, 12 contents: objects 2k and 2k+1 hold identical bytes (duplicates with their own grants)
    contents = {oid: f"h{i // 2:02d}" for i, oid in enumerate(ids)}
    marker = {h: f"zq{h}x" for h in set(contents.values())}
    body = {h: f"{marker[h]} shared vocabulary {_words(rng, 30)}" for h in marker}
    vectors = {h: emb.embed_passages([body[h]])[0] for h in marker}
    identity = EmbedderIdentity(emb.name, emb.dimension)
    projections: dict[int, AccessProjection] = {}
    for oid in ids:
        projections[oid] = compile_projection(_random_levels(rng))
        h = contents[oid]
        backend.write_document(IndexDocument(oid, h, f"f{oid}", [ChunkRow(0, body[h], vectors[h])],
                                             projections[oid], identity))
    cases = 0
    for round_ in range(30):
        if round_:  # new random grants on a third of the objects, written the access-only way
            for oid in rng.sample(ids, len(ids) // 3):
                projections[oid] = compile_projection(_random_levels(rng))
                backend.update_access(oid, projections[oid])
        for _ in range(6):
            held = rng.sample(PRINCIPALS, rng.randint(0, 2))
            filters = SearchFilters(principals=principal_set(held))
            h = rng.choice(sorted(marker))
            for mode in MODES:
                query = marker[h] if mode != "vector" else body[h]
                hits = hybrid_search(backend, query, filters, query_vector=emb.embed_query(query), limit=30,
                                     mode=mode)
                cases += 1
                for hit in hits:
                    assert projections[hit.source_object_id].visible_to(held), (round_, held, mode, hit)
                assert len({hit.content_hash for hit in hits}) == len(hits)
                may_see = [o for o in ids if contents[o] == h and projections[o].visible_to(held)]
                found = [hit for hit in hits if hit.content_hash == h]
                if mode == "lexical":  # the marker word is in this content only
                    assert bool(found) == bool(may_see), (round_, held, h)
                if found:
                    assert found[0].source_object_id in may_see  # the copy shown is one this principal may see
    assert cases == 30 * 6 * 3
    _assert_index_matches_record(ctx)


def _reference_projection(root: Path, config: dict, rel: str) -> AccessProjection:
    """An independent reading of the rules in README "Permissions" (not ki's compiler)."""
    allowed = set(config.get("allowed_principals", ["*"]))
    denied = set(config.get("denied_principals", []))
    parts = Path(rel).parts[:-1]
    for depth in range(len(parts) + 1):
        f = root.joinpath(*parts[:depth]) / GRANTS_FILE
        if f.exists():
            g = json.loads(f.read_text())
            if not g.get("inherit", True):
                allowed = set()
            allowed |= set(g.get("allow", []))
            denied |= set(g.get("deny", []))
    return AccessProjection(tuple(sorted(allowed)), tuple(sorted(denied)))


def _write_random_grants(rng: random.Random, root: Path, folders: list[str]) -> None:
    for folder in folders:
        path = root / folder / GRANTS_FILE if folder else root / GRANTS_FILE
        if rng.random() < 0.55:
            write_grants_file(path.parent, allow=rng.sample(PRINCIPALS + ["*"], rng.randint(0, 3)),
                              deny=rng.sample(PRINCIPALS, rng.randint(0, 1)), inherit=rng.random() < 0.7)
        elif path.exists():
            path.unlink()


def test_permission_property_through_the_pipeline_and_access_refresh(ctx, tmp_path, monkeypatch, backend_kind):
    """Random grants files and source configuration, inserted for real; then random ACL-only changes
    applied by rescans: after each access-only re-index every principal sees exactly what the rules
    allow, nothing was re-split or re-embedded, and access_version went up on the changed objects."""
    _set(ctx, "retrieval.embedding_model", "hashing:32")
    rng = random.Random(7)
    root = tmp_path / "estate"
    folders = ["", "lit", "lit/court", "corp", "corp/board", "misc"]
    files = {}
    for i in range(18):
        folder = folders[i % len(folders)]
        (root / folder).mkdir(parents=True, exist_ok=True)
        rel = f"{folder}/doc{i}.txt" if folder else f"doc{i}.txt"
        word = f"qq{i:02d}token"
        (root / rel).write_text(f"{word} Vermerk über den Vorgang {i}. " + _words(rng, 40), encoding="utf-8")
        files[rel] = word
    config = {"allowed_principals": ["group:lit", "group:corp"], "denied_principals": ["user:dora"]}
    _write_random_grants(rng, root, folders)
    source_id = register_local_source(ctx, root, config=config)
    scan_source(ctx, source_id)
    _run(ctx, workers=2)

    def check(round_: int) -> None:
        for rel, word in files.items():
            expected = _reference_projection(root, config, rel)
            for held in ([], ["user:anna"], ["user:dora", "group:lit"], ["group:corp"], ["user:bob", "group:lit"]):
                for mode in ("lexical", "hybrid"):
                    names = _paths(ctx, word, held, mode=mode)
                    if mode == "lexical":
                        assert (Path(rel).name in names) == expected.visible_to(held), (round_, rel, held)
                    for name in names:  # the hybrid tail (nearest vectors) may show other files: all allowed
                        other = next(r for r in files if Path(r).name == name)
                        assert _reference_projection(root, config, other).visible_to(held), (round_, rel, name)

    check(0)
    split_calls, embed_calls = [], []
    monkeypatch.setattr(index_rows, "chunk_spans", lambda *a, **k: split_calls.append(1) or [])
    real_embed = cache_module.embed_rows
    monkeypatch.setattr(index_stage, "embed_rows", lambda *a, **k: embed_calls.append(1) or real_embed(*a, **k))
    for round_ in range(1, 4):
        before = {rel: _chunks(ctx, rel) for rel in files}
        _write_random_grants(rng, root, folders)
        report = scan_source(ctx, source_id)
        now = {rel: _reference_projection(root, config, rel) for rel in files}
        changed = [rel for rel in files
                   if (sorted(before[rel][0].allowed_principals), sorted(before[rel][0].denied_principals))
                   != (list(now[rel].allowed), list(now[rel].denied))]
        assert report.access_changed == len(changed), round_
        assert (report.new, report.changed) == (0, 0)
        for rel in changed:
            row = _index_row(ctx, rel)
            assert row.status == "pending" and row.last_error == {"access_only_reindex": True}
        _run(ctx, workers=2)
        check(round_)
        for rel in files:
            after = _chunks(ctx, rel)
            assert [c.id for c in after] == [c.id for c in before[rel]]  # same rows: nothing re-split
            bump = 1 if rel in changed else 0
            assert {c.access_version for c in after} == {before[rel][0].access_version + bump}
    assert split_calls == [] and embed_calls == []
    _assert_index_matches_record(ctx)


# --- revocation, failed ACL reads -------------------------------------------------------------------


def _small_estate(tmp_path: Path) -> Path:
    root = tmp_path / "akten"
    (root / "lit").mkdir(parents=True)
    (root / "lit" / "klage.txt").write_text("Klageschrift gegen die Nordwind AG wegen Zitronenfalter.\n" * 3,
                                            encoding="utf-8")
    (root / "memo.txt").write_text("Aktenvermerk über das Telefonat zum Zitronenfalter.\n", encoding="utf-8")
    return root


def test_revocation_is_effective_once_the_access_only_reindex_returns(ctx, tmp_path, backend_kind):
    _set(ctx, "retrieval.embedding_model", "hashing:32")
    root = _small_estate(tmp_path)
    write_grants_file(root / "lit", allow=["user:bob", "user:anna"], inherit=False)
    source_id = register_local_source(ctx, root)
    scan_source(ctx, source_id)
    _run(ctx)
    for mode in MODES:
        assert "klage.txt" in _paths(ctx, "Zitronenfalter Klageschrift", ["user:bob"], mode=mode)
    before = _chunks(ctx, "lit/klage.txt")
    assert all(c.has_vector for c in before) and [c.ordinal for c in before] == [-1, 0]

    write_grants_file(root / "lit", allow=["user:anna"], deny=["user:bob"], inherit=False)  # revoke bob
    report = scan_source(ctx, source_id)
    assert report.access_changed == 1
    row = _index_row(ctx, "lit/klage.txt")
    assert (row.status, row.last_error) == ("pending", {"access_only_reindex": True})
    _run(ctx)
    assert _index_row(ctx, "lit/klage.txt").status == "done"
    for mode in MODES:
        assert "klage.txt" not in _paths(ctx, "Zitronenfalter Klageschrift", ["user:bob"], mode=mode)
        assert "klage.txt" not in _paths(ctx, "Zitronenfalter Klageschrift", ["user:bob", "user:anna"], mode=mode)
        assert "klage.txt" in _paths(ctx, "Zitronenfalter Klageschrift", ["user:anna"], mode=mode)
    after = _chunks(ctx, "lit/klage.txt")
    assert [c.id for c in after] == [c.id for c in before]
    assert {c.access_version for c in after} == {before[0].access_version + 1}
    assert {tuple(c.denied_principals) for c in after} == {("user:bob",)}
    assert scan_source(ctx, source_id).access_changed == 0  # nothing changed since: nothing marked
    _assert_index_matches_record(ctx)


def test_failed_acl_read_is_an_outage_never_public_nor_revoked(ctx, tmp_path):
    root = _small_estate(tmp_path)
    write_grants_file(root / "lit", allow=["user:anna"], inherit=False)
    source_id = register_local_source(ctx, root)
    scan_source(ctx, source_id)
    _run(ctx)
    assert "klage.txt" in _paths(ctx, "Zitronenfalter", ["user:anna"])

    (root / "lit" / GRANTS_FILE).write_text("{ not json", encoding="utf-8")
    assert scan_source(ctx, source_id).access_changed == 1  # unknown grants: marked, to be read again
    summary = launch_insertion(ctx, trigger="test", wait_for_retries_seconds=0)
    assert summary.counters.quarantined == 0
    row = _index_row(ctx, "lit/klage.txt")
    assert row.status == "failed"
    assert row.last_error["class"] == "AclReadError" and row.last_error["deterministic"] is False
    assert "grants file malformed" in row.last_error["infrastructure"]
    assert row.last_error["details"] == {"access_only_reindex": True}  # the retry stays access-only
    assert "klage.txt" in _paths(ctx, "Zitronenfalter", ["user:anna"])  # not revoked
    assert "klage.txt" not in _paths(ctx, "Zitronenfalter", ["user:bob"])  # not public

    # a new document below the unreadable file is not indexed at all (never public)
    (root / "lit" / "neu.txt").write_text("Neuer Schriftsatz Zitronenfalter.\n", encoding="utf-8")
    scan_source(ctx, source_id)
    launch_insertion(ctx, trigger="test", wait_for_retries_seconds=0)
    assert _index_row(ctx, "lit/neu.txt").status == "failed" and _chunks(ctx, "lit/neu.txt") == []

    write_grants_file(root / "lit", allow=["user:bob"], inherit=False)  # repaired, and changed
    with ctx.db.engine.begin() as conn:  # the retries fall due now
        conn.execute(text("UPDATE processing_state SET next_retry_at = now() WHERE status = 'failed'"))
    _run(ctx)
    assert "klage.txt" in _paths(ctx, "Zitronenfalter", ["user:bob"])
    assert "neu.txt" in _paths(ctx, "Zitronenfalter", ["user:bob"])
    assert "klage.txt" not in _paths(ctx, "Zitronenfalter", ["user:anna"])


def test_document_and_project_grants_and_source_config(ctx, tmp_path):
    root = _small_estate(tmp_path)
    source_id = register_local_source(ctx, root, config={"allowed_principals": ["group:firm"],
                                                         "denied_principals": ["user:eve"]})
    scan_source(ctx, source_id)
    _run(ctx)
    assert _paths(ctx, "Zitronenfalter", ["user:x"]) == []
    assert sorted(_paths(ctx, "Zitronenfalter", ["user:x", "group:firm"])) == ["klage.txt", "memo.txt"]
    assert _paths(ctx, "Zitronenfalter", ["user:eve", "group:firm"]) == []
    memo_id = _rows(ctx, "SELECT id FROM source_object WHERE external_id = 'memo.txt'")[0].id
    with ctx.db.engine.begin() as conn:
        conn.execute(text("INSERT INTO access_grant (source_object_id, principal, effect) VALUES "
                          "(:o, 'user:guest', 'allow'), (:o, 'group:firm', 'deny')"), {"o": memo_id})
        conn.execute(text("INSERT INTO access_grant (project_id, principal, effect) VALUES (1, 'user:x', 'deny')"))
    assert scan_source(ctx, source_id).access_changed == 2
    _run(ctx)
    assert _paths(ctx, "Zitronenfalter", ["user:guest"]) == ["memo.txt"]
    assert _paths(ctx, "Zitronenfalter", ["group:firm"]) == ["klage.txt"]
    assert _paths(ctx, "Zitronenfalter", ["group:firm", "user:x"]) == []
    assert sorted(_paths(ctx, "Zitronenfalter", None)) == ["klage.txt", "memo.txt"]  # the local operator


# --- ordinals, tombstones ---------------------------------------------------------------------------------


def test_reindexing_a_shorter_version_leaves_no_orphan_chunk(ctx, tmp_path, backend_kind):
    _set(ctx, "retrieval.chunk_chars", 300)
    _set(ctx, "retrieval.chunk_overlap_chars", 50)
    _set(ctx, "retrieval.embedding_model", "hashing:32")
    root = tmp_path / "akten"
    root.mkdir()
    doc = root / "vertrag.txt"
    doc.write_text("\n\n".join(f"§ {i} Absatz über Pflichten Nummer {i} des Mieters. " * 3 for i in range(20)),
                   encoding="utf-8")
    source_id = register_local_source(ctx, root)
    scan_source(ctx, source_id)
    _run(ctx)
    long_rows = _chunks(ctx, "vertrag.txt")
    assert len(long_rows) > 8
    doc.write_text("§ 1 Nur noch ein kurzer Absatz über Kirschbäume.", encoding="utf-8")
    scan_source(ctx, source_id)
    _run(ctx)
    short_rows = _chunks(ctx, "vertrag.txt")
    assert [c.ordinal for c in short_rows] == [-1, 0]
    assert _rows(ctx, "SELECT count(*) AS n FROM chunk")[0].n == 2
    assert _paths(ctx, "Pflichten Mieters", None, mode="lexical") == []  # vectors always have a nearest
    assert _paths(ctx, "Kirschbäume", None) == ["vertrag.txt"]
    _assert_index_matches_record(ctx)


def test_backend_writes_new_rows_before_deleting_surplus(ctx):
    backend = PostgresBackend(ctx.db)
    (oid,) = insert_objects(ctx, 1)
    access = AccessProjection(("*",))
    backend.write_document(IndexDocument(oid, "h1", "t", [ChunkRow(i, f"alt {i}") for i in range(5)], access))
    ids = {r.ordinal: r.id for r in _rows(ctx, "SELECT id, ordinal FROM chunk WHERE source_object_id = :o", o=oid)}
    result = backend.write_document(IndexDocument(oid, "h2", "t", [ChunkRow(0, "neu 0"), ChunkRow(1, "alt 1")],
                                                  access))
    assert (result.upserted, result.deleted) == (2, 3)
    rows = _rows(ctx, "SELECT id, ordinal, text, content_hash FROM chunk WHERE source_object_id = :o ORDER BY ordinal",
                 o=oid)
    assert [(r.ordinal, r.text, r.content_hash) for r in rows] == [(0, "neu 0", "h2"), (1, "alt 1", "h2")]
    assert [r.id for r in rows] == [ids[0], ids[1]]  # replaced in place, by ordinal
    again = backend.write_document(IndexDocument(oid, "h2", "t", [ChunkRow(0, "neu 0"), ChunkRow(1, "alt 1")],
                                                 access))
    assert (again.upserted, again.unchanged, again.deleted) == (0, 2, 0)


def test_web_search_syntax_means_the_same_on_both_backends(ctx, backend_kind):
    """A "phrase", a -excluded word and ``or`` match as written on either backend; plain words match any."""
    backend = _backend(ctx)
    a, b, c = insert_objects(ctx, 3)
    texts = {a: "Der Mieter trägt die Pflichten des Mieters nach dem Mietvertrag.",
             b: "Kaufvertrag über das Grundstück mit den Pflichten des Käufers.",
             c: "Mieters Kündigung: Mietvertrag Entwurf mit Pflichten."}
    for oid, body in texts.items():
        backend.write_document(IndexDocument(oid, f"h{oid}", "Akte", [ChunkRow(0, body)], AccessProjection(("*",))))
    operator = SearchFilters(principals=None)

    def found(query: str) -> set[int]:
        return {h.source_object_id for h in backend.search_lexical(query, operator, 10)}

    assert found('"Pflichten des Mieters"') == {a}  # c has both words, not as a phrase
    assert found("Mietvertrag -Entwurf") == {a}
    assert found("Kaufvertrag or Kündigung") == {b, c}
    assert found("Mietvertrag Grundstück") == {a, b, c}  # plain: any word
    assert found('"Pflichten des Käufers" or "Pflichten des Mieters"') == {a, b}


def test_tombstoned_documents_disappear_from_every_half(ctx, tmp_path, backend_kind):
    _set(ctx, "retrieval.embedding_model", "hashing:32")
    _set(ctx, "pipeline.deletion_confirmations", 1)
    root = _small_estate(tmp_path)
    source_id = register_local_source(ctx, root)
    scan_source(ctx, source_id)
    _run(ctx)
    (root / "memo.txt").unlink()
    assert scan_source(ctx, source_id).tombstoned == ["memo.txt"]
    _assert_index_matches_record(ctx)  # on OpenSearch: the scan deleted the tombstoned rows, no search needed
    for mode in MODES:
        assert "memo.txt" not in _paths(ctx, "Aktenvermerk Telefonat Zitronenfalter", None, mode=mode)
    assert _chunks(ctx, "memo.txt") == []
    # a write racing the tombstone writes nothing
    memo_id = _rows(ctx, "SELECT id FROM source_object WHERE external_id = 'memo.txt'")[0].id
    result = _backend(ctx).write_document(IndexDocument(
        memo_id, "h", "t", [ChunkRow(0, "x", np.ones(32, dtype=np.float32) / np.sqrt(32))], AccessProjection(("*",)),
        EmbedderIdentity("hashing-v1:32", 32)))
    assert result.skipped_deleted and _chunks(ctx, "memo.txt") == []
    _assert_index_matches_record(ctx)


# --- the embedder record ------------------------------------------------------------------------------------


def test_embedder_or_dimension_mismatch_is_refused_before_any_write(ctx, tmp_path, monkeypatch, backend_kind):
    _set(ctx, "retrieval.embedding_model", "hashing:32")
    root = _small_estate(tmp_path)
    source_id = register_local_source(ctx, root)
    scan_source(ctx, source_id)
    _run(ctx)
    backend = _backend(ctx)
    assert backend.index_identity() == EmbedderIdentity("hashing-v1:32", 32)
    snapshot = _rows(ctx, "SELECT id, ordinal, text, embedding::text, updated_at FROM chunk ORDER BY id")
    index_docs = _index_docs(ctx)
    calls = []
    real = HashingEmbedder.embed_passages
    monkeypatch.setattr(HashingEmbedder, "embed_passages", lambda self, t: calls.append(len(t)) or real(self, t))

    oid = _rows(ctx, "SELECT id FROM source_object WHERE external_id = 'memo.txt'")[0].id
    for identity, dim in ((EmbedderIdentity("hashing-v1:32", 16), 16), (EmbedderIdentity("other-model", 32), 32),
                          (None, None)):
        row = ChunkRow(0, "x", None if dim is None else np.ones(dim, dtype=np.float32) / np.sqrt(dim))
        with pytest.raises(EmbedderMismatch) as err:
            backend.write_document(IndexDocument(oid, "h", "t", [row], AccessProjection(("*",)), identity))
        assert "hashing-v1:32 (32-d)" in str(err.value) and "nothing was written" in str(err.value)

    # through the pipeline: another dimension stops the run before anything is embedded or written
    _set(ctx, "retrieval.embedding_model", "hashing:16")
    _set(ctx, "pipeline.stages.index.rerun_token", "r2")
    summary = launch_insertion(ctx, trigger="test", wait_for_retries_seconds=0)
    assert summary.status == "failed" and "holds hashing-v1:32 (32-d)" in summary.error
    assert "hashing-v1:16 (16-d)" in summary.error
    assert calls == []
    assert _rows(ctx, "SELECT id, ordinal, text, embedding::text, updated_at FROM chunk ORDER BY id") == snapshot
    assert {r.status for r in _rows(ctx, "SELECT status FROM processing_state WHERE stage = 'index'")} <= {
        "pending", "done"}  # released, not failed against the documents
    assert _index_docs(ctx) == index_docs  # on OpenSearch too: nothing written

    # the way out: drop the vectors, re-index with the new model
    assert backend.reset_vectors() == len([r for r in snapshot if r.embedding])
    _run(ctx)
    assert backend.index_identity() == EmbedderIdentity("hashing-v1:16", 16)
    assert "klage.txt" in _paths(ctx, "Klageschrift Nordwind", None, mode="vector")
    _assert_index_matches_record(ctx)


def _index_docs(ctx):
    """On OpenSearch: every document of the index with its sequence number (None on the embedded backend)."""
    backend = _backend(ctx)
    if backend.name != "opensearch":
        return None
    backend.client.indices.refresh(index=backend.index)
    hits = backend.client.search(index=backend.index, body={"size": 10000, "seq_no_primary_term": True,
                                                              "query": {"match_all": {}}})["hits"]["hits"]
    return sorted((h["_id"], h["_seq_no"]) for h in hits)


# --- duplicates ------------------------------------------------------------------------------------------------


def test_duplicates_are_embedded_once_and_keep_their_own_permissions(ctx, tmp_path, monkeypatch):
    _set(ctx, "retrieval.embedding_model", "hashing:32")
    root = tmp_path / "ablage"
    for who in ("anna", "bob"):
        (root / who).mkdir(parents=True)
        write_grants_file(root / who, allow=[f"user:{who}"], inherit=False)
        (root / who / f"Rechnung-{who}.txt").write_text("Rechnung RE-2024-00168 über Beratungsleistungen. " * 40,
                                                        encoding="utf-8")
    texts: list[str] = []
    real = HashingEmbedder.embed_passages
    monkeypatch.setattr(HashingEmbedder, "embed_passages", lambda self, t: texts.extend(t) or real(self, t))
    source_id = register_local_source(ctx, root)
    scan_source(ctx, source_id)
    _run(ctx, workers=4)
    anna, bob = _chunks(ctx, "anna/Rechnung-anna.txt"), _chunks(ctx, "bob/Rechnung-bob.txt")
    assert len(anna) == len(bob) > 1
    assert len(texts) == len(set(texts))  # no input embedded twice
    # the chunks once for both copies; the profile row and the matter header (both name the matter) once per
    # matter the copies are filed under (one or two, depending on whether classify_matter gives the folders one)
    passages = [r.text for r in _rows(ctx, """SELECT c.text FROM chunk c JOIN source_object so
                                                ON so.id = c.source_object_id
                                                WHERE so.external_id = 'anna/Rechnung-anna.txt' AND c.ordinal >= 0""")]
    assert sum(any(t.endswith(p) for p in passages) for t in texts) == len(passages)
    assert len(anna) <= len(texts) <= len(anna) + 3
    assert {tuple(c.allowed_principals) for c in anna} == {("user:anna",)}
    assert {tuple(c.allowed_principals) for c in bob} == {("user:bob",)}
    assert _rows(ctx, "SELECT count(*) AS n FROM embedding_cache")[0].n == len(texts)
    for mode in MODES:
        assert _paths(ctx, "Rechnung Beratungsleistungen", ["user:anna"], mode=mode) == ["Rechnung-anna.txt"]
        assert _paths(ctx, "Rechnung Beratungsleistungen", ["user:bob"], mode=mode) == ["Rechnung-bob.txt"]
        assert len(_paths(ctx, "Rechnung Beratungsleistungen", ["user:anna", "user:bob"], mode=mode)) == 1
        assert _paths(ctx, "Rechnung Beratungsleistungen", ["user:carl"], mode=mode) == []

    # a third copy arriving later reuses the cached vectors
    (root / "anna" / "Kopie.txt").write_bytes((root / "anna" / "Rechnung-anna.txt").read_bytes())
    texts.clear()
    scan_source(ctx, source_id)
    _run(ctx)
    assert texts == [] and len(_chunks(ctx, "anna/Kopie.txt")) == len(anna)


# --- the gateway embedder through the pipeline ---------------------------------------------------------


def test_gateway_embeddings_and_their_outage(ctx, tmp_path, monkeypatch):
    from tests.helpers.gateway_stub import GatewayStub, unavailable

    with GatewayStub() as stub:
        monkeypatch.setenv("KI_LLM_BASE_URL", stub.url)
        for stage in ("classify_matter", "relate", "extract_metadata", "extract_decisions"):
            _set(ctx, f"pipeline.stages.{stage}.enabled", "false")  # only the embeddings talk to the stub
        _set(ctx, "retrieval.embedding_model", "gateway:stub-embed")
        root = _small_estate(tmp_path)
        source_id = register_local_source(ctx, root)
        scan_source(ctx, source_id)
        stub.fail_first(50, unavailable())
        summary = launch_insertion(ctx, trigger="test", wait_for_retries_seconds=0)
        assert summary.counters.quarantined == 0
        row = _index_row(ctx, "memo.txt")
        assert row.status == "failed" and "503" in row.last_error["infrastructure"]
        assert _chunks(ctx, "memo.txt") == []
        stub.fail_first(0)
        with ctx.db.engine.begin() as conn:
            conn.execute(text("UPDATE processing_state SET next_retry_at = now() WHERE status = 'failed'"))
        _run(ctx)
        assert PostgresBackend(ctx.db).index_identity() == EmbedderIdentity("gateway:stub-embed", 8)
        assert {c.has_vector for c in _chunks(ctx, "memo.txt")} == {True}
        assert _paths(ctx, "Aktenvermerk Telefonat", None, mode="vector")
        assert any(r.path.endswith("/embeddings") for r in stub.requests)
        assert _rows(ctx, "SELECT count(*) AS n FROM model_usage WHERE stage = 'index'")[0].n > 0  # on the ledger


# --- the search surface ------------------------------------------------------------------------------------------


def test_search_api_filters_and_notes(ctx, tmp_path):
    root = _small_estate(tmp_path)
    source_id = register_local_source(ctx, root)
    scan_source(ctx, source_id)
    _run(ctx)
    with pytest.raises(ValueError):
        search(ctx.db, "Zitronenfalter", principals=None)
    tables = {r.table_name for r in _rows(ctx, "SELECT table_name FROM information_schema.tables "
                                               "WHERE table_schema = current_schema()")}
    resp = search(ctx.db, "Zitronenfalter", principals=["user:anna"], matter="1999-0001")
    if "matter_assignment" in tables:  # Classify's tables exist: the filter applies (no such matter)
        assert resp.hits == []
    else:
        assert any("--matter ignored" in n for n in resp.notes) and len(resp.hits) == 2
    resp = search(ctx.db, "Zitronenfalter", principals=["user:anna"], doc_type="memo")
    report = PostgresBackend(ctx.db).filter_report(SearchFilters(principals=None, doc_type="memo"))
    if report.applied == ["type"]:  # Extract metadata's tables exist: only documents typed memo (or below)
        assert all(h.doc_type is not None for h in resp.hits)
    else:
        assert any("--type ignored" in n for n in resp.notes) and len(resp.hits) == 2
    resp = search(ctx.db, "Zitronenfalter", principals=["user:anna"])
    assert resp.embedder is None and resp.mode == "hybrid"
    hit = resp.hits[0]
    assert "«Zitronenfalter»" in hit.snippet and hit.score > 0
    assert hit.matter is None or "matter_assignment" in tables
    from datetime import date

    assert search(ctx.db, "Zitronenfalter", principals=["x"], since=date(2999, 1, 1)).hits == []
    assert len(search(ctx.db, "Zitronenfalter", principals=["x"], since=date(2000, 1, 1)).hits) == 2
    # a plain query whose words are not all in one document still finds the ones that have some
    names = [Path(h.path).name for h in search(ctx.db, "Zitronenfalter Gurkensalat", principals=["x"]).hits]
    assert sorted(names) == ["klage.txt", "memo.txt"]
    assert search(ctx.db, '"Zitronenfalter Gurkensalat"', principals=["x"]).hits == []
