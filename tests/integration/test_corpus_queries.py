"""Classify's evidence queries on real PostgreSQL: a folder's files and the files whose text contains a needle
answer exactly what a prefix test and a case-insensitive substring test answer, also for LIKE's special
characters (``%``, ``_``, ``\\``), umlauts and needles shorter than a trigram; and the planner reads them
through their indexes, not the whole estate.

Spec: insertion-pipeline.md "Classify" (evidence from other converted files).
"""

from __future__ import annotations

import hashlib
import json

import pytest
from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.store.corpus import CONTAINING_CHARS, DbCorpus

FILES = {
    "A_1/x.txt": "Aktenzeichen 12 O 34/21 gegen Müller GmbH",
    "A%1/y.txt": "Rechnung RE-2021_00256 an MÜLLER GMBH",
    "A\\1/z.txt": "100% erledigt; siehe C:\\Akten\\Müller",
    "AB1/w.txt": "Vollmacht für Frau Özdemir",
    "A/b/v.txt": "Straße 1, Hannover — ÄÖÜ äöü ß",
    "top.txt": "Nichts davon",
}
#: mail headers of some files (the others have none, or a null ``mail``)
MAIL = {
    "A_1/x.txt": {"message_id": "m1@a.example", "in_reply_to": None, "references": []},
    "A%1/y.txt": {"message_id": "m2@a.example", "in_reply_to": "m1@a.example", "references": ["m1@a.example"]},
    "A\\1/z.txt": {"message_id": "m3@a.example", "in_reply_to": "m2@a.example",
                   "references": ["m1@a.example", "m2@a.example"]},
    "AB1/w.txt": {"message_id": "m4@a.example", "references": "m3@a.example"},  # not an array: not followed
    "A/b/v.txt": None,
}
NEEDLES = ["müller gmbh", "MÜLLER", "RE-2021_00256", "RE-2021-00256", "100%", "C:\\Akten", "_", "%", "\\", "ö",
           "x", "", "12 O 34/21", "ÄÖÜ ÄÖÜ", "özdemir", "Straße", "nirgends"]
FOLDERS = ["A_1", "A%1", "A\\1", "A", "A/b", "AB1/", "A_", "Z"]


@pytest.fixture
def corpus(ctx, tmp_path):
    root = tmp_path / "estate"
    for rel, body in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    source_id = register_local_source(ctx, root)
    scan_source(ctx, source_id)
    with ctx.db.engine.begin() as conn:
        rows = conn.execute(text("SELECT id, external_id FROM source_object WHERE source_id = :s"),
                            {"s": source_id}).fetchall()
        assert len(rows) == len(FILES)
        for r in rows:  # fetched (its content hash) and converted (the structured_json artifact convert stores)
            digest = hashlib.sha256(FILES[r.external_id].encode()).hexdigest()
            conn.execute(text("UPDATE source_object SET content_hash = :h WHERE id = :o"), {"h": digest, "o": r.id})
            conn.execute(text("""INSERT INTO artifact (content_hash, kind, producer, producer_version, body)
                                 VALUES (:h, 'structured_json', 'test', '1', CAST(:b AS jsonb))"""),
                         {"h": digest, "b": json.dumps({"text": FILES[r.external_id],
                                                        "mail": MAIL.get(r.external_id)})})
        project_id = conn.execute(text("SELECT project_id FROM source WHERE id = :s"), {"s": source_id}).scalar_one()
    return DbCorpus(ctx.db, project_id=project_id, source_id=source_id)


def test_files_under_is_an_exact_prefix_match(corpus):
    for folder in FOLDERS:
        prefix = folder.rstrip("/") + "/"
        expected = sorted(rel for rel in FILES if rel.startswith(prefix))
        assert sorted(f.path for f in corpus.files_under(folder)) == expected, folder


def test_files_containing_is_a_case_insensitive_substring_match(corpus):
    for needle in NEEDLES:
        expected = sorted(rel for rel, body in FILES.items() if needle.lower() in body[:CONTAINING_CHARS].lower())
        got = sorted(f.path for f in corpus.files_containing(needle))
        assert got == expected, needle
    assert len(corpus.files_containing("müller")) == 3


def test_emails_linked_follows_message_ids_replies_and_references(corpus):
    def expected(ids):
        out = []
        for rel, mail in MAIL.items():
            if not mail:
                continue
            refs = mail.get("references")
            if (mail.get("message_id") in ids or mail.get("in_reply_to") in ids
                    or (isinstance(refs, list) and set(refs) & set(ids))):
                out.append(rel)
        return sorted(out)

    for ids in (["m1@a.example"], ["m2@a.example"], ["m3@a.example"], ["m4@a.example", "nope@x"], ["nope@x"]):
        assert sorted(f.path for f in corpus.emails_linked(ids)) == expected(ids), ids
    assert len(corpus.emails_linked(["m1@a.example"])) == 3


def test_evidence_queries_use_their_indexes(corpus):
    """With 5,000 other converted files and whole-table reads priced out, the plans read the trigram, prefix
    and header indexes (not a whole index in place of the table)."""
    with corpus.db.engine.begin() as conn:
        conn.execute(text("""
            INSERT INTO source_object (source_id, external_id, path, content_hash)
            SELECT :s, 'Z/' || g || '.txt', '/z/' || g, md5(g::text) || md5(g::text)
            FROM generate_series(1, 5000) g"""),
            {"s": corpus.source_id})
        conn.execute(text("""
            INSERT INTO artifact (content_hash, kind, producer, producer_version, body)
            SELECT md5(g::text) || md5(g::text), 'structured_json', 'test', '1',
                   jsonb_build_object('text', 'Schreiben Nummer ' || g || ' an Beklagte ' || md5(g::text),
                                      'mail', jsonb_build_object('message_id', g || '@z.example'))
            FROM generate_series(1, 5000) g"""))
        conn.execute(text("ANALYZE source_object"))
        conn.execute(text("ANALYZE artifact"))
        for gin in ("ix_artifact_text_trgm", "ix_artifact_mail_references"):  # as autovacuum would have
            conn.execute(text("SELECT gin_clean_pending_list(CAST(:i AS regclass))"), {"i": gin})
        for scan in ("seqscan", "indexscan", "indexonlyscan"):  # short texts: reading all 5,000 is still cheap
            conn.execute(text(f"SET LOCAL enable_{scan} = off"))
        plan = "\n".join(r[0] for r in conn.execute(text(
            "EXPLAIN SELECT a.id FROM artifact a WHERE a.kind = 'structured_json' AND "
            f"lower(left(a.body->>'text', {CONTAINING_CHARS})) LIKE '%müller gmbh%'")))
        assert "ix_artifact_text_trgm" in plan, plan
        plan = "\n".join(r[0] for r in conn.execute(text(
            "EXPLAIN SELECT id FROM source_object so WHERE so.source_id = :s AND so.external_id LIKE 'A\\_1/%'"),
            {"s": corpus.source_id}))
        assert "ix_source_object_source_external" in plan, plan
        plan = "\n".join(r[0] for r in conn.execute(text(
            "EXPLAIN SELECT a.id FROM artifact a WHERE a.kind = 'structured_json' AND "
            "(a.body->'mail'->>'message_id' = ANY(ARRAY['m1@a.example']) "
            " OR a.body->'mail'->>'in_reply_to' = ANY(ARRAY['m1@a.example']) "
            " OR (a.body->'mail'->'references') ?| ARRAY['m1@a.example'])")))
        for index in ("ix_artifact_mail_message_id", "ix_artifact_mail_in_reply_to", "ix_artifact_mail_references"):
            assert index in plan, plan
