"""The reads of ``ki export --json``: every live object with what Classify and Relate concluded, its relations,
and what extract_metadata and extract_decisions recorded.

Spec: insertion-pipeline.md "Classify", "Relate", "Extract metadata" and "Extract decisions" (what the export
shows of them); the fields are :mod:`ki.app.export`'s and :mod:`ki.domain.metadata.export`'s. Paths are relative to
their
source root. Every function takes a connection the caller owns and returns the rows in a stable order.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Row, text
from sqlalchemy.engine import Connection


def _rel(alias: str, src: str) -> str:
    return f"substr({alias}.path, length(rtrim({src}.root, '/')) + 2)"


EXPORT_SQL = text(f"""
SELECT so.id, s.root, {_rel('so', 's')} AS rel, so.parent_id IS NOT NULL AS embedded,
       m.reference, m.placeholder, dv.document_id, dv.version_order, dv.rendition, dv.is_final,
       {_rel('d', 'sd')} AS duplicate_of, {_rel('r', 'sr')} AS redline_against, {_rel('p', 'sp')} AS supersedes,
       tm.thread_id
FROM source_object so JOIN source s ON s.id = so.source_id
LEFT JOIN matter_assignment ma ON ma.source_object_id = so.id
LEFT JOIN matter m ON m.id = ma.matter_id
LEFT JOIN document_version dv ON dv.source_object_id = so.id
LEFT JOIN source_object d ON d.id = dv.duplicate_of LEFT JOIN source sd ON sd.id = d.source_id
LEFT JOIN source_object r ON r.id = dv.redline_against LEFT JOIN source sr ON sr.id = r.source_id
LEFT JOIN source_object p ON p.id = dv.supersedes LEFT JOIN source sp ON sp.id = p.source_id
LEFT JOIN communication_thread_member tm ON tm.source_object_id = so.id
WHERE so.deleted_at IS NULL AND (CAST(:root AS text) IS NULL OR s.root = :root)
ORDER BY s.id, rel
""")

RELATIONS_SQL = text(f"""
SELECT rel.from_object_id, rel.type, {_rel('t', 'st')} AS target
FROM relation rel JOIN source_object t ON t.id = rel.to_object_id JOIN source st ON st.id = t.source_id
WHERE t.deleted_at IS NULL
ORDER BY rel.from_object_id, rel.type, target
""")


METADATA_SQL = text("""
        SELECT source_object_id, doc_type, doc_type_ancestors, ontology_fingerprint, language, doc_date,
               doc_date_source, title, identifiers FROM document_metadata""")

PARTIES_SQL = text("""
        SELECT p.source_object_id, p.name, p.role, p.role_basis, p.entity_id, e.name AS entity_name, e.kind,
               p.identifiers
        FROM document_party p JOIN entity e ON e.id = p.entity_id ORDER BY p.source_object_id, p.ordinal""")

DECISIONS_SQL = text("""
        SELECT d.source_object_id, e.kind, e.locus, e.before_text, e.after_text, e.change_summary,
               e.rationale_category, e.rationale_text, e.generalizability, e.author, e.changed_at
        FROM decision_record d JOIN decision_entry e ON e.decision_record_id = d.id
        ORDER BY d.source_object_id, d.id, e.ordinal""")

#: The windows stages recorded in their provenance rows, where they cut the text.
TEXT_WINDOWS_SQL = text("""
    SELECT source_object_id, stage, bound FROM (
        SELECT source_object_id, 'classify_matter' AS stage, provenance->'text_window' AS bound FROM matter_assignment
        UNION ALL SELECT source_object_id, 'relate', provenance->'text_window' FROM document_version
        UNION ALL SELECT source_object_id, stage, provenance->'text_window' FROM extraction) w
    WHERE jsonb_typeof(bound) = 'object' AND (bound->>'truncated')::boolean
    ORDER BY source_object_id, stage""")


def object_rows(conn: Connection, root: str | None) -> Sequence[Row]:
    """Every live object (of the source at ``root``, or of every source), by source and relative path."""
    return conn.execute(EXPORT_SQL, {"root": root}).fetchall()


def relation_rows(conn: Connection) -> Sequence[Row]:
    """Every relation to a live object: ``from_object_id``, ``type``, ``target`` (the target's path)."""
    return conn.execute(RELATIONS_SQL).fetchall()


def metadata_rows(conn: Connection) -> Sequence[Row]:
    """Every ``document_metadata`` row."""
    return conn.execute(METADATA_SQL).fetchall()


def party_rows(conn: Connection) -> Sequence[Row]:
    """Every document party with its entity, by object and ordinal."""
    return conn.execute(PARTIES_SQL).fetchall()


def decision_rows(conn: Connection) -> Sequence[Row]:
    """Every decision entry, by object, record and ordinal."""
    return conn.execute(DECISIONS_SQL).fetchall()


def text_window_rows(conn: Connection) -> Sequence[Row]:
    """``source_object_id``, ``stage``, ``bound`` of every text window that cut a text, by object and stage."""
    return conn.execute(TEXT_WINDOWS_SQL).fetchall()
