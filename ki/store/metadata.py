"""The rows extract_metadata writes: document_metadata, document_party, extraction; the notable_clauses artifact.

Spec: insertion-pipeline.md "Extract metadata": "Writes doc_type, doc_type_ancestors, the ontology
fingerprint, language, doc_date (from content, falling back to file mtime), title, parties, and
identifiers onto the document; stores an Artifact(kind="notable_clauses") per content hash and one
Extraction provenance row per document. An untyped result is recorded honestly (doc_type = NULL) with
the fingerprint of the scope that judged it". Rows are keyed by source object (and carry the content
hash), so re-running the stage replaces them; ``document_version_id`` is filled when Relate has made a
DocumentVersion for the object.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.core.like_pattern import like_escape
from ki.store.db import has_table

if TYPE_CHECKING:  # the store reads the rows' fields; it never imports the domain above it
    from ki.domain.metadata.parties import PartyRow

NOTABLE_CLAUSES = "notable_clauses"


@dataclass(frozen=True)
class MetadataRow:
    """The ``document_metadata`` values of one source object."""

    content_hash: str
    matter_key: str | None
    doc_type: str | None
    doc_type_ancestors: list[str]
    ontology_version: str
    ontology_fingerprint: str
    language: str | None
    doc_date: dt.date | None
    doc_date_source: str | None
    title: str | None
    identifiers: list[dict[str, Any]]
    facts: dict[str, Any]
    producer_version: str


def document_version_id(conn: Connection, source_object_id: int) -> int | None:
    """The object's DocumentVersion id when Relate's table and row exist, else None."""
    if not has_table(conn, "document_version"):
        return None
    return conn.execute(text("SELECT id FROM document_version WHERE source_object_id = :so"),
                        {"so": source_object_id}).scalar()


UPSERT_METADATA_SQL = text("""
INSERT INTO document_metadata (source_object_id, content_hash, document_version_id, matter_key, doc_type,
    doc_type_ancestors, ontology_version, ontology_fingerprint, language, doc_date, doc_date_source, title,
    identifiers, facts, producer_version, updated_at)
VALUES (:so, :h, :dv, :mk, :t, CAST(:anc AS text[]), :ov, :fp, :lang, :d, :ds, :title, CAST(:ids AS jsonb),
        CAST(:facts AS jsonb), :pv, now())
ON CONFLICT (source_object_id) DO UPDATE SET content_hash = EXCLUDED.content_hash,
    document_version_id = EXCLUDED.document_version_id, matter_key = EXCLUDED.matter_key,
    doc_type = EXCLUDED.doc_type, doc_type_ancestors = EXCLUDED.doc_type_ancestors,
    ontology_version = EXCLUDED.ontology_version, ontology_fingerprint = EXCLUDED.ontology_fingerprint,
    language = EXCLUDED.language, doc_date = EXCLUDED.doc_date, doc_date_source = EXCLUDED.doc_date_source,
    title = EXCLUDED.title, identifiers = EXCLUDED.identifiers, facts = EXCLUDED.facts,
    producer_version = EXCLUDED.producer_version, updated_at = now()
