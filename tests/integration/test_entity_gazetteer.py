"""The gazetteer of one document (:func:`ki.store.entities.known_names`) reads the aliases through their first
token, and finds exactly the aliases all of whose tokens occur in the document.

Spec: insertion-pipeline.md "Extract metadata" (the aliases of entities the firm already holds that occur in the
document). Real PostgreSQL with 20,000 aliases and a document of 300 tokens: the planner had read the whole alias
table for such a token list (its cost grew with the estate).
"""

from __future__ import annotations

from sqlalchemy import text

from ki.store.entities import KNOWN_NAMES_SQL, known_names


def test_known_names_reads_the_first_token_index_and_finds_every_contained_alias(ctx):
    with ctx.db.engine.begin() as conn:
        project = conn.execute(text("SELECT id FROM project WHERE name = 'default'")).scalar_one()
        conn.execute(text("""
            INSERT INTO entity (project_id, kind, name, identity_key)
            SELECT :p, 'company', 'E' || g, 'e' || g FROM generate_series(1, 2000) g"""), {"p": project})
        conn.execute(text("""
            INSERT INTO entity_alias (entity_id, alias, alias_key, tokens)
            SELECT e.id, 'Alias ' || e.id || ' ' || k, 'alias ' || e.id || ' ' || k,
                   CASE WHEN k = 0 THEN '{}'::text[]
                        ELSE ARRAY['w' || ((e.id * 7 + k) % 900), 'w' || ((e.id * 13 + k) % 1100)] END
            FROM entity e CROSS JOIN generate_series(0, 9) k"""))
        conn.execute(text("ANALYZE entity_alias"))
        conn.execute(text("ANALYZE entity"))
        every = conn.execute(text("SELECT a.entity_id, a.alias, a.tokens, e.kind FROM entity_alias a "
                                  "JOIN entity e ON e.id = a.entity_id WHERE e.project_id = :p"),
                             {"p": project}).fetchall()
    document = [f"w{i}" for i in range(0, 1200, 4)]  # 300 tokens
    words = set(document)
    expected = sorted(((r.entity_id, r.alias, r.kind) for r in every if r.tokens and set(r.tokens) <= words),
                      key=lambda t: (-len(t[1]), t))
    with ctx.db.engine.connect() as conn:
        found = known_names(conn, project, document, limit=100_000)
        plan = "\n".join(r[0] for r in conn.execute(text("EXPLAIN " + KNOWN_NAMES_SQL.text),
                                                    {"p": project, "t": sorted(words), "limit": 2000}))
    assert len(expected) > 10
    assert sorted(found) == sorted(expected)
    assert [len(a) for _, a, _ in found] == sorted((len(a) for _, a, _ in found), reverse=True)
    assert "ix_entity_alias_first_token" in plan and "Seq Scan on entity_alias" not in plan, plan
