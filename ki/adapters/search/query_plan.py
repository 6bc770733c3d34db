"""The lexical query both engines run: a small tree made from a :class:`~ki.adapters.search.query.ParsedQuery`.

One query semantics, one definition for both backends. :func:`tier_node`, :func:`excluded_node` and
:func:`filter_nodes` build the tree over the analysed fields both indexes hold (:mod:`ki.adapters.search.lexical`:
``t_exact`` / ``t_de`` / ``t_en`` / ``t_parts`` for passages, ``f_<field>`` / ``f_<field>_x`` for a
document's fields, and the filter fields); :func:`ki.adapters.search.lexical.to_tantivy` and
:func:`ki.adapters.search.opensearch_index.to_dsl` render it. Scores are BM25 per field (k1 1.2, b 0.75 in both
engines) times the weights of :mod:`ki.adapters.search.query`, summed — except a document's fields, which count by their
best match (:class:`BestOf`: the best field + :data:`~ki.adapters.search.query.FIELD_TIE_BREAKER` × the others).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime

from ki.adapters.search.analysis import WordForms
from ki.adapters.search.query import (
    CLAUSE_TAG,
    COMPOUND_HEAD_WEIGHT,
    FIELD_GROUPS,
    FIELD_TIE_BREAKER,
    FIELD_WEIGHTS,
    HEAD_MARK,
    PHRASE_EXACT_WEIGHT,
    PHRASE_STEM_WEIGHT,
    STREAM_WEIGHTS,
    Group,
    Item,
    ParsedQuery,
)


@dataclass(frozen=True)
class Term:
    """``field`` holds the token ``value`` (scored, × ``boost``)."""

    field: str
    value: str | int
    boost: float = 1.0


@dataclass(frozen=True)
class Phrase:
    """``field`` holds ``words`` at consecutive positions (scored, × ``boost``)."""

    field: str
    words: tuple[str, ...]
    boost: float = 1.0


@dataclass(frozen=True)
class AnyOf:
    """At least one child matches; scores add up (× ``boost``)."""

    children: tuple[Node, ...]
    boost: float = 1.0


@dataclass(frozen=True)
class AllOf:
    """Every child matches; scores add up (× ``boost``)."""

    children: tuple[Node, ...]
    boost: float = 1.0


@dataclass(frozen=True)
class BestOf:
    """At least one child matches; the score is the best child's + ``tie_breaker`` × the others' (a disjunction
    max: OpenSearch ``dis_max``, tantivy ``DisjunctionMaxQuery``), × ``boost``."""

    children: tuple[Node, ...]
    tie_breaker: float = 0.0
    boost: float = 1.0


@dataclass(frozen=True)
class WithBonus:
    """``query`` must match; ``bonus`` adds its score where it matches too (never required)."""

    query: Node
    bonus: Node


@dataclass(frozen=True)
class InSet:
    """A filter (score 0): ``field`` holds one of ``values``."""

    field: str
    values: tuple[str | int, ...]


@dataclass(frozen=True)
class AtLeast:
    """A filter (score 0): the integer ``field`` is at least ``value``."""

    field: str
    value: int


@dataclass(frozen=True)
class Filtered:
    """``query`` scored, every ``must`` filter holding, no ``must_not`` node matching."""

    query: Node
    must: tuple[Node, ...] = ()
    must_not: tuple[Node, ...] = ()


Node = Term | Phrase | AnyOf | AllOf | BestOf | WithBonus | InSet | AtLeast | Filtered


def _phrase(field: str, words: tuple[str, ...], boost: float) -> Node:
    return Term(field, words[0], boost) if len(words) == 1 else Phrase(field, words, boost)


def item_node(item: Item) -> Node:
    """One item across every passage stream and document field (see :mod:`ki.adapters.search.query`)."""
    out: list[Node] = []
    single = item.single
    if single is not None:
        f = single
        out += [Term("t_exact", f.exact, STREAM_WEIGHTS["exact"]), Term("t_de", f.de, STREAM_WEIGHTS["de"]),
                Term("t_en", f.en, STREAM_WEIGHTS["en"]), _phrase("t_parts", f.parts_de, STREAM_WEIGHTS["parts"])]
        if f.parts_nl != f.parts_de and len(f.parts_nl) > 1:
            out.append(_phrase("t_parts", f.parts_nl, STREAM_WEIGHTS["parts"]))
        out += [_best([field_node(name, f) for name in group]) for group in FIELD_GROUPS]
        return AnyOf(tuple(out))
    exact = tuple(f.exact for f in item.forms)
    out += [_phrase("t_exact", exact, PHRASE_EXACT_WEIGHT if item.quoted else STREAM_WEIGHTS["exact"]),
            _phrase("t_de", tuple(f.de for f in item.forms), PHRASE_STEM_WEIGHT),
            _phrase("t_en", tuple(f.en for f in item.forms), PHRASE_STEM_WEIGHT * 0.7)]
    out += [_best([_phrase(f"f_{name}", exact, FIELD_WEIGHTS[name][0]) for name in group]) for group in FIELD_GROUPS]
    return AnyOf(tuple(out))


def _best(nodes: list[Node]) -> Node:
    """A field group: its best-matching field + the tie-breaker × the others (one field: itself)."""
    return nodes[0] if len(nodes) == 1 else BestOf(tuple(nodes), FIELD_TIE_BREAKER)


def field_node(name: str, f: WordForms) -> Node:
    """One word in one document field ``name``: the exact word (× the field's exact weight); its stems, its
    compound parts in the field's compounds and — a single-part word — the compounds *ending* in it
    (:data:`~ki.adapters.search.query.HEAD_MARK`, × :data:`~ki.adapters.search.query.COMPOUND_HEAD_WEIGHT`), each ×
    the field's
    stem/part weight; the matches within the field add up."""
    w_exact, w_extra = FIELD_WEIGHTS[name]
    extra = sorted({f.de, f.en} - {f.exact})
    out: list[Node] = [Term(f"f_{name}", f.exact, w_exact)]
    out += [Term(f"f_{name}_x", e, w_extra) for e in extra]
    if len(f.parts_de) > 1:
        out.append(AllOf(tuple(Term(f"f_{name}_x", p) for p in f.parts_de), w_extra))
    else:
        if f.parts_de[0] not in {*extra, f.exact}:
            out.append(Term(f"f_{name}_x", f.parts_de[0], w_extra))
        out.append(Term(f"f_{name}_x", HEAD_MARK + f.parts_de[0], w_extra * COMPOUND_HEAD_WEIGHT))
    return AnyOf(tuple(out))


def group_node(group: Group) -> Node:
    """A group: any of its items."""
    return item_node(group.items[0]) if len(group.items) == 1 else AnyOf(tuple(item_node(i) for i in group.items))


def proximity_node(parsed: ParsedQuery) -> Node | None:
    """The plain words of the query in a row, as a phrase (exact words, then stems): a bonus for passages
    that hold them verbatim (``Here is some text`` unquoted still ranks the verbatim passage first)."""
    singles = [g.items[0].single for g in parsed.groups if len(g.items) == 1 and not g.items[0].quoted]
    words_ = [f for f in singles if f is not None]
    if len(words_) < 2:
        return None
    return AnyOf((Phrase("t_exact", tuple(f.exact for f in words_), PHRASE_EXACT_WEIGHT),
                  Phrase("t_de", tuple(f.de for f in words_), PHRASE_STEM_WEIGHT)))


def tier_node(parsed: ParsedQuery, tier: int) -> Node:
    """Tier 1: every group. Tier 2: every required group and at least one relaxable group. Both with the
    :func:`proximity_node` bonus."""
    if tier == 1:
        node: Node = AllOf(tuple(group_node(g) for g in parsed.groups))
    else:
        relax = [group_node(g) for g in parsed.relaxable]
        node = AllOf((*[group_node(g) for g in parsed.required], relax[0] if len(relax) == 1 else AnyOf(tuple(relax))))
    bonus = proximity_node(parsed)
    return node if bonus is None else WithBonus(node, bonus)


def excluded_node(parsed: ParsedQuery) -> Node | None:
    """Any excluded item, or None."""
    if not parsed.excluded:
        return None
    return AnyOf(tuple(item_node(i) for i in parsed.excluded))


@dataclass(frozen=True)
class LexFilters:
    """What the engines filter on (the record confirms each hit again).

    Attributes:
        principals: the caller's principals (``*`` included), None for the local operator.
        kinds / not_kinds: parts to search only / never (``deleted``, ``comment``, ``profile`` …).
        clause_types: clause rows of these clause-facet nodes only (``kind`` holds ``clause:<type>``).
        matter / doc_type / since: as :class:`ki.adapters.search.backend.SearchFilters`.
        reject_oids / reject_contents: objects / contents already taken or refused.
    """

    principals: tuple[str, ...] | None
    kinds: tuple[str, ...] | None = None
    not_kinds: tuple[str, ...] = ()
    matter: str | None = None
    doc_type: str | None = None
    since: date | None = None
    reject_oids: tuple[int, ...] = ()
    reject_contents: tuple[str, ...] = ()
    clause_types: tuple[str, ...] | None = None


def filter_nodes(f: LexFilters) -> tuple[tuple[Node, ...], tuple[Node, ...]]:
    """(must, must_not) filters: permissions (some allowed principal held, no denied one: deny beats allow),
    parts, matter, type, since (document date on or after; a document Extract metadata has not read yet:
    its mtime; one it found undated: never), refusals."""
    must: list[Node] = []
    must_not: list[Node] = []
    if f.principals is not None:
        must.append(InSet("allow", tuple(f.principals)))
        must_not.append(InSet("deny", tuple(f.principals)))
    if f.kinds is not None:
        must.append(InSet("kind", tuple(f.kinds)))
    if f.not_kinds:
        must_not.append(InSet("kind", tuple(f.not_kinds)))
    if f.clause_types is not None:
        must.append(InSet("kind", tuple(CLAUSE_TAG + t for t in f.clause_types)))
    if f.matter:
        must.append(InSet("matter", (f.matter,)))
    if f.doc_type:
        must.append(InSet("dtype", (f.doc_type,)))
    if f.since:
        day = int(f.since.strftime("%Y%m%d"))
        secs = int(datetime(f.since.year, f.since.month, f.since.day, tzinfo=UTC).timestamp())
        must.append(AnyOf((AtLeast("ddate", day), AllOf((InSet("ddate", (0,)), AtLeast("mtime", secs))))))
    if f.reject_oids:
        must_not.append(InSet("oid", tuple(f.reject_oids)))
    if f.reject_contents:
        must_not.append(InSet("chash", tuple(f.reject_contents)))
    return tuple(must), tuple(must_not)


def search_node(parsed: ParsedQuery, tier: int, f: LexFilters) -> Node:
    """The query of one round: the tier's query under the filters, excluded items out."""
    must, must_not = filter_nodes(f)
    excl = excluded_node(parsed)
    return Filtered(tier_node(parsed, tier), must, (*must_not, *([excl] if excl is not None else [])))


def excluded_in(parsed: ParsedQuery, oid: int) -> Node | None:
    """Rows of object ``oid`` that an excluded item matches (None without exclusions)."""
    excl = excluded_node(parsed)
    return None if excl is None else Filtered(excl, (InSet("oid", (oid,)),))