""")


def write_metadata(conn: Connection, source_object_id: int, row: MetadataRow, parties: list[PartyRow]) -> set[str]:
    """Upsert the document's metadata and replace its party rows (same transaction as the resolution).

    Returns: the matter keys the replaced party rows were on (a document classified into another matter
    leaves its old one, which :func:`ki.domain.metadata.parties.settle_parties` settles again).
    """
    conn.execute(UPSERT_METADATA_SQL, {
        "so": source_object_id, "h": row.content_hash, "dv": document_version_id(conn, source_object_id),
        "mk": row.matter_key, "t": row.doc_type, "anc": row.doc_type_ancestors, "ov": row.ontology_version,
        "fp": row.ontology_fingerprint, "lang": row.language, "d": row.doc_date, "ds": row.doc_date_source,
        "title": row.title, "ids": json.dumps(row.identifiers, ensure_ascii=False),
        "facts": json.dumps(row.facts, ensure_ascii=False, default=str), "pv": row.producer_version})
    previous = {r.matter_key for r in conn.execute(text(
        "DELETE FROM document_party WHERE source_object_id = :so RETURNING matter_key"), {"so": source_object_id})
        if r.matter_key}
    for i, p in enumerate(parties):
        conn.execute(text("""
            INSERT INTO document_party (source_object_id, entity_id, ordinal, name, role, role_basis, matter_key,
                                        identifiers, resolution)
            VALUES (:so, :e, :i, :name, :role, :basis, :mk, CAST(:ids AS jsonb), CAST(:res AS jsonb))
        """), {"so": source_object_id, "e": p.entity_id, "i": i, "name": p.name, "role": p.role,
               "basis": p.role_basis, "mk": row.matter_key, "ids": json.dumps(p.identifiers, ensure_ascii=False),
               "res": json.dumps(p.resolution)})
    return previous


def write_extraction(conn: Connection, *, source_object_id: int, stage: str, content_hash: str,
                     producer_version: str, provenance: dict[str, Any]) -> None:
    """Upsert the one Extraction provenance row of (object, stage)."""
    conn.execute(text("""
        INSERT INTO extraction (source_object_id, stage, content_hash, producer_version, model, trace_id, provenance)
        VALUES (:so, :stage, :h, :pv, :model, :trace, CAST(:prov AS jsonb))
        ON CONFLICT (source_object_id, stage) DO UPDATE SET content_hash = EXCLUDED.content_hash,
            producer_version = EXCLUDED.producer_version, model = EXCLUDED.model, trace_id = EXCLUDED.trace_id,
            provenance = EXCLUDED.provenance, created_at = now()
    """), {"so": source_object_id, "stage": stage, "h": content_hash, "pv": producer_version,
           "model": str(provenance.get("model") or "rules"), "trace": provenance.get("trace_id"),
           "prov": json.dumps(provenance, ensure_ascii=False, default=str)})


def write_notable_clauses(conn: Connection, content_hash: str, *, clauses: list[dict[str, Any]],
                          facet_version: str | None, producer_version: str) -> bool:
    """Store the ``notable_clauses`` artifact of the content hash; an existing one is replaced only when it was
    typed under another clause facet (True when written)."""
    row = conn.execute(text("""
        INSERT INTO artifact (content_hash, kind, producer, producer_version, body)
        VALUES (:h, :k, 'extract_metadata', :v, CAST(:b AS jsonb))
        ON CONFLICT (content_hash, kind) DO UPDATE
            SET body = EXCLUDED.body, producer_version = EXCLUDED.producer_version
        WHERE artifact.body->>'clause_facet' IS DISTINCT FROM EXCLUDED.body->>'clause_facet'
        RETURNING id
    """), {"h": content_hash, "k": NOTABLE_CLAUSES, "v": producer_version,
           "b": json.dumps({"clause_facet": facet_version, "clauses": clauses}, ensure_ascii=False)}).first()
    return row is not None


#: At most this many files of one folder are read to judge whether its mtimes were set at once.
FOLDER_MTIME_SAMPLE = 200


def folder_mtimes(conn: Connection, source_id: int, root: str, path: str, *, min_files: int) -> list[int]:
    """Modification times (ns) of the live top-level files under the folder holding ``path`` (an absolute
    path under the source's ``root``): the file's own folder, or — while that holds fewer than ``min_files``
    files (:data:`ki.domain.metadata.path_dates.UNIFORM_MIN_FILES`) — the folder above it, up to the source's top;
    at most :data:`FOLDER_MTIME_SAMPLE` values."""
    folder = path.rsplit("/", 1)[0] if "/" in path else ""
    out: list[int] = []
    while folder:
        like = like_escape(folder) + "/%"
        out = [int(r[0]) for r in conn.execute(text(
            "SELECT mtime_ns FROM source_object WHERE source_id = :s AND path LIKE :p AND parent_id IS NULL "
            "AND deleted_at IS NULL AND mtime_ns IS NOT NULL LIMIT :n"),
            {"s": source_id, "p": like, "n": FOLDER_MTIME_SAMPLE})]
        if len(out) >= min_files or folder.rstrip("/") == root.rstrip("/") or "/" not in folder:
            break
        folder = folder.rsplit("/", 1)[0]
    return out
