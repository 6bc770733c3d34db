"""The index stage's document-level rows: which ones an object holds, its clause rows and its profile text.

Spec: insertion-pipeline.md "Index" ("a profile embedding at ordinal −1 for the latest final version and clause
embeddings at ordinals 1000+ for final/executed versions"; re-indexing diffs by ordinal: replaced, not orphaned).
Who holds them is :func:`ki.store.finality.holders_of`; the clauses are
:func:`ki.adapters.search.clauses.split_clauses` of
the body, typed by :func:`ki.adapters.search.clause_types.clause_type` (the ``notable_clauses`` artifact of Extract
metadata first, rules otherwise).
"""

from __future__ import annotations

from datetime import date
from typing import Any

from sqlalchemy.engine import Connection

from ki.adapters.search.backend import clause_base
from ki.adapters.search.clause_types import clause_type, notable_types
from ki.adapters.search.clauses import split_clauses
from ki.stages.index_rows import ClauseRows
from ki.store.artifacts import get_artifact
from ki.store.finality import Holders, holders_of

NOTABLE_CLAUSES = "notable_clauses"


def document_holders(conn: Connection, source_object_id: int) -> Holders:
    """Which files of the object's document hold the profile and the clause rows (no DocumentVersion table:
    the object is its own document)."""
    from ki.store.facts import fact_sources

    if not fact_sources(conn).has("document_version", "source_object_id", "rendition", "duplicate_of"):
        return Holders(None, frozenset({source_object_id}), frozenset(), frozenset({source_object_id}))
    return holders_of(conn, source_object_id)


def clause_rows(conn: Connection, config: Any, content_hash: str, body_text: str, *, passages: int,
                chunk_chars: int) -> ClauseRows | None:
    """The clause rows of a final version's body text (None when it is not split into clauses).

    Each row's ``meta``: ``clause_type`` (a clause-facet node id, or None), ``number``, ``heading``, ``span``
    ([start, end) offsets into the body text). Ordinals from :func:`ki.adapters.search.backend.clause_base` of
    ``passages``. Reads the active ontology (no clause facet: every clause untyped) and the content's
    ``notable_clauses`` artifact.
    """
    clauses = split_clauses(body_text)
    if not clauses:
        return None
    try:
        from ki.domain.ontology.load import active_ontology

        onto = active_ontology(config)
    except Exception:  # noqa: BLE001 - an unreadable ontology types nothing; the rows are still written
        onto = None
    artifact = get_artifact(conn, content_hash, NOTABLE_CLAUSES) or {}
    notable = notable_types(artifact.get("clauses"))
    meta = tuple({"clause_type": clause_type(c.heading, c.text, onto, notable), "number": c.number,
                  "heading": c.heading, "span": [c.start, c.end]} for c in clauses)
    return ClauseRows(clause_base(passages), tuple(c.text for c in clauses), meta, chunk_chars)


def profile_lines(parties: list[str], doc_date: date | None) -> list[str]:
    """The profile text's lines after title, type and matter: the parties and the document date."""
    lines = []
    if parties:
        lines.append("; ".join(parties[:12]))
    if doc_date is not None:
        lines.append(doc_date.isoformat())
    return lines
