"""Reading the search record: the ``chunk`` rows of objects with the facts the indexes filter on, and the
change log every projection of the record (the embedded lexical index, OpenSearch) follows.

Spec: insertion-pipeline.md "Index" (PostgreSQL holds the chunk rows; other indexes are synced from them;
an index beside PostgreSQL is kept in step, the record stays the truth).

**The change log** (``index_change``: one row per object, ``seq`` from ``index_change_seq``): every write of
an object's rows (:class:`ki.adapters.search.postgres.PostgresBackend` ``write_document``, ``update_access``, the
tombstone delete) bumps the object's ``seq`` in the same transaction. Writes of rows take
:data:`LOG_LOCK` just before they log and hold it to their commit, so ``seq`` order is commit order: a
projection that applied every change up to ``seq`` ``W`` never later meets a smaller one. (A tombstone
delete logs without the lock: a projection that misses it keeps a row the record no longer has, which every
search drops when the record refuses it, and then logs again: :func:`log_changes`.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.store.facts import fact_sources
from ki.store.locks import lock_key

#: Advisory lock of the writes that log (see the module docstring).
LOG_LOCK = lock_key("index_change", "log")

_LOG_SQL = text("""
INSERT INTO index_change (source_object_id, seq)
SELECT o, nextval('index_change_seq') FROM unnest(CAST(:oids AS bigint[])) AS o
ON CONFLICT (source_object_id) DO UPDATE SET seq = EXCLUDED.seq, changed_at = now()
""")

HEAD_SQL = text("SELECT coalesce(max(seq), 0) FROM index_change")
CHANGES_SQL = text("SELECT source_object_id, seq FROM index_change WHERE seq > :w ORDER BY seq LIMIT :n")
EPOCH_SQL = text("SELECT epoch::text FROM search_epoch LIMIT 1")
HEAD_AND_EPOCH_SQL = text("SELECT (SELECT coalesce(max(seq), 0) FROM index_change) AS head, "
                          "(SELECT epoch::text FROM search_epoch LIMIT 1) AS epoch")



@dataclass(frozen=True)
class LexRow:
    """What the projection indexes of one record row (``chunk`` + its object's facts).

    Attributes:
        source_object_id / ordinal / content_hash / kind / text: the row; ``fields`` the profile row's
            document fields (``title``, ``name``, ``folder``, ``type``, ``matter``, ``party`` → text).
        allowed / denied: the permission projection.
        matters: matter reference(s) and id(s); doc_types: type and its ancestors; doc_date; mtime_ns.
        clause_type: a clause row's clause-facet node (None: not a clause, or untyped).
    """

    source_object_id: int
    ordinal: int
    content_hash: str
    kind: str
    text: str
    fields: dict[str, str]
    allowed: tuple[str, ...]
    denied: tuple[str, ...]
    matters: tuple[str, ...] = ()
    doc_types: tuple[str, ...] = ()
    doc_date: date | None = None
    mtime_ns: int | None = None
    clause_type: str | None = None


@dataclass
class FilterReport:
    """Which filters a backend applies; ``notes`` say why one is ignored (e.g. no matter data yet)."""

    applied: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def log_changes(conn: Connection, source_object_ids: Sequence[int], *, ordered: bool = True) -> None:
    """Record in the caller's transaction that the objects' rows changed (see the module docstring).

    ``ordered``: take :data:`LOG_LOCK` first (writes of rows); False for deletes of rows the record no
    longer has. Call it as the transaction's last statement: the lock is held until commit.
    """
    ids = sorted({int(i) for i in source_object_ids})
    if not ids:
        return
    if ordered:
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": LOG_LOCK})
    conn.execute(_LOG_SQL, {"oids": ids})


def log_head(conn: Connection) -> int:
    """The highest ``seq`` logged (0 when nothing is)."""
    return int(conn.execute(HEAD_SQL).scalar() or 0)


def head_and_epoch(conn: Connection) -> tuple[int, str]:
    """(:func:`log_head`, :func:`record_epoch`) in one statement."""
    row = conn.execute(HEAD_AND_EPOCH_SQL).one()
    return int(row.head or 0), str(row.epoch)


def changes_after(conn: Connection, watermark: int, limit: int) -> list[tuple[int, int]]:
    """(object id, seq) of the objects changed after ``watermark``, oldest first, at most ``limit``."""
    return [(int(r.source_object_id), int(r.seq)) for r in conn.execute(CHANGES_SQL, {"w": watermark, "n": limit})]


def record_epoch(conn: Connection) -> str:
    """The database's search epoch (a UUID made with its schema): a projection built for another epoch — a
    dropped and re-created database — is rebuilt."""
    return str(conn.execute(EPOCH_SQL).scalar_one())


def _facts_sql(conn: Connection) -> str:
    facts = fact_sources(conn)
    matter = ("NULL::text[]" if not facts.matter else
              "(SELECT array_agg(x) FROM (SELECT m.reference AS x FROM matter_assignment ma JOIN matter m ON "
              "m.id = ma.matter_id WHERE ma.source_object_id = so.id UNION SELECT CAST(ma.matter_id AS text) FROM "
              "matter_assignment ma WHERE ma.source_object_id = so.id) mm)")
    type_value = facts.type_value("so.id")
    ancestors = ("(SELECT t.doc_type_ancestors FROM document_metadata t WHERE t.source_object_id = so.id LIMIT 1)"
                 if facts.has("document_metadata", "source_object_id", "doc_type_ancestors") else "NULL::text[]")
    date_value = facts.date_value("so.id") or "NULL::date"
    return (f"{matter} AS matters, array_remove(array_prepend({type_value}, coalesce({ancestors}, '{{}}')), NULL) "
            f"AS doc_types, {date_value} AS doc_date, CASE WHEN {facts.undated('so.id')} THEN NULL "
            f"ELSE so.mtime_ns END AS mtime_ns")


def passage_counts(conn: Connection, source_object_ids: Sequence[int]) -> dict[int, int]:
    """Object id → its live passages (rows other than the profile row; objects without any are absent): what
    decides whether an object is searched in the "large documents" index (:func:`is_large`)."""
    ids = sorted({int(i) for i in source_object_ids})
    if not ids:
        return {}
    sql = text("""SELECT c.source_object_id, count(*) AS n FROM chunk c
                  JOIN source_object so ON so.id = c.source_object_id AND so.deleted_at IS NULL
                  WHERE c.source_object_id = ANY(CAST(:ids AS bigint[])) AND NOT c.is_deleted AND c.ordinal >= 0
                  GROUP BY c.source_object_id""")
    return {int(r.source_object_id): int(r.n) for r in conn.execute(sql, {"ids": ids})}


def is_large(passages: int, large_passages: int) -> bool:
    """Whether a document of ``passages`` passages belongs in the "large documents" index: more than
    ``large_passages`` (``retrieval.large_document_passages``). Its passages must not shift the BM25
    statistics of the other documents' index."""
    return passages > large_passages


def lex_rows(conn: Connection, source_object_ids: Sequence[int]) -> Iterator[LexRow]:
    """The live rows of the objects as the lexical index holds them (rows of tombstoned objects are absent),
    streamed in (object, ordinal) order."""
    ids = sorted({int(i) for i in source_object_ids})
    if not ids:
        return
    sql = text(f"""
        SELECT c.source_object_id, c.ordinal, c.content_hash, c.kind, c.text, c.meta, c.allowed_principals,
               c.denied_principals, f.mtime_ns, f.matters, f.doc_types, f.doc_date
        FROM source_object so
        CROSS JOIN LATERAL (SELECT {_facts_sql(conn)}) f
        JOIN chunk c ON c.source_object_id = so.id AND NOT c.is_deleted
        WHERE so.id = ANY(CAST(:ids AS bigint[])) AND so.deleted_at IS NULL
        ORDER BY c.source_object_id, c.ordinal""")
    result = conn.execution_options(stream_results=True, yield_per=500).execute(sql, {"ids": ids})
    for r in result:
        meta: dict[str, Any] = r.meta or {}
        yield LexRow(int(r.source_object_id), int(r.ordinal), r.content_hash, r.kind, r.text,
                     dict(meta.get("fields") or {}), tuple(r.allowed_principals or ()),
                     tuple(r.denied_principals or ()), tuple(r.matters or ()), tuple(r.doc_types or ()),
                     r.doc_date, r.mtime_ns, meta.get("clause_type") if r.kind == "clause" else None)


# --- the record's filters and its confirmation of candidates -------------------------------------------------

ACL_SQL = """(c.allowed_principals && CAST(:principals AS text[])
          AND NOT (c.denied_principals && CAST(:principals AS text[])))"""

_CONFIRM = """
SELECT h.i, c.source_object_id IS NOT NULL AND so.id IS NOT NULL AS live,
       coalesce(c.source_object_id IS NOT NULL AND so.id IS NOT NULL AND {acl} {filters}, false) AS visible
FROM unnest(CAST(:oids AS bigint[]), CAST(:ords AS int[]), CAST(:idx AS int[])) AS h(oid, ord, i)
LEFT JOIN chunk c ON c.source_object_id = h.oid AND c.ordinal = h.ord AND NOT c.is_deleted
LEFT JOIN source_object so ON so.id = c.source_object_id AND so.deleted_at IS NULL
"""


def acl_sql(filters: Any) -> tuple[str, dict[str, Any]]:
    """The permission condition on ``c`` (chunk) for ``filters.principals`` (none for the local operator)."""
    if filters.principals is None:
        return "TRUE", {}
    return ACL_SQL, {"principals": list(filters.principals)}


def filter_sql(conn: Connection, filters: Any) -> tuple[str, dict[str, Any], Any]:
    """SQL conditions on ``c`` (chunk) and ``so`` (source_object) for parts, matter, type and since, their
    parameters, and a :class:`ki.adapters.search.backend.FilterReport` (a filter the database cannot apply yet —
    the model stages have not run — is ignored and named in its notes)."""
    from datetime import UTC, datetime

    facts = fact_sources(conn)
    report = FilterReport()
    sql: list[str] = []
    params: dict[str, Any] = {}
    for name, values, cond in (("kinds", getattr(filters, "kinds", None), "c.kind = ANY(CAST(:kinds AS text[]))"),
                               ("not_kinds", getattr(filters, "not_kinds", ()) or None,
                                "NOT (c.kind = ANY(CAST(:not_kinds AS text[])))")):
        if values is not None:
            sql.append(f"AND {cond}")
            params[name] = list(values)
            report.applied.append("parts")
    if filters.matter:
        cond = facts.matter_condition("c.source_object_id")
        if cond:
            sql.append(f"AND {cond}")
            params["matter"] = filters.matter
            report.applied.append("matter")
            if conn.execute(text("SELECT NOT EXISTS (SELECT 1 FROM matter_assignment)")).scalar():
                report.notes.append("no document has a matter assignment yet (classify_matter has not run): "
                                    "--matter matches nothing")
        else:
            report.notes.append("--matter ignored: this database has no matter assignments yet "
                                "(the classify_matter stage is not installed)")
    if filters.doc_type:
        cond = facts.type_condition("c.source_object_id")
        if cond:
            sql.append(f"AND {cond}")
            params["doc_type"] = filters.doc_type
            report.applied.append("type")
        else:
            report.notes.append("--type ignored: documents are not typed yet (the extract_metadata stage is "
                                "not installed)")
    if filters.since:
        since = datetime(filters.since.year, filters.since.month, filters.since.day, tzinfo=UTC)
        params["since_ns"] = int(since.timestamp()) * 1_000_000_000
        doc_date = facts.date_value("c.source_object_id")
        if doc_date:
            params["since_date"] = filters.since
            # an undated document (Extract metadata found no date it trusts) is not "since" any day
            sql.append(f"AND coalesce({doc_date} >= :since_date, NOT {facts.undated('c.source_object_id')} "
                       f"AND so.mtime_ns >= :since_ns)")
        else:
            sql.append("AND so.mtime_ns >= :since_ns")
            report.notes.append("--since compares the file's modification date (document dates are not "
                                "extracted yet)")
        report.applied.append("since")
    _document_filters(facts, filters, sql, params, report)
    return " ".join(sql), params, report


def _document_filters(facts: Any, filters: Any, sql: list[str], params: dict[str, Any], report: Any) -> None:
    """The clause-type, party and finality conditions (:mod:`ki.adapters.search.clause_filters`), appended to
    ``sql``."""
    from ki.store.finality import final_condition
    from ki.store.parties import party_condition

    clause_types = getattr(filters, "clause_types", None)
    if clause_types is not None:
        sql.append("AND c.kind = 'clause' AND c.meta->>'clause_type' = ANY(CAST(:clause_types AS text[]))")
        params["clause_types"] = list(clause_types)
        report.applied.append("clause_type")
    party_ids = getattr(filters, "party_entities", None)
    if party_ids is not None:
        sql.append(f"AND {party_condition('c.source_object_id')}" if facts.has("document_party", "entity_id")
                   else "AND FALSE")
        params["party_entities"] = list(party_ids)
        report.applied.append("party")
        if not party_ids:
            report.notes.append(f"--party {getattr(filters, 'party', '') or ''!r}: no entity of that name or alias "
                                "is known, so nothing matches")
    if getattr(filters, "final", False):
        if facts.has("document_version", "rendition", "duplicate_of"):
            sql.append(f"AND {final_condition('c.source_object_id')}")
        else:
            sql.append("AND FALSE")
            report.notes.append("--final matches nothing: no version is known yet (the relate stage has not run)")
        report.applied.append("final")


def confirm(conn: Connection, candidates: Sequence[tuple[int, int]], filters: Any
            ) -> tuple[set[int], set[int]]:
    """Check candidates ``(object id, ordinal)`` against the record in one query.

    Returns (indexes of the visible ones: the row exists, its object is live, the record's permissions admit
    ``filters.principals``, the filters hold; indexes of the stale ones: the record no longer has the row).
    """
    if not candidates:
        return set(), set()
    where, params, _ = filter_sql(conn, filters)
    acl, acl_params = acl_sql(filters)
    params |= acl_params | {"oids": [int(o) for o, _ in candidates], "ords": [int(r) for _, r in candidates],
                            "idx": list(range(len(candidates)))}
    rows = conn.execute(text(_CONFIRM.format(acl=acl, filters=where)), params).fetchall()
    return {r.i for r in rows if r.visible}, {r.i for r in rows if not r.live}


def object_facts(conn: Connection, source_object_ids: Sequence[int]) -> dict[int, tuple[tuple[str, ...],
                                                                                      tuple[str, ...], Any, Any]]:
    """object id → (matter references and ids, type and ancestors, document date, mtime_ns) of live objects:
    what a projection filters on besides the row itself."""
    ids = sorted({int(i) for i in source_object_ids})
    if not ids:
        return {}
    sql = text(f"""SELECT so.id, f.mtime_ns, f.matters, f.doc_types, f.doc_date FROM source_object so
                   CROSS JOIN LATERAL (SELECT {_facts_sql(conn)}) f
                   WHERE so.id = ANY(CAST(:ids AS bigint[])) AND so.deleted_at IS NULL""")
    return {int(r.id): (tuple(r.matters or ()), tuple(r.doc_types or ()), r.doc_date, r.mtime_ns)
            for r in conn.execute(sql, {"ids": ids})}


_HYDRATE = """
SELECT h.i, c.source_object_id, so.path, c.title, c.ordinal, c.content_hash, c.text, c.kind, c.meta,
       coalesce(so.missing_since, up.missing_since) AS missing_since {extra}
FROM unnest(CAST(:oids AS bigint[]), CAST(:ords AS int[]), CAST(:idx AS int[])) AS h(oid, ord, i)
JOIN chunk c ON c.source_object_id = h.oid AND c.ordinal = h.ord
JOIN source_object so ON so.id = h.oid AND so.deleted_at IS NULL
LEFT JOIN source_object up ON up.id = so.parent_id
ORDER BY h.i
"""

_ALSO_AT = """
SELECT c.content_hash, so.path FROM chunk c
JOIN source_object so ON so.id = c.source_object_id AND so.deleted_at IS NULL
WHERE c.content_hash = ANY(CAST(:hashes AS text[])) AND c.ordinal = 0 AND NOT c.is_deleted
  AND NOT (c.source_object_id = ANY(CAST(:oids AS bigint[]))) AND {acl}
ORDER BY so.path
"""


def hit_rows(conn: Connection, facts: Any, hits: Sequence[tuple[int, int]]) -> list[Any]:
    """The record's rows of ``hits`` ((object id, ordinal), in that order; ``i`` is the position): path, title,
    ordinal, content hash, text, kind, meta, missing since, and — where ``facts`` (:class:`ki.store.facts.FactSources`)
    has them — matter, document id, version and type. A hit whose object is tombstoned has no row."""
    document_id, version = facts.version_values("h.oid")
    extra = [f"{facts.matter_value('h.oid')} AS matter", f"{document_id} AS document_id",
             f"{version} AS version", f"{facts.type_value('h.oid')} AS doc_type"]
    return conn.execute(text(_HYDRATE.format(extra="".join(f", {e}" for e in extra))), {
        "oids": [o for o, _ in hits], "ords": [n for _, n in hits], "idx": list(range(len(hits)))}).fetchall()


def also_at(conn: Connection, filters: Any, content_hashes: Sequence[str], but: Sequence[int]) -> dict[str, list[str]]:
    """content hash → the paths of the other live objects with those bytes that ``filters``' principals may
    see (:func:`acl_sql`), by path; the objects ``but`` left out."""
    acl, acl_params = acl_sql(filters)
    also: dict[str, list[str]] = {}
    for r in conn.execute(text(_ALSO_AT.format(acl=acl)), acl_params | {
            "hashes": sorted(set(content_hashes)), "oids": list(but)}):
        also.setdefault(r.content_hash, []).append(r.path)
    return also
