"""Where the model stages keep a document's matter, type, version and date — if they have run yet.

Spec: insertion-pipeline.md "Classify" (MatterAssignment), "Relate" (Document / DocumentVersion),
"Extract metadata" (doc_type, doc_type_ancestors, doc_date) (``--matter`` /
``--type`` filter once those stages exist, and say so while they do not). Search, the index
stage's context header and hit hydration read those facts through the SQL fragments built here,
so they work on a database with or without the tables, detected at run time
(``information_schema``, cached for :data:`CACHE_SECONDS` per database).

Every fragment is a correlated scalar/EXISTS subquery on ``{oid}`` (a SQL expression naming the
source object id, e.g. ``c.source_object_id``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

CACHE_SECONDS = 30.0

_SCHEMA_SQL = text("""
SELECT table_name, column_name FROM information_schema.columns
WHERE table_schema = current_schema()
  AND table_name IN ('matter', 'matter_assignment', 'document', 'document_version', 'document_metadata',
                     'document_party', 'entity', 'entity_alias')
""")

_CACHE: dict[str, tuple[float, FactSources]] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class FactSources:
    """Which facts the database holds: the tables/columns present (empty sets when absent)."""

    columns: dict[str, frozenset[str]]

    def has(self, table: str, *cols: str) -> bool:
        return set(cols) <= self.columns.get(table, frozenset())

    @property
    def matter(self) -> bool:
        return self.has("matter_assignment", "source_object_id", "matter_id") and self.has("matter", "id", "reference")

    @property
    def versions(self) -> bool:
        return self.has("document_version", "source_object_id", "document_id")

    def _type_source(self) -> tuple[str, str, str] | None:
        """(FROM clause giving ``t.doc_type``, its WHERE on ``{oid}``, the table ``t`` is) or None."""
        if self.has("document_metadata", "source_object_id", "doc_type"):
            return "document_metadata t", "t.source_object_id = {oid}", "document_metadata"
        if self.versions and self.has("document", "id", "doc_type"):
            return ("document_version dv JOIN document t ON t.id = dv.document_id", "dv.source_object_id = {oid}",
                    "document")
        return None

    @property
    def typed(self) -> bool:
        return self._type_source() is not None

    def type_value(self, oid: str) -> str:
        """Scalar subquery: the object's document type (NULL when unknown)."""
        src = self._type_source()
        if src is None:
            return "NULL"
        return f"(SELECT t.doc_type FROM {src[0]} WHERE {src[1].format(oid=oid)} LIMIT 1)"

    def type_condition(self, oid: str, param: str = ":doc_type") -> str | None:
        """EXISTS: the object's type is ``param`` or has it among its ancestors; None when untyped."""
        src = self._type_source()
        if src is None:
            return None
        ancestors = f" OR {param} = ANY(t.doc_type_ancestors)" if self.has(src[2], "doc_type_ancestors") else ""
        return f"EXISTS (SELECT 1 FROM {src[0]} WHERE {src[1].format(oid=oid)} AND (t.doc_type = {param}{ancestors}))"

    def date_value(self, oid: str) -> str | None:
        """Scalar subquery: the document date the content states; None when no stage records it."""
        if self.has("document_metadata", "source_object_id", "doc_date"):
            return f"(SELECT t.doc_date FROM document_metadata t WHERE t.source_object_id = {oid} LIMIT 1)"
        if self.versions and self.has("document", "id", "doc_date"):
            return (f"(SELECT t.doc_date FROM document_version dv JOIN document t ON t.id = dv.document_id "
                    f"WHERE dv.source_object_id = {oid} LIMIT 1)")
        return None

    def undated(self, oid: str) -> str:
        """Boolean SQL: Extract metadata has read the object and found no date — not in its content, its names,
        nor a modification time it trusts (a copy's shared mtime dates nothing: ``ki.domain.metadata.path_dates``).
        Such a document is not "since" any day; its mtime must not stand in for the date."""
        if self.has("document_metadata", "source_object_id", "doc_date"):
            return (f"EXISTS (SELECT 1 FROM document_metadata t WHERE t.source_object_id = {oid} "
                    f"AND t.doc_date IS NULL)")
        return "false"

    def matter_condition(self, oid: str, param: str = ":matter") -> str | None:
        """EXISTS: the object is assigned to the matter with reference (or id) ``param``."""
        if not self.matter:
            return None
        return (f"EXISTS (SELECT 1 FROM matter_assignment ma JOIN matter m ON m.id = ma.matter_id "
                f"WHERE ma.source_object_id = {oid} AND (m.reference = {param} OR CAST(m.id AS text) = {param}))")

    def matter_value(self, oid: str, *, with_title: bool = False) -> str:
        """Scalar subquery: the matter reference (and title) of the object, NULL when unassigned."""
        if not self.matter:
            return "NULL"
        value = "m.reference || coalesce(' ' || nullif(m.title, ''), '')" \
            if with_title and self.has("matter", "title") else "m.reference"
        return (f"(SELECT {value} FROM matter_assignment ma JOIN matter m ON m.id = ma.matter_id "
                f"WHERE ma.source_object_id = {oid} LIMIT 1)")

    def version_values(self, oid: str) -> tuple[str, str]:
        """Scalar subqueries: (document id, version order) of the object, NULL before Relate."""
        if not self.versions:
            return "NULL", "NULL"
        order = "dv.version_order" if self.has("document_version", "version_order") else "NULL"
        return (f"(SELECT dv.document_id FROM document_version dv WHERE dv.source_object_id = {oid} LIMIT 1)",
                f"(SELECT {order} FROM document_version dv WHERE dv.source_object_id = {oid} LIMIT 1)")


def fact_sources(conn: Connection) -> FactSources:
    """The facts this database can hold (cached :data:`CACHE_SECONDS` per database URL)."""
    key = conn.engine.url.render_as_string(hide_password=True)
    now = time.monotonic()
    with _LOCK:
        hit = _CACHE.get(key)
        if hit and now - hit[0] < CACHE_SECONDS:
            return hit[1]
    columns: dict[str, set[str]] = {}
    for r in conn.execute(_SCHEMA_SQL):
        columns.setdefault(r.table_name, set()).add(r.column_name)
    sources = FactSources({t: frozenset(c) for t, c in columns.items()})
    with _LOCK:
        _CACHE[key] = (now, sources)
    return sources


def document_facts(conn: Connection, source_object_id: int) -> tuple[str | None, str | None, list[str], Any]:
    """(document type, matter reference + title, party names, document date) once Extract metadata / Classify
    have written them, else None / None / [] / None (the index stage's profile row: spec insertion-pipeline.md
    "Index"). The date only when the content states it: a date read from a copy's name or mtime would give
    identical bytes different profiles."""
    facts = fact_sources(conn)
    date_value = ("(SELECT t.doc_date FROM document_metadata t WHERE t.source_object_id = :o AND "
                  "t.doc_date_source NOT IN ('file_name', 'folder_name', 'mtime') LIMIT 1)"
                  if facts.has("document_metadata", "doc_date", "doc_date_source") else "NULL::date")
    row = conn.execute(text(f"SELECT {facts.type_value(':o')} AS doc_type, "
                            f"{facts.matter_value(':o', with_title=True)} AS matter, {date_value} AS doc_date"),
                       {"o": source_object_id}).one()
    parties: list[str] = []
    if facts.has("document_party", "source_object_id", "name"):
        parties = list(conn.execute(text("SELECT DISTINCT name FROM document_party WHERE source_object_id = :o "
                                         "ORDER BY name"), {"o": source_object_id}).scalars())
    return row.doc_type, row.matter, parties, row.doc_date
