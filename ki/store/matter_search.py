"""The SQL halves of Classify's ``search_matters``: the matters that can score at all, and the vector half.

Spec: insertion-pipeline.md "Classify: what the model is given" (``search_matters`` "ranks existing matters by
semantic similarity over already-indexed chunks"). :func:`nearest_matters` reads the search record
(``chunk.embedding``, written by the index stage on either backend) through its HNSW index;
:func:`matter_candidates` reads the matters :func:`ki.store.matters.search_matters` can score above zero, so its
ranking in Python sees those only (a project of 3,578 matters made every classification rank all of them). The
caller owns the connection (a short read).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import text
from sqlalchemy.engine import Connection, Row

#: Nearest indexed rows read per query; the matters holding them are the vector half's candidates.
NEAREST_ROWS = 200

# -- name: nearest_matters --
# The rows of files filed on a real (not placeholder) matter of the project, nearest first; per matter the best.
_NEAREST = """
WITH r AS MATERIALIZED (
    SELECT ma.matter_id,
           (c.embedding::halfvec({d})) <=> CAST(CAST(:v AS vector({d})) AS halfvec({d})) AS distance
    FROM chunk c
    JOIN matter_assignment ma ON ma.source_object_id = c.source_object_id
    JOIN matter m ON m.id = ma.matter_id AND m.project_id = :p AND NOT m.placeholder
    WHERE c.embedding IS NOT NULL AND NOT c.is_deleted
    ORDER BY (c.embedding::halfvec({d})) <=> CAST(CAST(:v AS vector({d})) AS halfvec({d}))
    LIMIT :k
)
SELECT matter_id, 1 - min(distance) AS similarity FROM r GROUP BY matter_id ORDER BY 2 DESC, 1
"""


def nearest_matters(conn: Connection, *, project_id: int, vector: Sequence[float], rows: int = NEAREST_ROWS
                    ) -> list[tuple[int, float]]:
    """The matters holding one of the ``rows`` indexed rows nearest ``vector`` (cosine), best first.

    Args:
        conn: a connection; the HNSW settings (``ef_search`` = ``rows``, iterative scan) stay local to its
            transaction.
        project_id: the project whose matters count; placeholder (``UNASSIGNED-…``) matters never do — their
            files are the ones no matter was found for.
        vector: the query's L2-normalised vector, embedded with the model the index records (its dimension).
        rows: how many nearest rows are read (passages, profile and clause rows of the matters' files).
    Returns: ``[(matter_id, similarity)]`` — per matter the cosine similarity (−1..1) of its nearest row, by
        similarity descending, then matter id. Empty when nothing is embedded.
    """
    values = [float(x) for x in vector]
    if not values:
        return []
    dimension = len(values)
    literal = "[" + ",".join(repr(x) for x in values) + "]"
    # local to the connection's transaction (SQLAlchemy begins one with the first statement)
    conn.execute(text("SELECT set_config('hnsw.ef_search', :ef, true), "
                      "set_config('hnsw.iterative_scan', 'relaxed_order', true)"), {"ef": str(max(40, rows))})
    found = conn.execute(text(_NEAREST.format(d=dimension)), {"v": literal, "p": project_id, "k": rows})
    return [(int(r.matter_id), float(r.similarity)) for r in found]


#: The letters beyond ASCII whose case folding :func:`_fold` reproduces (German: ``ä ö ü`` and their capitals,
#: ``ß`` and ``ẞ``, folding to ``ss``).
FOLDED_LETTERS = "äöüÄÖÜßẞ"
#: A character beyond ASCII and :data:`FOLDED_LETTERS`: a matter naming one is a candidate whatever the query,
#: so the filter never loses a matter Python's ``casefold`` would match (``é``, ``İ``, the Kelvin sign, ``ﬁ``).
UNFOLDED = "[^\\u0001-\\u007f" + FOLDED_LETTERS + "]"


def _fold(expr: str) -> str:
    """SQL equal to Python's ``casefold()`` of ``expr`` for text of ASCII and :data:`FOLDED_LETTERS`:
    ``lower`` under the "C" collation (ASCII letters only, whatever the database's locale), then one
    ``replace`` per German letter. Cheap per row, unlike a ``translate`` over a long table."""
    out = f'lower(({expr}) COLLATE "C")'
    for capital, small in (("Ä", "ä"), ("Ö", "ö"), ("Ü", "ü"), ("ß", "ss"), ("ẞ", "ss")):
        out = f"replace({out}, '{capital}', '{small}')"
    return out


# -- name: matters_ranked --
# The columns search_matters ranks, per matter of the project, with its best full-text rank over its indexed chunks
# (0: no hit); the statements below add their WHERE.
_RANKED = """
WITH q AS (SELECT websearch_to_tsquery('simple', :q) AS query),
text_hits AS (
    SELECT ma.matter_id, max(ts_rank_cd(c.tsv, q.query)) AS rank
    FROM chunk c JOIN matter_assignment ma ON ma.source_object_id = c.source_object_id, q
    WHERE :q <> '' AND c.tsv @@ q.query AND NOT c.is_deleted
    GROUP BY ma.matter_id
)
SELECT m.id, m.reference, m.title, m.placeholder, m.identifiers || m.aliases AS identifiers,
       coalesce(m.client_name, '') AS client_name, coalesce(m.client_number, '') AS client_number,
       coalesce(t.rank, 0) AS text_rank
FROM matter m LEFT JOIN text_hits t ON t.matter_id = m.id
"""
#: Every matter of the project (``:p``) as ``search_matters`` ranks it, for the query ``:q``.
EVERY_MATTER_SQL = text(_RANKED + "WHERE m.project_id = :p\n")

# -- name: matter_candidates --
# The project's matters that search_matters can score above zero (the full ranking's signals, each as a superset
# test): a full-text hit, a nearest matter, the folded reference / an identifier or alias / the client number
# inside the folded query, a query word inside the folded title or client name, or a character beyond ASCII the
# folding does not cover.
_CANDIDATES = _RANKED + f"""
CROSS JOIN LATERAL (SELECT concat_ws(' ', m.reference, m.title, m.client_name, m.client_number,
                                     array_to_string(m.identifiers || m.aliases, ' ')) AS every) u
WHERE m.project_id = :p AND (
    t.matter_id IS NOT NULL
    OR m.id = ANY(CAST(:nearest AS bigint[]))
    OR strpos(:qf, {_fold("m.reference")}) > 0
    OR (m.client_number <> '' AND strpos(:qf, {_fold("m.client_number")}) > 0)
    OR (cardinality(m.identifiers || m.aliases) > 0
        AND EXISTS (SELECT 1 FROM unnest(m.identifiers || m.aliases) AS i(v) WHERE strpos(:qf, {_fold("i.v")}) > 0))
    OR {_fold("m.title")} LIKE ANY(CAST(:likes AS text[]))
    OR {_fold("coalesce(m.client_name, '')")} LIKE ANY(CAST(:likes AS text[]))
    OR (octet_length(u.every) > char_length(u.every) AND u.every ~ :unfolded)
)
"""


def matter_candidates(conn: Connection, *, project_id: int, query: str, words: Sequence[str],
                      nearest: Sequence[int]) -> list[Row]:
    """The project's matters :func:`ki.store.matters.search_matters` can score above zero for ``query``.

    Args:
        conn: a connection.
        project_id: the project.
        query: the stripped, non-empty query (an empty one lists every matter: the caller reads them all).
        words: the query's words as the title match counts them (case-folded, of ``[0-9a-zäöü]``).
        nearest: ids of the matters the vector half found.
    Returns: rows of ``(id, reference, title, placeholder, identifiers, client_name, client_number,
        text_rank)`` as the full ranking reads them; a superset of the matters that score above zero (each
        signal's test is the ranking's, or looser: a client number inside the query, not yet as a whole word; a
        word inside a title, not yet as a whole word), so the ranking of these rows is the ranking of all.
    """
    return conn.execute(text(_CANDIDATES), {
        "q": query, "qf": query.casefold(), "p": project_id, "nearest": list(nearest),
        "likes": [f"%{w}%" for w in words], "unfolded": UNFOLDED}).fetchall()
