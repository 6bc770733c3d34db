"""The embedded search backend: chunks in PostgreSQL with German + English full text.

Spec: insertion-pipeline.md "Index" (chunks diffed by ordinal: replaced, not
orphaned; permission projection on every chunk) and DESIGN.md "Two deployments"
(PostgreSQL full text embedded). New chunks are written before surplus ordinals
are removed, in one transaction, so a reader never sees the document vanish.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection

UPSERT_CHUNKS_SQL = text("""
INSERT INTO chunk (source_object_id, content_hash, ordinal, text, title, allowed_principals, denied_principals)
SELECT :oid, :h, t.ordinal, t.body, :title, CAST(:allowed AS text[]), CAST(:denied AS text[])
FROM unnest(CAST(:ordinals AS int[]), CAST(:bodies AS text[])) AS t(ordinal, body)
ON CONFLICT (source_object_id, ordinal) DO UPDATE
SET content_hash = EXCLUDED.content_hash, text = EXCLUDED.text, title = EXCLUDED.title,
    allowed_principals = EXCLUDED.allowed_principals, denied_principals = EXCLUDED.denied_principals,
    is_deleted = false, updated_at = now()
WHERE (chunk.content_hash, chunk.text, chunk.title, chunk.allowed_principals, chunk.denied_principals)
      IS DISTINCT FROM (EXCLUDED.content_hash, EXCLUDED.text, EXCLUDED.title, EXCLUDED.allowed_principals,
                        EXCLUDED.denied_principals)
""")

DELETE_SURPLUS_SQL = text("DELETE FROM chunk WHERE source_object_id = :oid AND ordinal >= :n")


def write_chunks(conn: Connection, *, source_object_id: int, content_hash: str, title: str | None,
                 chunks: list[str], allowed: list[str], denied: list[str]) -> int:
    """Upsert ``chunks`` at ordinals 0..n-1 and drop ordinals ≥ n. Returns n."""
    if chunks:
        conn.execute(UPSERT_CHUNKS_SQL, {
            "oid": source_object_id, "h": content_hash, "title": title, "allowed": allowed, "denied": denied,
            "ordinals": list(range(len(chunks))), "bodies": chunks,
        })
    conn.execute(DELETE_SURPLUS_SQL, {"oid": source_object_id, "n": len(chunks)})
    return len(chunks)


def delete_object_chunks(conn: Connection, source_object_id: int) -> int:
    """Remove every chunk of a tombstoned object. Returns rows deleted."""
    return conn.execute(text("DELETE FROM chunk WHERE source_object_id = :oid"), {"oid": source_object_id}).rowcount


@dataclass(frozen=True)
class SearchHit:
    """One search result: a document's best chunk.

    Attributes: source_object_id, path, title, snippet (with «» around matches), score (ts_rank_cd),
    ordinal of the chunk, content_hash.
    """

    source_object_id: int
    path: str
    title: str | None
    snippet: str
    score: float
    ordinal: int
    content_hash: str


SEARCH_SQL = text("""
WITH q AS (
    SELECT websearch_to_tsquery('german', :q) || websearch_to_tsquery('english', :q)
           || websearch_to_tsquery('simple', :q) AS query
),
matches AS (
    SELECT c.id, c.source_object_id, c.content_hash, c.ordinal, c.text, c.title,
           ts_rank_cd(c.tsv, q.query) AS score
    FROM chunk c, q
    WHERE c.tsv @@ q.query AND NOT c.is_deleted
      AND (CAST(:principal AS text) IS NULL OR (
            (c.allowed_principals && CAST(:principals AS text[]))
            AND NOT (c.denied_principals && CAST(:principals AS text[]))))
),
best_per_object AS (
    SELECT DISTINCT ON (m.source_object_id) m.*
    FROM matches m JOIN source_object so ON so.id = m.source_object_id AND so.deleted_at IS NULL
    ORDER BY m.source_object_id, m.score DESC, m.ordinal
),
collapsed AS (
    SELECT DISTINCT ON (b.content_hash) b.*
    FROM best_per_object b
    ORDER BY b.content_hash, b.score DESC, b.source_object_id
)
SELECT c.source_object_id, so.path, c.title, c.ordinal, c.content_hash, c.score,
       ts_headline('german', c.text, q.query,
                   'StartSel=«,StopSel=»,MaxWords=30,MinWords=12,MaxFragments=2,FragmentDelimiter=" … "')
           AS snippet
FROM collapsed c JOIN source_object so ON so.id = c.source_object_id, q
ORDER BY c.score DESC, c.source_object_id
LIMIT :limit
""")


def search(conn: Connection, query: str, *, principals: list[str] | None = None, limit: int = 10
           ) -> list[SearchHit]:
    """Full-text search over chunks, best chunk per document, identical content collapsed.

    Args:
        query: web-search syntax (words, "phrases", -exclusions, or).
        principals: the caller's principals; None = the local operator (all grants).
        limit: maximum hits.
    """
    rows = conn.execute(SEARCH_SQL, {
        "q": query, "limit": limit,
        "principal": None if principals is None else "x",
        "principals": principals or [],
    })
    return [SearchHit(r.source_object_id, r.path, r.title, " ".join(r.snippet.split()), float(r.score),
                      r.ordinal, r.content_hash) for r in rows]
