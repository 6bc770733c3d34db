"""DecisionRecord rows: the existing record for a document version, the version pair, writing a record.

Spec: insertion-pipeline.md "Extract decisions" ("linked to the version pair (redline_against →
current version). Idempotency: an existing record for the same document and target version makes the
stage a no-op"); DESIGN.md "Decisions" (``redline_against`` may be null when the revisions live inside a
single file). The version pair is read from Relate's ``document_version`` table when that table and
the object's row exist; otherwise the record is keyed by source object and content hash alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.store.db import has_table

if TYPE_CHECKING:  # the store reads the answer's fields; it never imports the domain above it
    from ki.domain.decisions.schema import DecisionResult


@dataclass(frozen=True)
class VersionPair:
    """The target version and what it was redlined against (ids None when Relate has not said)."""

    document_version_id: int | None = None
    redline_against_source_object_id: int | None = None
    redline_against_version_id: int | None = None


def version_pair(conn: Connection, source_object_id: int) -> VersionPair:
    """The object's DocumentVersion and its ``redline_against`` (both optional)."""
    if not has_table(conn, "document_version"):
        return VersionPair()
    row = conn.execute(text("""
        SELECT dv.id, dv.redline_against,
               (SELECT r.id FROM document_version r WHERE r.source_object_id = dv.redline_against) AS against_version
        FROM document_version dv WHERE dv.source_object_id = :so
    """), {"so": source_object_id}).first()
    if row is None:
        return VersionPair()
    return VersionPair(row.id, row.redline_against, row.against_version)


def existing_record(conn: Connection, source_object_id: int, content_hash: str, pair: VersionPair) -> int | None:
    """The id of a record for this document version (same object and content, or same DocumentVersion)."""
    row = conn.execute(text("""
        SELECT id FROM decision_record
        WHERE (source_object_id = :so AND content_hash = :h)
           OR (CAST(:dv AS bigint) IS NOT NULL AND document_version_id = :dv)
        ORDER BY id LIMIT 1
    """), {"so": source_object_id, "h": content_hash, "dv": pair.document_version_id}).first()
    return None if row is None else int(row.id)


def write_record(conn: Connection, *, source_object_id: int, content_hash: str, pair: VersionPair,
                 result: DecisionResult, provenance: dict[str, Any]) -> tuple[int, bool]:
    """Insert the record and its entries unless one exists for this version; returns (id, created)."""
    row = conn.execute(text("""
        INSERT INTO decision_record (source_object_id, content_hash, document_version_id, redline_against_version_id,
                                     redline_against_source_object_id, summary, provenance)
        VALUES (:so, :h, :dv, :rv, :ro, :summary, CAST(:prov AS jsonb))
        ON CONFLICT DO NOTHING RETURNING id
    """), {"so": source_object_id, "h": content_hash, "dv": pair.document_version_id,
           "rv": pair.redline_against_version_id, "ro": pair.redline_against_source_object_id,
           "summary": result.summary or None, "prov": json.dumps(provenance, ensure_ascii=False)}).first()
    if row is None:
        existing = existing_record(conn, source_object_id, content_hash, pair)
        assert existing is not None
        return existing, False
    record_id = int(row.id)
    for i, e in enumerate(result.entries):
        conn.execute(text("""
            INSERT INTO decision_entry (decision_record_id, ordinal, kind, locus, before_text, after_text,
                                        change_summary, rationale_category, rationale_text, generalizability,
                                        author, changed_at)
            VALUES (:r, :i, :kind, :locus, :before, :after, :summary, :cat, :rtext, :gen, :author,
                    CAST(:at AS timestamptz))
        """), {"r": record_id, "i": i, "kind": e.kind, "locus": e.locus, "before": e.before or None,
               "after": e.after or None, "summary": e.change_summary, "cat": e.rationale_category,
               "rtext": e.rationale_text, "gen": e.generalizability, "author": e.author, "at": e.date})
    return record_id, True
