"""The export fields of extract_metadata and extract_decisions (merged into ``ki export --json`` lines).

Spec: insertion-pipeline.md "Extract metadata" and "Extract decisions" (what each stage records). Per source object:

* ``doc_type`` (node id or None), ``doc_type_ancestors`` (root → node), ``ontology_fingerprint``;
* ``language``, ``doc_date`` (ISO date), ``doc_date_source`` (where it came from: ``mail``, ``label``, …,
  ``mtime``), ``title``, ``identifiers`` (``[{type, value[, issuer]}]``);
* ``parties``: ``[{name, role, role_basis, entity_id, entity_name, kind, identifiers}]``;
* ``decisions``: ``[{kind, before, after, locus, change_summary, rationale_category, rationale,
  generalizability, author, date}]`` (empty when the version records none);
* ``text_windows``: ``{stage: {read_chars, total_chars, truncated, head_chars, tail_chars}}`` for every stage
  that read only a bounded window of a huge text (:mod:`ki.metadata.window`; empty for a normal-sized one).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

EMPTY: dict[str, Any] = {"doc_type": None, "doc_type_ancestors": [], "ontology_fingerprint": None, "language": None,
                         "doc_date": None, "doc_date_source": None, "title": None, "identifiers": [], "parties": [],
                         "decisions": [], "text_windows": {}}


def empty_fields() -> dict[str, Any]:
    """The fields of an object extract_metadata has not processed."""
    return {k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v) for k, v in EMPTY.items()}


def metadata_fields(conn: Connection) -> dict[int, dict[str, Any]]:
    """source object id → the export fields above, for every object with metadata or decisions."""
    out: dict[int, dict[str, Any]] = defaultdict(empty_fields)
    for r in conn.execute(text("""
        SELECT source_object_id, doc_type, doc_type_ancestors, ontology_fingerprint, language, doc_date,
               doc_date_source, title, identifiers FROM document_metadata""")):
        out[r.source_object_id].update({
            "doc_type": r.doc_type, "doc_type_ancestors": list(r.doc_type_ancestors or []),
            "ontology_fingerprint": r.ontology_fingerprint, "language": r.language,
            "doc_date": r.doc_date.isoformat() if r.doc_date else None, "doc_date_source": r.doc_date_source,
            "title": r.title,
            "identifiers": r.identifiers or []})
    for r in conn.execute(text("""
        SELECT p.source_object_id, p.name, p.role, p.role_basis, p.entity_id, e.name AS entity_name, e.kind,
               p.identifiers
        FROM document_party p JOIN entity e ON e.id = p.entity_id ORDER BY p.source_object_id, p.ordinal""")):
        out[r.source_object_id]["parties"].append({
            "name": r.name, "role": r.role, "role_basis": r.role_basis, "entity_id": r.entity_id,
            "entity_name": r.entity_name, "kind": r.kind, "identifiers": r.identifiers or []})
    for r in conn.execute(text("""
        SELECT d.source_object_id, e.kind, e.locus, e.before_text, e.after_text, e.change_summary,
               e.rationale_category, e.rationale_text, e.generalizability, e.author, e.changed_at
        FROM decision_record d JOIN decision_entry e ON e.decision_record_id = d.id
        ORDER BY d.source_object_id, d.id, e.ordinal""")):
        out[r.source_object_id]["decisions"].append({
            "kind": r.kind, "before": r.before_text or "", "after": r.after_text or "", "locus": r.locus,
            "change_summary": r.change_summary, "rationale_category": r.rationale_category,
            "rationale": r.rationale_text, "generalizability": r.generalizability, "author": r.author,
            "date": r.changed_at.isoformat() if r.changed_at else None})
    for r in conn.execute(_TEXT_WINDOWS_SQL):
        out[r.source_object_id]["text_windows"][r.stage] = r.bound
    return dict(out)


#: The windows stages recorded in their provenance rows, where they cut the text.
_TEXT_WINDOWS_SQL = text("""
    SELECT source_object_id, stage, bound FROM (
        SELECT source_object_id, 'classify_matter' AS stage, provenance->'text_window' AS bound FROM matter_assignment
        UNION ALL SELECT source_object_id, 'relate', provenance->'text_window' FROM document_version
        UNION ALL SELECT source_object_id, stage, provenance->'text_window' FROM extraction) w
    WHERE jsonb_typeof(bound) = 'object' AND (bound->>'truncated')::boolean
    ORDER BY source_object_id, stage""")
