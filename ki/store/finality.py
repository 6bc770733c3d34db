"""Which files of a document hold its profile row and its clause rows: the latest final version.

Spec: insertion-pipeline.md "Index" ("a profile embedding at ordinal −1 for the latest final version and clause
embeddings at ordinals 1000+ for final/executed versions") and "Relate" (DocumentVersion: version order,
renditions, ``is_final`` = the last version). A version is **final** when its rendition is ``final``, ``signed``
or ``filed`` (:data:`FINAL_RENDITIONS`: the Relate stage reads them from stamps, names and signature lines), or
when it is a byte-identical copy of such a file. Drafts, redlines and files of unknown rendition are not.

* **Clause holders**: the files of the document's latest final version order (its renditions and identical
  copies that are final) — none when no version is final.
* **Profile holders**: the clause holders; when no version is final, the files of the latest version order.
  A file without a DocumentVersion row (Relate has not placed it) is its own document: it holds its profile and
  no clauses.

Every copy keeps its own rows (each carries its own permissions); search shows identical content once per
principal, so a document has one profile per reader.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection

FINAL_RENDITIONS = ("final", "signed", "filed")

_VERSIONS = text("""
SELECT v.source_object_id AS oid, v.version_order, v.rendition, v.duplicate_of
FROM document_version v JOIN source_object so ON so.id = v.source_object_id AND so.deleted_at IS NULL
WHERE v.document_id = (SELECT document_id FROM document_version WHERE source_object_id = :o)
""")


@dataclass(frozen=True)
class Holders:
    """The document of an object and who holds its rows: ``document_id`` (None: no DocumentVersion row),
    ``profile`` / ``clauses`` (object ids), ``siblings`` (every live file of the document, the object included)."""

    document_id: int | None
    profile: frozenset[int]
    clauses: frozenset[int]
    siblings: frozenset[int]


def holders_of(conn: Connection, source_object_id: int) -> Holders:
    """The :class:`Holders` of the object's document (see the module docstring). One query."""
    rows = conn.execute(_VERSIONS, {"o": source_object_id}).fetchall()
    if not rows:
        return Holders(None, frozenset({source_object_id}), frozenset(), frozenset({source_object_id}))
    doc = conn.execute(text("SELECT document_id FROM document_version WHERE source_object_id = :o"),
                       {"o": source_object_id}).scalar()
    by_oid = {r.oid: r for r in rows}

    def final(r) -> bool:  # noqa: ANN001 - a result row
        if r.rendition in FINAL_RENDITIONS:
            return True
        original = by_oid.get(r.duplicate_of) if r.duplicate_of is not None else None
        return original is not None and original.rendition in FINAL_RENDITIONS

    finals = [r for r in rows if r.version_order is not None and final(r)]
    if finals:
        top = max(r.version_order for r in finals)
        clauses = frozenset(r.oid for r in finals if r.version_order == top)
        profile = clauses
    else:
        ordered = [r for r in rows if r.version_order is not None]
        top = max((r.version_order for r in ordered), default=None)
        clauses = frozenset()
        profile = frozenset(r.oid for r in ordered if r.version_order == top) if ordered else frozenset(by_oid)
    return Holders(doc, profile, clauses, frozenset(by_oid))


def final_condition(oid: str) -> str:
    """SQL EXISTS: the object ``oid`` (a SQL expression) is a final version (see the module docstring)."""
    finals = ", ".join(f"'{r}'" for r in FINAL_RENDITIONS)
    return (f"EXISTS (SELECT 1 FROM document_version fv LEFT JOIN document_version fo "
            f"ON fo.source_object_id = fv.duplicate_of WHERE fv.source_object_id = {oid} "
            f"AND (fv.rendition IN ({finals}) OR fo.rendition IN ({finals})))")
