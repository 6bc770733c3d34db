"""The embedded lexical half: exact top-k distinct contents from the tantivy projection, confirmed by the record.

Spec: insertion-pipeline.md "Index"; DESIGN.md "Duplicates and permissions" (identical content shown once per
principal).
:func:`search_projection` ranks with :mod:`ki.adapters.search.query`'s tiers: it asks the engine for the best rows of
tier 1
under the caller's filter (permissions inside the query), keeps the best row of each content it has not taken yet,
drops documents an excluded item matches anywhere, and has the record confirm the rest, best first and only as many
as are still wanted (row live, object not tombstoned, the record's permissions and filters). It then asks again
with every content taken and every refused object excluded (``MustNot``), until ``k`` contents are taken or the
tier is exhausted, then tier 2. Every round ranks every matching row (tantivy's BM25 over all matches, block-max
WAND), so the result is the exact top k whatever the corpus — a file with 60,000 matching passages takes one place,
and the next round looks past it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine

from ki.adapters.search.backend import RankedChunk, SearchFilters
from ki.adapters.search.lexical import LexHit, read_hits, to_tantivy
from ki.adapters.search.query import ParsedQuery
from ki.adapters.search.query_plan import LexFilters, Node, excluded_in, search_node
from ki.store.index_record import confirm, log_changes

log = logging.getLogger(__name__)

#: Rounds per tier at most (each takes or refuses at least one content).
MAX_ROUNDS = 40
#: Candidates the record checks beyond those still wanted (most are admitted: the engine filtered them).
CONFIRM_MARGIN = 4


#: Runs one round: (query tree, rows wanted, tier) → hits best first (an engine may collapse per content).
RunRound = Callable[[Node, int, int], list[LexHit]]
#: Whether a query tree matches any row (the per-document exclusion check).
AnyMatch = Callable[[Node], bool]


def tie_order(hit: LexHit) -> tuple[float, int, int]:
    """Sort key of a round's hits: best score first, equal scores by object and row (deterministic whatever
    the engine's segments)."""
    return -hit.score, hit.source_object_id, hit.ordinal


def rank_contents(run: RunRound, any_match: AnyMatch, engine: Engine, parsed: ParsedQuery, filters: SearchFilters,
                  k: int, *, engine_facts: frozenset[str] = frozenset()) -> list[RankedChunk]:
    """The best row of each of the ``k`` best contents (see the module docstring), best first, on any engine.

    Args:
        run / any_match: the engine (tantivy: :func:`search_projection`; OpenSearch: its backend).
        engine_facts: the fact filters (``matter``, ``type``, ``since``) the engine may apply itself (those the
            record can apply: :func:`ki.store.index_record.filter_sql`); the record checks every filter again.
    Raises: the record's and the engine's errors.
    """
    if parsed.empty or k <= 0:
        return []
    taken: list[RankedChunk] = []
    taken_contents: set[str] = set()
    refused_oids: set[int] = set()
    refused_contents: set[str] = set()
    stale: set[int] = set()
    for tier in (1, 2) if parsed.has_relaxed_tier else (1,):
        for _round in range(MAX_ROUNDS):
            if len(taken) >= k:
                break
            lf = LexFilters(
                principals=filters.principals, kinds=filters.kinds, not_kinds=filters.not_kinds,
                clause_types=filters.clause_types,
                matter=filters.matter if "matter" in engine_facts else None,
                doc_type=filters.doc_type if "type" in engine_facts else None,
                since=filters.since if "since" in engine_facts else None,
                reject_oids=tuple(sorted(refused_oids)),
                reject_contents=tuple(sorted(taken_contents | refused_contents)))
            want = max(2 * (k - len(taken)), 20)
            # equal scores in object, row order: the engines order ties by their internal addresses, which
            # depend on segment layout (a rebuilt index would order them otherwise)
            hits = sorted(run(search_node(parsed, tier, lf), want, tier), key=tie_order)
            if not hits:
                break
            firsts: dict[str, LexHit] = {}
            for h in hits:
                firsts.setdefault(h.content_hash, h)
            pending = list(firsts.values())
            refusals = 0
            while pending and len(taken) < k:
                # the record checks the best candidates first, as many as are still wanted (and a margin);
                # after a refusal, the rest of the round at once (a filter the engine could not apply)
                size = len(pending) if refusals else k - len(taken) + CONFIRM_MARGIN
                batch, pending = pending[:size], pending[size:]
                if parsed.excluded:
                    gone = {c.source_object_id for c in batch
                            if any_match(excluded_in(parsed, c.source_object_id))}  # type: ignore[arg-type]
                    refused_contents |= {c.content_hash for c in batch if c.source_object_id in gone}
                    batch = [c for c in batch if c.source_object_id not in gone]
                with engine.connect() as conn:
                    visible, dead = confirm(conn, [(c.source_object_id, c.ordinal) for c in batch], filters)
                for i, c in enumerate(batch):
                    if i in visible and c.content_hash not in taken_contents:
                        taken.append(RankedChunk(c.source_object_id, c.ordinal, c.content_hash, c.score, tier))
                        taken_contents.add(c.content_hash)
                    else:
                        refused_oids.add(c.source_object_id)
                        refusals += 1
                        if i in dead:
                            stale.add(c.source_object_id)
            if len(hits) < want:
                break  # the tier has no more rows
    if stale:  # rows the record no longer has: let the projections apply those objects again
        try:
            with engine.begin() as conn:
                log_changes(conn, sorted(stale), ordered=False)
        except Exception as exc:  # noqa: BLE001 - housekeeping must not fail a search
            log.warning("could not log %d stale objects of the lexical index: %s", len(stale), exc)
    return taken[:k]


def merge_by_score(answers: list[list[LexHit]], size: int) -> list[LexHit]:
    """The best ``size`` of several indexes' hits (each best first), by score (:func:`tie_order`). Each index
    scored its rows with its own BM25 statistics (:mod:`ki.adapters.search.projection`: the "large documents" index
    apart), so no index's rows move another's scores."""
    return sorted((h for hits in answers for h in hits), key=tie_order)[:size]


def search_projection(projection: Any, engine: Engine, parsed: ParsedQuery, filters: SearchFilters, k: int, *,
                      engine_facts: frozenset[str] = frozenset()) -> list[RankedChunk]:
    """:func:`rank_contents` on the tantivy projection (caught up by the caller): each round asks the index and
    the large-documents index for their best ``size`` rows and keeps the best ``size`` of both by score
    (:func:`merge_by_score`) — the same rows one engine with per-index statistics would return.

    Raises: the record's errors; tantivy's ValueError for an index that cannot be read.
    """
    searchers = [index.searcher() for index in projection.indexes()]
    schema = projection.schema

    def run(node: Node, size: int, tier: int) -> list[LexHit]:
        query = to_tantivy(node, schema)
        return merge_by_score([read_hits(s, s.search(query, size, count=False), tier) for s in searchers], size)

    def any_match(node: Node) -> bool:
        query = to_tantivy(node, schema)
        return any(s.search(query, 1, count=False).hits for s in searchers)

    return rank_contents(run, any_match, engine, parsed, filters, k, engine_facts=engine_facts)
