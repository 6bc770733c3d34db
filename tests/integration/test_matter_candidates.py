"""``search_matters`` ranks only the matters its SQL candidate filter reads, and the answer is the full ranking's.

Spec: insertion-pipeline.md "Classify: what the model is given" (``search_matters`` ranks existing matters by
reference, title and full text, with an exact ``page.total`` over the whole ranking). Real PostgreSQL: a project
of matters whose references, identifiers, aliases, client numbers, titles and client names mix case, German
letters (ß, Ä, ẞ) and characters whose case folding is not one letter for one (İ, ŉ, the Kelvin sign, the ﬁ
ligature, Greek), some with indexed text; hundreds of queries (references and their pieces, title words in
other cases, ß written ss and back, client numbers inside words, noise) give the same page, scores and total
through the candidate filter as through ``every_matter``.
"""

from __future__ import annotations

import random

from sqlalchemy import text

from ki.store.matters import search_matters

WORDS = ["Keller", "Logistik", "GmbH", "Nordwind", "Straße", "STRASSE", "Müller", "MÜLLER", "Ärger", "Café",
         "ﬁnanz", "Kelvin", "Ωmega", "İstanbul", "ŉorth", "Ǆemal", "Miete", "Halle", "Brandauer", "Eiderhof",
         "Projekt", "Sonnenhaus", "Kaufpreis", "AG", "Lager", "x1", "2024", "Wasser", "ǰava"]
REFERENCE_PARTS = ["2024-0153", "2024-0", "AZ ß-12", "KÄ-7", "İST-3", "ŉ-5", "K-1", "ﬁ-9", "Ω-3", "m-44",
                   "STRASSE-1", "A1", "2023/77", "HRB 4711", "ǰ-2"]
CLIENT_NUMBERS = ["", "10023", "K-100", "Kd 7", "4711", "ß1"]


def _case(rng: random.Random, value: str) -> str:
    return rng.choice([value, value.upper(), value.lower(), value.casefold(), value.swapcase()])


def _seed(ctx, rng: random.Random) -> int:
    with ctx.db.engine.begin() as conn:
        project = conn.execute(text("SELECT id FROM project WHERE name = 'default'")).scalar_one()
        sid = conn.execute(text("INSERT INTO source (project_id, kind, root) VALUES (:p, 'local', '/t') "
                                "RETURNING id"), {"p": project}).scalar_one()
        for i in range(160):
            ref = f"{rng.choice(REFERENCE_PARTS)}-{i}" if i % 3 else rng.choice(REFERENCE_PARTS) + "/" + str(i)
            title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4)))
            mid = conn.execute(text("""
                INSERT INTO matter (project_id, reference, title, placeholder, identifiers, aliases, client_name,
                                    client_number)
                VALUES (:p, :r, :t, :ph, :ids, :al, :cn, :cno) RETURNING id"""), {
                "p": project, "r": ref, "t": title, "ph": i % 17 == 0,
                "ids": [_case(rng, rng.choice(REFERENCE_PARTS)) for _ in range(rng.randint(0, 2))],
                "al": [_case(rng, rng.choice(REFERENCE_PARTS + WORDS)) for _ in range(rng.randint(0, 1))],
                "cn": rng.choice([None, "", " ".join(rng.choice(WORDS) for _ in range(2))]),
                "cno": rng.choice([None, *CLIENT_NUMBERS])}).scalar_one()
            if i % 4 == 0:  # indexed text for the full-text signal
                oid = conn.execute(text("INSERT INTO source_object (source_id, external_id, path, content_hash) "
                                        "VALUES (:s, :e, :path, :h) RETURNING id"),
                                   {"s": sid, "e": f"f{i}", "path": f"/t/f{i}", "h": f"{i:064d}"}).scalar_one()
                conn.execute(text("INSERT INTO matter_assignment (source_object_id, matter_id, method) "
                                  "VALUES (:o, :m, 'rules')"), {"o": oid, "m": mid})
                conn.execute(text("INSERT INTO chunk (source_object_id, content_hash, ordinal, text) "
                                  "VALUES (:o, :h, 0, :t)"),
                             {"o": oid, "h": f"{i:064d}", "t": " ".join(rng.choice(WORDS) for _ in range(8))})
    return project


def _queries(rng: random.Random, ctx, project: int) -> list[str]:
    with ctx.db.engine.connect() as conn:
        matters = conn.execute(text("SELECT reference, title, identifiers || aliases AS ids, client_number "
                                    "FROM matter WHERE project_id = :p"), {"p": project}).fetchall()
    out = []
    for _ in range(400):
        m = rng.choice(matters)
        pieces = [
            m.reference, m.reference[: rng.randint(1, len(m.reference))], m.reference[rng.randint(0, 3):],
            *(m.ids or []), m.client_number or "", f"x{m.client_number or ''}y", *m.title.split(),
            rng.choice(WORDS), rng.choice(REFERENCE_PARTS), "ss", "ẞ", "straße", "strasse", "re", "zzz"]
        words = [_case(rng, rng.choice(pieces)) for _ in range(rng.randint(1, 4))]
        out.append(" ".join(words))
    return out


def test_the_candidate_filter_loses_no_matter_the_full_ranking_scores(ctx):
    rng = random.Random(33)
    project = _seed(ctx, rng)
    queries = _queries(rng, ctx, project)
    scored = 0
    with ctx.db.engine.connect() as conn:
        for q in queries:
            full = search_matters(conn, project_id=project, query=q, limit=1000, every_matter=True)
            bounded = search_matters(conn, project_id=project, query=q, limit=1000)
            assert bounded == full, q
            scored += full["page"]["total"]
            page = search_matters(conn, project_id=project, query=q, limit=3, offset=2)
            assert page == search_matters(conn, project_id=project, query=q, limit=3, offset=2, every_matter=True)
        signals = {w for q in queries[:200]
                   for r in search_matters(conn, project_id=project, query=q, limit=1000)["results"] for w in r["why"]}
        # the empty query lists every matter either way
        assert search_matters(conn, project_id=project, query="  ", limit=1000)["page"]["total"] == 160
    assert signals == {"reference", "identifier", "client_number", "title", "text"}
    assert 0 < scored < len(queries) * 160 / 2  # the queries match some matters, far from all


def test_the_candidate_filter_reads_few_matters(ctx):
    from ki.store.matter_search import matter_candidates

    rng = random.Random(34)
    project = _seed(ctx, rng)
    with ctx.db.engine.connect() as conn:
        rows = matter_candidates(conn, project_id=project, query="Kaufpreis zzz", words=["kaufpreis", "zzz"],
                                 nearest=[])
        every = conn.execute(text("SELECT count(*) FROM matter WHERE project_id = :p"), {"p": project}).scalar_one()
    assert 0 < len(rows) < every
