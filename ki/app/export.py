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
  :mod:`ki.domain.metadata.export`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from ki.domain.metadata.export import empty_fields, metadata_fields
from ki.store.db import Database
from ki.store.export import object_rows, relation_rows


def export_rows(db: Database, *, root: str | None = None) -> Iterator[dict[str, Any]]:
    """Yield one dict per live source object (of the source at ``root``, or of every source)."""
    with db.engine.connect() as conn:
        relations: dict[int, list[dict[str, str]]] = defaultdict(list)
        for r in relation_rows(conn):
            relations[r.from_object_id].append({"type": r.type, "target": r.target})
        rows = object_rows(conn, root)
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
