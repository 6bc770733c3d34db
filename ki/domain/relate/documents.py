"""Document and DocumentVersion rules: version keys and labels, a row on another file's behalf, the version order
(called inside a materialization transaction; the statements are :mod:`ki.store.documents`').

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

from typing import Any

from sqlalchemy.engine import Connection

from ki.core.errors import Contended
from ki.core.text_window import normalised_digest
from ki.domain.relate.facts import FileFacts
from ki.store.documents import (
    create_document,
    documents_of,
    object_with_body,
    set_document_head,
    set_version_order,
    try_lock_document,
    upsert_version,
    version_rows,
)


def lock_documents(conn: Connection, doc_ids: set[int]) -> None:
    """Take the transaction-level locks of ``doc_ids`` without waiting (sorted); raise :class:`Contended`
    when one is held elsewhere, so no transaction ever waits on a document lock while holding another."""
    for doc in sorted(d for d in doc_ids if d is not None):
        if not try_lock_document(conn, doc):
            raise Contended(f"document {doc} is being written by another worker")


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
    row = object_with_body(conn, oid)
    if row is None or row.body is None:
        return None
    return FileFacts.from_artifact(ref=f"F{oid}", path=row.external_id, body=row.body, mtime_ns=row.mtime_ns,
                                   content_hash=row.content_hash or "", embedded=row.parent_id is not None)


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


def reorder(conn: Connection, document_id: int) -> None:
    """Recompute version_order, supersedes and is_final of every version of the document, and its title.

    Ties are broken by path, never by row id, and the title and matter are the first version's (its
    first file by path with one), so the result depends on the document's files, not on the order they
    came in.
    """
    rows = version_rows(conn, document_id)
    originals = [r for r in rows if r.duplicate_of is None]
    groups: dict[str, list] = {}
    for r in originals:
        groups.setdefault(r.version_label or f"object:{r.oid}", []).append(r)
    ordered = sorted(groups.values(), key=lambda g: (min(r.version_key or "" for r in g), min(r.path for r in g)))
    order_of: dict[int, int] = {}
    updates: list[tuple[int, int | None, int | None, bool]] = []
    prev_rep = None
    for i, group in enumerate(ordered, start=1):
        rep = min(group, key=lambda r: (r.version_key or "", r.path)).oid
        for r in group:
            order_of[r.oid] = i
            updates.append((r.oid, i, prev_rep, i == len(ordered)))
        prev_rep = rep
    for r in rows:
        if r.duplicate_of is not None:
            n = order_of.get(r.duplicate_of)
            updates.append((r.oid, n, None, bool(n and n == len(ordered))))
    set_version_order(conn, updates)
    first = sorted(ordered[0] if ordered else rows, key=lambda r: r.path)
    title = next((r.title for r in first if r.title), None) or next(
        (r.title for r in sorted(rows, key=lambda r: r.path) if r.title), None)
    matter = next((r.matter_id for r in first if r.matter_id is not None), None)
    set_document_head(conn, document_id, title=title, matter_id=matter)
