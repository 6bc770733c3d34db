"""The ontology navigation tools the extract_metadata agent (and its rules policy) call.

Spec: insertion-pipeline.md "Extract metadata": "An agent walks the active document-type
ontology with navigation tools (ontology_roots / ontology_children / ontology_node /
ontology_search) and may only submit a type node id that appeared in a tool result and is inside
the active scope; when the clause facet is active, notable clauses are typed the same way through
clause_search." Every tool only ever returns in-scope type nodes, so "appeared in a tool result"
and "inside the scope" are checked against the same source.

Result shapes (JSON):

* ``ontology_roots()`` → ``{"nodes": [NodeSummary]}``
* ``ontology_children(node_id)`` → ``{"node_id", "children": [NodeSummary]}``
* ``ontology_node(node_id)`` → ``{"node": NodeView, "children": [ids]}``
* ``ontology_search(query, limit)`` → ``{"query", "results": [Hit], "total"}``
* ``clause_search(query, limit)`` → ``{"query", "results": [Hit], "total"}`` (clause nodes)

``NodeSummary = {id, label: {de, en}, path: [root…id], has_children}``;
``Hit = NodeSummary + {term, match: {start, length, kind}, score}`` (``start`` is the token
position of the matched term in the query). Unknown or out-of-scope ids raise :class:`ToolError`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ki.adapters.agents.loop import Tool
from ki.core.errors import ToolError
from ki.domain.ontology.model import NodeTable, Ontology, SearchHit

TYPE_TOOLS = ("ontology_roots", "ontology_children", "ontology_node", "ontology_search")
CLAUSE_TOOL = "clause_search"


class NoArgs(BaseModel):
    """No arguments."""


class NodeArgs(BaseModel):
    """A node id taken from an earlier tool result."""

    node_id: str = Field(min_length=1, description="a node id exactly as a tool returned it")


class SearchArgs(BaseModel):
    """A search query."""

    query: str = Field(min_length=1, max_length=500,
                       description="words to look for in labels and synonyms (German or English), or a title")
    limit: int = Field(default=10, ge=1, le=50)


def node_summary(onto: Ontology, node_id: str, table: NodeTable | None = None) -> dict[str, Any]:
    """``NodeSummary`` of a node of ``table`` (the type tree when None)."""
    view = onto.node_view(node_id, table)
    return {"id": view["id"], "label": view["label"], "path": view["path"], "has_children": view["has_children"]}


def hit_rows(onto: Ontology, hits: list[SearchHit], limit: int, table: NodeTable | None = None) -> list[dict]:
    """The first ``limit`` hits as ``Hit`` rows (nodes of ``table``, the type tree when None)."""
    out = []
    for hit in hits[:limit]:
        row = node_summary(onto, hit.node.id, table)
        row.update({"term": hit.term, "score": hit.score,
                    "match": {"start": hit.match.start, "length": hit.match.length, "kind": hit.match.kind}})
        out.append(row)
    return out


def _visible(onto: Ontology, node_id: str) -> None:
    if node_id not in onto.types.nodes:
        raise ToolError(f"there is no ontology node {node_id!r}; use ontology_roots or ontology_search to find ids")
    if not onto.in_scope(node_id):
        raise ToolError(f"node {node_id!r} is outside the active ontology scope; it cannot be used")


def ontology_tools(onto: Ontology) -> list[Tool]:
    """The navigation tools over ``onto`` (plus ``clause_search`` when the clause facet is active)."""

    def roots(_: NoArgs) -> dict:
        return {"nodes": [node_summary(onto, nid) for nid in onto.roots()]}

    def children(args: NodeArgs) -> dict:
        _visible(onto, args.node_id)
        return {"node_id": args.node_id, "children": [node_summary(onto, c) for c in onto.children(args.node_id)]}

    def node(args: NodeArgs) -> dict:
        _visible(onto, args.node_id)
        return {"node": onto.node_view(args.node_id), "children": onto.children(args.node_id)}

    def search(args: SearchArgs) -> dict:
        hits = onto.search(args.query)
        return {"query": args.query, "results": hit_rows(onto, hits, args.limit), "total": len(hits)}

    tools = [
        Tool("ontology_roots", "The top-level document-type families of the active ontology (ids, German and "
             "English labels). Start here or with ontology_search.", NoArgs, roots),
        Tool("ontology_children", "The document types directly below a node (ids, labels, whether they have "
             "children of their own).", NodeArgs, children),
        Tool("ontology_node", "One node in full: labels, synonyms, description, its path from the root and its "
             "children.", NodeArgs, node),
        Tool("ontology_search", "Find document types whose label or synonym occurs in the query (German or "
             "English; a document title works). Results are ranked; match.start is the word position of the hit "
             "in the query.", SearchArgs, search),
    ]
    if onto.clause_facet_active:
        table = onto.clauses

        def clause_search(args: SearchArgs) -> dict:
            hits = onto.search_clauses(args.query)
            return {"query": args.query, "results": hit_rows(onto, hits, args.limit, table), "total": len(hits)}

        tools.append(Tool(CLAUSE_TOOL, "Find clause types (termination, liability, governing law, ...) whose label "
                          "or synonym occurs in the query, e.g. a clause heading.", SearchArgs, clause_search))
    return tools
