"""``ki export --json``: one JSON object per live source object — what Classify and Relate concluded.

Spec: insertion-pipeline.md "Classify" and "Relate" (what the export shows of them). Fields per line:

* ``path``: relative to the source root (an embedded object: its container's path + `` » name``);
  ``source``: the source root; ``object_id``; ``embedded``;
* ``matter_reference`` (None when unassigned) and ``matter_placeholder`` (an ``UNASSIGNED-…`` matter);
* ``document_id``, ``version_order``, ``rendition``, ``is_final``;
* ``duplicate_of``, ``redline_against``, ``supersedes``: paths or None;
* ``relations``: ``[{"type", "target"}]`` with target paths;
* ``thread_id``: the CommunicationThread id of an e-mail, else None;
* extract_metadata / extract_decisions: ``doc_type``, ``doc_type_ancestors``, ``ontology_fingerprint``,
  ``language``, ``doc_date``, ``title``, ``identifiers``, ``parties``, ``decisions`` (see
  :mod:`ki.metadata.export`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from sqlalchemy import text

from ki.metadata.export import empty_fields, metadata_fields
from ki.store.db import Database


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


def export_rows(db: Database, *, root: str | None = None) -> Iterator[dict[str, Any]]:
    """Yield one dict per live source object (of the source at ``root``, or of every source)."""
    with db.engine.connect() as conn:
        relations: dict[int, list[dict[str, str]]] = defaultdict(list)
        for r in conn.execute(RELATIONS_SQL):
            relations[r.from_object_id].append({"type": r.type, "target": r.target})
        rows = conn.execute(EXPORT_SQL, {"root": root}).fetchall()
        metadata = metadata_fields(conn)
    for r in rows:
        yield {
            "source": r.root, "path": r.rel, "object_id": r.id, "embedded": r.embedded,
            "matter_reference": r.reference, "matter_placeholder": bool(r.placeholder),
            "document_id": r.document_id, "version_order": r.version_order, "rendition": r.rendition,
            "is_final": r.is_final, "duplicate_of": r.duplicate_of, "redline_against": r.redline_against,
            "supersedes": r.supersedes, "relations": relations.get(r.id, []), "thread_id": r.thread_id,
            **(metadata.get(r.id) or empty_fields()),
        }
