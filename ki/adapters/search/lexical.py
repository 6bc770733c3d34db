"""The embedded lexical index: a tantivy (BM25, block-max WAND) index of the record's rows.

Spec: insertion-pipeline.md "Index" (exact top-k at any corpus size: the lexical half ranks every matching
passage — tantivy computes BM25 over all matches and keeps the true top k, skipping blocks that cannot enter
it); fields with boosts; one query semantics (:mod:`ki.adapters.search.query`). Why tantivy and not a PostgreSQL
ranking: see
``bench/search.py`` and the README ("Search"): ranking every match with ``ts_rank_cd`` costs seconds on a
common word at 1,000,000 chunks, and ``ts_rank_cd`` is not BM25.

PostgreSQL stays the record: this index is a projection of the ``chunk`` rows, kept in step by
:mod:`ki.adapters.search.projection`, rebuilt from the record whenever it is missing or stale. Each row is one tantivy
document: passages (every textual part: body, comment, footnote …) carry the analysed streams of their
text (:mod:`ki.adapters.search.analysis`) in ``t_exact`` / ``t_de`` / ``t_en`` / ``t_parts``; a document's profile row
carries its fields (``f_title``, ``f_name``, ``f_folder``, ``f_type``, ``f_matter``, ``f_party``: exact words
with positions, and ``f_*_x``: stems, compound parts and name pieces). Every row carries the permission
projection (``allow`` / ``deny``), its ``kind``, and the facts the filters use (``matter``: reference and id;
``dtype``: type and ancestors; ``ddate``: the document date as ``yyyymmdd``, 0 unknown; ``mtime``: seconds).
The permission filter is inside the query (deny beats allow; exact), and the record confirms every hit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ki.adapters.search.analysis import name_tokens, parts, stem, streams, words
from ki.adapters.search.query import CLAUSE_TAG, FIELD_WEIGHTS, HEAD_MARK
from ki.adapters.search.query_plan import AllOf, AnyOf, AtLeast, BestOf, Filtered, InSet, Node, Phrase, Term, WithBonus
from ki.store.index_record import LexRow

#: Bump when the schema or the analysis changes: an index of another version is rebuilt from the record.
SCHEMA_VERSION = 5
DOC_FIELDS = tuple(FIELD_WEIGHTS)
PROFILE_KIND = "profile"
WRITER_HEAP_BYTES = 64_000_000


def build_schema() -> Any:
    """The tantivy schema (see the module docstring)."""
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_integer_field("oid", stored=True, indexed=True, fast=True)
    sb.add_integer_field("ordinal", stored=True, fast=True)
    for name in ("chash", "kind"):
        sb.add_text_field(name, stored=True, tokenizer_name="raw", index_option="basic")
    for name in ("allow", "deny", "matter", "dtype"):
        sb.add_text_field(name, tokenizer_name="raw", index_option="basic")
    sb.add_integer_field("ddate", indexed=True, fast=True)
    sb.add_integer_field("mtime", indexed=True, fast=True)
    for name in ("t_exact", "t_de", "t_en", "t_parts"):
        sb.add_text_field(name, tokenizer_name="whitespace", index_option="position")
    for f in DOC_FIELDS:
        sb.add_text_field(f"f_{f}", tokenizer_name="whitespace", index_option="position")
        sb.add_text_field(f"f_{f}_x", tokenizer_name="whitespace", index_option="freq")
    return sb.build()


def kind_values(row: LexRow) -> str | list[str]:
    """The ``kind`` field of a row: its part, plus :data:`CLAUSE_TAG` + type for a typed clause row."""
    return [row.kind, CLAUSE_TAG + row.clause_type] if row.clause_type else row.kind


def field_streams(name: str, value: str) -> tuple[str, str]:
    """(exact words, extra forms) of a document field: the extra stream holds each word's stems and compound
    parts, the head (last part) of each compound marked with :data:`~ki.adapters.search.query.HEAD_MARK`
    (``Aufforderungsschreiben`` adds ``>schreib``), and for file names and folders the camel-case / digit pieces
    (:func:`name_tokens`)."""
    ws = words(value)
    extra: list[str] = []
    for w in ws:
        ps = parts(w, "de")
        forms = {stem(w, "de"), stem(w, "en"), *ps}
        forms.discard(w)
        if len(ps) > 1:
            forms.add(HEAD_MARK + ps[-1])
        extra.extend(sorted(forms))
    if name in ("name", "folder"):
        pieces = [t for t in name_tokens(value) if t not in set(ws)]
        extra.extend(pieces)
    return " ".join(ws), " ".join(extra)


def row_source(row: LexRow) -> dict[str, Any]:
    """The analysed fields of one row, as both engines index them: ``oid``, ``ordinal``, ``chash``, ``kind``,
    ``allow``, ``deny``, ``matter``, ``dtype`` (lists for the multi-valued), ``ddate``, ``mtime``, and the text
    streams (``t_*`` for a passage, ``f_*`` for a profile row)."""
    src: dict[str, Any] = {
        "oid": int(row.source_object_id), "ordinal": int(row.ordinal), "chash": row.content_hash,
        "kind": kind_values(row),
        "allow": list(row.allowed), "deny": list(row.denied), "matter": list(row.matters),
        "dtype": list(row.doc_types), "ddate": int(row.doc_date.strftime("%Y%m%d")) if row.doc_date else 0,
        "mtime": int((row.mtime_ns or 0) // 1_000_000_000)}
    if row.kind == PROFILE_KIND:
        for f in DOC_FIELDS:
            value = (row.fields or {}).get(f)
            if value:
                exact, extra = field_streams(f, value)
                src[f"f_{f}"] = exact
                if extra:
                    src[f"f_{f}_x"] = extra
    else:
        s = streams(row.text)
        src |= {"t_exact": s.exact, "t_de": s.de, "t_en": s.en, "t_parts": s.parts}
    return src


_INTEGER_FIELDS = frozenset({"oid", "ordinal", "ddate", "mtime"})


def lex_document(row: LexRow) -> Any:
    """The tantivy document of one row (:func:`row_source`)."""
    import tantivy

    d = tantivy.Document()
    for name, value in row_source(row).items():
        if name in _INTEGER_FIELDS:
            d.add_integer(name, value)
        elif isinstance(value, list):
            for v in value:
                d.add_text(name, v)
        else:
            d.add_text(name, value)
    return d


def to_tantivy(node: Node, schema: Any, *, scope_leaves: bool = True) -> Any:
    """Render a :mod:`ki.adapters.search.query_plan` tree as a tantivy query (filters score 0).

    A :class:`Filtered` node whose ``must`` holds a ``kind`` filter (``--clauses``, ``--in``) restricts every
    scored leaf of its query to those rows (:func:`kind_scope`) instead of filtering the whole query's matches
    afterwards: tantivy's union scores every row of a 4,096-row window before a filter can drop it, so a clause
    search scored every matching passage too. Leaf ∩ scope scores the leaf's BM25 + 0, so ranking and scores
    are those of the filter form (``scope_leaves=False`` renders that form); with the projection writing each
    batch's clause rows after its passages (:mod:`ki.adapters.search.projection`), the leaves skip the passage
    blocks through their skip lists.
    """
    import tantivy

    Q, Occur = tantivy.Query, tantivy.Occur

    def boost(q: Any, b: float) -> Any:
        return q if b == 1.0 else Q.boost_query(q, b)

    def scoped(q: Any, scope: Any) -> Any:
        return q if scope is None else Q.boolean_query([(Occur.Must, q), (Occur.Must, scope)])

    def render(n: Node, scope: Any = None) -> Any:
        if isinstance(n, Term):
            return scoped(boost(Q.term_query(schema, n.field, n.value), n.boost), scope)
        if isinstance(n, Phrase):
            return scoped(boost(Q.phrase_query(schema, n.field, list(n.words)), n.boost), scope)
        if isinstance(n, AnyOf):
            return boost(Q.boolean_query([(Occur.Should, render(c, scope)) for c in n.children]), n.boost)
        if isinstance(n, AllOf):
            return boost(Q.boolean_query([(Occur.Must, render(c, scope)) for c in n.children]), n.boost)
        if isinstance(n, BestOf):
            return boost(Q.disjunction_max_query([render(c, scope) for c in n.children], n.tie_breaker), n.boost)
        if isinstance(n, WithBonus):
            return Q.boolean_query([(Occur.Must, render(n.query, scope)), (Occur.Should, render(n.bonus, scope))])
        if isinstance(n, InSet):
            return Q.term_set_query(schema, n.field, list(n.values))
        if isinstance(n, AtLeast):
            return Q.range_query(schema, n.field, tantivy.FieldType.Integer, lower_bound=n.value)
        if isinstance(n, Filtered):
            kinds = kind_scope(n) if scope_leaves else None
            inner = None
            if kinds is not None:
                terms = [Q.term_query(schema, "kind", v) for v in kinds.values]
                inner = Q.const_score_query(terms[0] if len(terms) == 1 else
                                            Q.boolean_query([(Occur.Should, t) for t in terms]), 0.0)
            clauses = [(Occur.Must, render(n.query, inner))]
            clauses += [(Occur.Must, Q.const_score_query(render(m), 0.0)) for m in n.must if m is not kinds]
            clauses += [(Occur.MustNot, render(m)) for m in n.must_not]
            return Q.boolean_query(clauses)
        raise TypeError(f"not a query node: {n!r}")

    return render(node)


def kind_scope(node: Filtered) -> InSet | None:
    """The ``kind`` filter of ``node.must`` that :func:`to_tantivy` moves onto the scored leaves (the first one;
    a clause-type filter, also on ``kind``, stays a filter), or None."""
    return next((m for m in node.must if isinstance(m, InSet) and m.field == "kind"), None)


@dataclass(frozen=True)
class LexHit:
    """A row an engine returned: object, ordinal, content hash, BM25 score, tier (1 or 2)."""

    source_object_id: int
    ordinal: int
    content_hash: str
    score: float
    tier: int


def read_hits(searcher: Any, result: Any, tier: int) -> list[LexHit]:
    """The stored fields of a tantivy search result's hits."""
    out = []
    for score, addr in result.hits:
        doc = searcher.doc(addr)
        out.append(LexHit(int(doc["oid"][0]), int(doc["ordinal"][0]), str(doc["chash"][0]), float(score), tier))
    return out
