"""The export fields of extract_metadata and extract_decisions (merged into ``ki export --json`` lines).

Spec: insertion-pipeline.md "Extract metadata" and "Extract decisions" (what each stage records). Per source object:

* ``doc_type`` (node id or None), ``doc_type_ancestors`` (root → node), ``ontology_fingerprint``;
* ``language``, ``doc_date`` (ISO date), ``doc_date_source`` (where it came from: ``mail``, ``label``, …,
  ``mtime``), ``title``, ``identifiers`` (``[{type, value[, issuer]}]``);
* ``parties``: ``[{name, role, role_basis, entity_id, entity_name, kind, identifiers}]``;
* ``decisions``: ``[{kind, before, after, locus, change_summary, rationale_category, rationale,
  generalizability, author, date}]`` (empty when the version records none);
* ``text_windows``: ``{stage: {read_chars, total_chars, truncated, head_chars, tail_chars}}`` for every stage
  that read only a bounded window of a huge text (:mod:`ki.core.text_window`; empty for a normal-sized one).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy.engine import Connection

from ki.store.export import decision_rows, metadata_rows, party_rows, text_window_rows

EMPTY: dict[str, Any] = {"doc_type": None, "doc_type_ancestors": [], "ontology_fingerprint": None, "language": None,
                         "doc_date": None, "doc_date_source": None, "title": None, "identifiers": [], "parties": [],
                         "decisions": [], "text_windows": {}}


def empty_fields() -> dict[str, Any]:
    """The fields of an object extract_metadata has not processed."""
    return {k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v) for k, v in EMPTY.items()}


def metadata_fields(conn: Connection) -> dict[int, dict[str, Any]]:
    """source object id → the export fields above, for every object with metadata or decisions."""
    out: dict[int, dict[str, Any]] = defaultdict(empty_fields)
    for r in metadata_rows(conn):
        out[r.source_object_id].update({
            "doc_type": r.doc_type, "doc_type_ancestors": list(r.doc_type_ancestors or []),
            "ontology_fingerprint": r.ontology_fingerprint, "language": r.language,
            "doc_date": r.doc_date.isoformat() if r.doc_date else None, "doc_date_source": r.doc_date_source,
            "title": r.title,
            "identifiers": r.identifiers or []})
    for r in party_rows(conn):
        out[r.source_object_id]["parties"].append({
            "name": r.name, "role": r.role, "role_basis": r.role_basis, "entity_id": r.entity_id,
            "entity_name": r.entity_name, "kind": r.kind, "identifiers": r.identifiers or []})
    for r in decision_rows(conn):
        out[r.source_object_id]["decisions"].append({
            "kind": r.kind, "before": r.before_text or "", "after": r.after_text or "", "locus": r.locus,
            "change_summary": r.change_summary, "rationale_category": r.rationale_category,
            "rationale": r.rationale_text, "generalizability": r.generalizability, "author": r.author,
            "date": r.changed_at.isoformat() if r.changed_at else None})
    for r in text_window_rows(conn):
        out[r.source_object_id]["text_windows"][r.stage] = r.bound
    return dict(out)
