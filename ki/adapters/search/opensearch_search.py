"""The search half of :class:`ki.adapters.search.opensearch.OpenSearchBackend`: both halves in one ``_msearch``,
each candidate confirmed by the record.

Spec: insertion-pipeline.md "Index" (permission projection on every row); notes/opensearch.md §3
(client-side RRF: the halves come back apart, :mod:`ki.adapters.search.hybrid` fuses them). The lexical half is the
query tree of :mod:`ki.adapters.search.query_plan` in rounds of the best rows
(:func:`ki.adapters.search.lexical_search.rank_contents`); the vector half is Lucene k-NN with the permission filter
inside ``knn.filter``. The record confirms each candidate in one query (:func:`ki.store.index_record.confirm`);
rows it no longer has are deleted from OpenSearch when a search meets them. A mixin: the backend owns the
client, the index names and the record.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ki.adapters.search.backend import FilterReport, RankedChunk, SearchFilters
from ki.adapters.search.lexical import LexHit
from ki.adapters.search.lexical_search import rank_contents
from ki.adapters.search.opensearch_index import (
    FACT_FILTER_OVERFETCH,
    OVERFETCH_MARGIN,
    SPACE_TYPE,
    SPACES,
    hit_row,
    lex_hits,
    lexical_body,
    similarity_from_score,
    to_dsl,
    vector_body,
)
from ki.adapters.search.query import parse_query
from ki.adapters.search.query_plan import Node
from ki.store.index_record import confirm


class OpenSearchSearch:
    """Searches of :class:`ki.adapters.search.opensearch.OpenSearchBackend` (see the module docstring).

    Raises (every method): InfrastructureError (unreachable, 5xx, 429 exhausted), PostgreSQL errors of the record.
    """

    @staticmethod
    def _fetch(filters: SearchFilters, k: int) -> int:
        if (filters.matter or filters.doc_type or filters.since or filters.clause_types is not None
                or filters.party_entities is not None or filters.final):
            return k * FACT_FILTER_OVERFETCH + OVERFETCH_MARGIN
        return k + OVERFETCH_MARGIN

    def _run(self, bodies: list[dict[str, Any] | None], what: str) -> list[list[dict[str, Any]]]:
        """The hits of each body (None → []), all in one ``_msearch`` round trip."""
        from opensearchpy.exceptions import NotFoundError, OpenSearchException

        wanted = [b for b in bodies if b is not None]
        if not wanted:
            return [[] for _ in bodies]
        try:
            resp = self.client.msearch(index=self.both, body=[line for b in wanted
                                                              for line in ({"ignore_unavailable": True}, b)])
        except NotFoundError:
            return [[] for _ in bodies]  # nothing indexed yet
        except OpenSearchException as exc:
            raise self._fail(exc, what) from exc
        answers = iter(resp["responses"])
        out: list[list[dict[str, Any]]] = []
        for b in bodies:
            if b is None:
                out.append([])
                continue
            answer = next(answers)
            error = answer.get("error")
            if error:
                if isinstance(error, dict) and error.get("type") == "index_not_found_exception":
                    out.append([])  # nothing indexed yet
                    continue
                from opensearchpy.exceptions import TransportError

                raise self._fail(TransportError(answer.get("status", 500), str(error)[:300], answer), what)
            out.append(answer["hits"]["hits"])
        return out

    def _vector_body(self, vector: np.ndarray | None, filters: SearchFilters, k: int) -> dict[str, Any] | None:
        identity = self.index_identity()
        if identity is None or vector is None:
            return None
        vec = np.asarray(vector, dtype=np.float32)
        if vec.shape != (identity.dimension,):
            raise ValueError(f"query vector has shape {vec.shape}; the index holds {identity}")
        return vector_body(vec, filters, self._fetch(filters, k))

    def search_halves(self, query: str, vector: np.ndarray | None, filters: SearchFilters, k: int
                      ) -> tuple[list[RankedChunk], list[RankedChunk]]:
        """Both halves (see :meth:`search_lexical`, :meth:`search_vector`):
        :func:`ki.adapters.search.hybrid.hybrid_search`
        uses this when a backend has it."""
        lexical = self.search_lexical(query, filters, k) if query.strip() else []
        vbody = self._vector_body(vector, filters, k)
        if vbody is None:
            return lexical, []
        (vec,) = self._run([vbody], "the vector search")
        space = SPACES.get((self.url, self.index), SPACE_TYPE)
        return lexical, self._confirm([[(hit_row(h), similarity_from_score(float(h["_score"]), space))
                                        for h in vec]], filters, k)[0]

    def search_lexical(self, query: str, filters: SearchFilters, k: int) -> list[RankedChunk]:
        """The best row of each of the ``k`` best contents (:mod:`ki.adapters.search.query`): BM25 over the analysed
        streams, rounds of the best rows (:func:`ki.adapters.search.opensearch_index.lexical_body`) under the permission
        filter, each candidate confirmed by the record (:func:`ki.adapters.search.lexical_search.rank_contents`)."""
        parsed = parse_query(query)
        if parsed.empty:
            return []

        def run(node: Node, size: int, tier: int) -> list[LexHit]:
            (hits,) = self._run([lexical_body(node, size)], "the lexical search")
            return lex_hits(hits, tier)

        def any_match(node: Node) -> bool:
            (hits,) = self._run([{"size": 1, **{"stored_fields": "_none_"}, "query": to_dsl(node)}],
                                "the exclusion check")
            return bool(hits)

        report = self.record.filter_report(filters)
        return rank_contents(run, any_match, self.engine, parsed, filters, k, engine_facts=frozenset(report.applied))

    def search_vector(self, vector: np.ndarray, filters: SearchFilters, k: int) -> list[RankedChunk]:
        """Lucene k-NN (cosine) with the permission filter inside ``knn.filter`` (so k permitted rows come
        back); score = cosine similarity. [] when the index holds no vectors.

        Raises: ValueError when ``vector`` does not have the index's dimension.
        """
        return self.search_halves("", vector, filters, k)[1]

    def _confirm(self, halves: list[list[tuple[dict[str, Any], float]]], filters: SearchFilters, k: int
                 ) -> tuple[list[RankedChunk], ...]:
        """Keep each half's candidates the record confirms (see the module docstring), best first, at most
        ``k`` per half, in one query; delete from OpenSearch the rows the record no longer has."""
        hits = [h for half in halves for h in half]
        if not hits:
            return tuple([] for _ in halves)
        with self.engine.connect() as conn:
            visible, dead = confirm(conn, [(int(s["source_object_id"]), int(s["ordinal"])) for s, _ in hits], filters)
        stale = {(hits[i][0]["source_object_id"], hits[i][0]["ordinal"]): hits[i][0] for i in dead}
        if stale:
            self._purge(list(stale.values()))
        out: list[list[RankedChunk]] = []
        i = 0
        for half in halves:
            kept: list[RankedChunk] = []
            for src, score in half:
                if i in visible and len(kept) < k:
                    kept.append(RankedChunk(int(src["source_object_id"]), int(src["ordinal"]),
                                            str(src["content_hash"]), score))
                i += 1
            out.append(kept)
        return tuple(out)

    def _purge(self, rows: list[dict[str, Any]]) -> None:
        """Delete rows the record no longer has (tombstoned objects, surplus rows of an interrupted sync)."""
        from opensearchpy import helpers
        from opensearchpy.exceptions import OpenSearchException

        actions = [{"_op_type": "delete", "_index": index, "_id": f"{r['source_object_id']}-{r['ordinal']}"}
                   for r in rows for index in (self.index, self.large_index)]
        try:
            helpers.bulk(self.client, actions, raise_on_error=False, refresh=False)
        except OpenSearchException:  # a search must not fail for housekeeping; the record hides them anyway
            pass

    def filter_report(self, filters: SearchFilters) -> FilterReport:
        """The record applies matter / type / since to the candidates: its report."""
        return self.record.filter_report(filters)
