"""Document and DocumentVersion rows: attach, fold, order (called inside a materialization transaction).

Spec: insertion-pipeline.md "Relate" (Document and DocumentVersion rows, supersedes edges,
redline_against pointers; "an entity abandoned by a duplicate/new-version decision is folded into
its survivor rather than left behind as an empty document"). The caller holds the file locks of
the objects it writes and the document locks of the documents it touches (:func:`lock_documents`).

Version order: renditions of one version (same ``version_label``: one draft stamp, or one signed
or filed copy) share an order; versions are ordered by ``version_key`` (date, stage, draft number);
an exact duplicate carries its original's order; ``supersedes`` points to a file of the previous
version; ``is_final`` marks the last version.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.core.errors import Contended
from ki.core.text_window import normalised_digest
from ki.domain.relate.facts import FileFacts
from ki.store.locks import lock_key


def lock_documents(conn: Connection, doc_ids: set[int]) -> None:
    """Take the transaction-level locks of ``doc_ids`` without waiting (sorted); raise :class:`Contended`
    when one is held elsewhere, so no transaction ever waits on a document lock while holding another."""
    for doc in sorted(d for d in doc_ids if d is not None):
        if not conn.execute(text("SELECT pg_try_advisory_xact_lock(:k)"),
                            {"k": lock_key("relate-document", str(doc))}).scalar_one():
            raise Contended(f"document {doc} is being written by another worker")


def documents_of(conn: Connection, oids: set[int]) -> dict[int, int]:
    """object id → document id, for the objects that have a version row."""
    if not oids:
        return {}
    rows = conn.execute(text("SELECT source_object_id, document_id FROM document_version "
                             "WHERE source_object_id = ANY(:o)"), {"o": sorted(oids)})
    return {r.source_object_id: r.document_id for r in rows}


def version_facts(facts: FileFacts) -> dict[str, Any]:
    """``version_key`` (sortable), ``version_label`` (renditions of one version share it) and ``rendition``."""
    date = facts.version_date.isoformat() if facts.version_date else "0000-00-00"
    number = (facts.stamp.number if facts.stamp and facts.stamp.number else None) or facts.name_version or 0
    if facts.stamp is not None and facts.stamp.date is not None:
        label = f"stamp:{facts.stamp.kind}:{facts.stamp.number or 0}:{facts.stamp.date.isoformat()}"
    elif facts.rendition in ("signed", "filed"):
        label = f"{facts.rendition}:{date}"
    elif facts.name_version is not None:
        # "SPA v3.docx", "SPA v3 (marked).docx", "Comparison of v2 to v3 - SPA.pdf", "7990945.3 - SPA.docx":
        # renditions of one version
        label = f"version:{facts.name_version}"
    else:
        digest = (facts.text_digest or normalised_digest(facts.text))[:16]
        label = f"text:{digest}"
    return {"version_key": f"{date}|{facts.stage_rank}|{number:04d}", "version_label": label,
            "rendition": facts.rendition}


def facts_for(conn: Connection, oid: int) -> FileFacts | None:
    """Facts of one object from its artifact (None when it is not converted)."""
    row = conn.execute(text("""SELECT so.id, so.external_id, so.mtime_ns, so.content_hash, so.parent_id, a.body
                               FROM source_object so LEFT JOIN artifact a
                               ON a.content_hash = so.content_hash AND a.kind = 'structured_json'
                               WHERE so.id = :o"""), {"o": oid}).first()
    if row is None or row.body is None:
        return None
    return FileFacts.from_artifact(ref=f"F{oid}", path=row.external_id, body=row.body, mtime_ns=row.mtime_ns,
                                   content_hash=row.content_hash or "", embedded=row.parent_id is not None)


def create_document(conn: Connection, *, matter_id: int | None, title: str | None) -> int:
    """A new, empty document."""
    return int(conn.execute(text("INSERT INTO document (matter_id, title) VALUES (:m, :t) RETURNING id"),
                            {"m": matter_id, "t": title}).scalar_one())


def upsert_version(conn: Connection, *, oid: int, document_id: int, content_hash: str | None,
                   facts: dict[str, Any], duplicate_of: int | None = None, redline_against: int | None = None,
                   provenance: dict[str, Any] | None = None, keep_links: bool = False) -> None:
    """Write the object's version row. ``keep_links`` keeps an existing row's duplicate/redline pointers
    (used when a row is created on behalf of another file's decision)."""
    conn.execute(text(f"""
        INSERT INTO document_version (document_id, source_object_id, content_hash, version_key, version_label,
                                      rendition, duplicate_of, redline_against, provenance)
        VALUES (:d, :o, :h, :k, :l, :r, :dup, :red, CAST(:p AS jsonb))
        ON CONFLICT (source_object_id) DO UPDATE
        SET document_id = EXCLUDED.document_id, content_hash = EXCLUDED.content_hash,
            version_key = EXCLUDED.version_key, version_label = EXCLUDED.version_label,
            rendition = EXCLUDED.rendition,
            {"" if keep_links else "duplicate_of = EXCLUDED.duplicate_of, redline_against = EXCLUDED.redline_against,"}
            provenance = CASE WHEN :keep THEN document_version.provenance ELSE EXCLUDED.provenance END,
            updated_at = now()"""),
        {"d": document_id, "o": oid, "h": content_hash, "k": facts["version_key"], "l": facts["version_label"],
         "r": facts["rendition"], "dup": duplicate_of, "red": redline_against, "keep": keep_links,
         "p": json.dumps(provenance or {}, default=str)})


def ensure_row(conn: Connection, oid: int, *, matter_id: int | None) -> int:
    """The object's document id, creating a document of its own (and its version row) when it has none."""
    found = documents_of(conn, {oid})
    if oid in found:
        return found[oid]
    facts = facts_for(conn, oid)
    doc = create_document(conn, matter_id=matter_id, title=facts.title if facts else None)
    vf = version_facts(facts) if facts else {"version_key": None, "version_label": f"object:{oid}",
                                             "rendition": None}
    upsert_version(conn, oid=oid, document_id=doc, content_hash=facts.content_hash if facts else None, facts=vf,
                   provenance={"created_for": "another file's decision"}, keep_links=True)
    return doc


def fold(conn: Connection, abandoned: int, survivor: int) -> None:
    """Move every version of ``abandoned`` into ``survivor`` and delete the empty document."""
    if abandoned == survivor:
        return
    conn.execute(text("UPDATE document_version SET document_id = :s, updated_at = now() WHERE document_id = :a"),
                 {"s": survivor, "a": abandoned})
    conn.execute(text("DELETE FROM document WHERE id = :a"), {"a": abandoned})


def drop_if_empty(conn: Connection, document_id: int | None) -> None:
    """Delete a document that no version points to any more."""
    if document_id is not None:
        conn.execute(text("DELETE FROM document d WHERE d.id = :d AND NOT EXISTS "
                          "(SELECT 1 FROM document_version v WHERE v.document_id = d.id)"), {"d": document_id})


def reorder(conn: Connection, document_id: int) -> None:
    """Recompute version_order, supersedes and is_final of every version of the document, and its title.

    Ties are broken by path, never by row id, and the title and matter are the first version's (its
    first file by path with one), so the result depends on the document's files, not on the order they
    came in.
    """
    rows = conn.execute(text("""SELECT v.source_object_id AS oid, v.version_key, v.version_label, v.duplicate_of,
                                       so.path, a.body->>'title' AS title, ma.matter_id
                                FROM document_version v JOIN source_object so ON so.id = v.source_object_id
                                LEFT JOIN artifact a ON a.content_hash = so.content_hash AND a.kind = 'structured_json'
                                LEFT JOIN matter_assignment ma ON ma.source_object_id = so.id
                                WHERE v.document_id = :d"""), {"d": document_id}).fetchall()
    originals = [r for r in rows if r.duplicate_of is None]
    groups: dict[str, list] = {}
    for r in originals:
        groups.setdefault(r.version_label or f"object:{r.oid}", []).append(r)
    ordered = sorted(groups.values(), key=lambda g: (min(r.version_key or "" for r in g), min(r.path for r in g)))
    order_of: dict[int, int] = {}
    updates = []
    prev_rep = None
    for i, group in enumerate(ordered, start=1):
        rep = min(group, key=lambda r: (r.version_key or "", r.path)).oid
        for r in group:
            order_of[r.oid] = i
            updates.append({"o": r.oid, "n": i, "s": prev_rep, "f": i == len(ordered)})
        prev_rep = rep
    for r in rows:
        if r.duplicate_of is not None:
            n = order_of.get(r.duplicate_of)
            updates.append({"o": r.oid, "n": n, "s": None, "f": bool(n and n == len(ordered))})
    if updates:
        conn.execute(text("""UPDATE document_version SET version_order = :n, supersedes = :s, is_final = :f,
                             updated_at = now() WHERE source_object_id = :o"""), updates)
    first = sorted(ordered[0] if ordered else rows, key=lambda r: r.path)
    title = next((r.title for r in first if r.title), None) or next(
        (r.title for r in sorted(rows, key=lambda r: r.path) if r.title), None)
    matter = next((r.matter_id for r in first if r.matter_id is not None), None)
    conn.execute(text("""UPDATE document SET title = coalesce(:t, title), matter_id = coalesce(:m, matter_id),
                         updated_at = now()
                         WHERE id = :d AND (title, matter_id) IS DISTINCT FROM (coalesce(:t, title),
                                                                               coalesce(:m, matter_id))"""),
                 {"t": title, "m": matter, "d": document_id})
