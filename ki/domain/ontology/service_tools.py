"""The ``service_*`` tools Classify offers while the ontology's Service facet is active.

Spec: insertion-pipeline.md "Classify: what the model is given" ("service_* tools (when the Service facet is
active): search/browse/verify service nodes by definition for the matter kind") and its result validator ("a
matter-kind node was actually visited and is in the active facet": :func:`visited_service`).

Result shapes (JSON), ``NodeSummary`` / ``Hit`` as in :mod:`ki.domain.ontology.tools` plus ``definition`` (the node's
``description``, or null):

* ``service_search(query, limit)`` → ``{"query", "results": [Hit], "total"}``
* ``service_browse(node_id=null)`` → ``{"node_id", "children": [NodeSummary]}`` (null: the facet's roots)
* ``service_verify(node_id)`` → ``{"node": NodeView, "definition", "children": [ids], "valid": true}``

An id the facet does not hold raises :class:`ToolError` naming the tools that find ids.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ki.adapters.agents.loop import AgentState, Tool
from ki.core.errors import ToolError
from ki.domain.ontology.model import NodeTable, Ontology
from ki.domain.ontology.tools import NodeArgs, SearchArgs, hit_rows, node_summary

SERVICE_TOOLS = ("service_search", "service_browse", "service_verify")


class BrowseArgs(BaseModel):
    """A service node whose children to list; null for the facet's roots."""

    node_id: str | None = Field(default=None, description="a service node id a tool returned; null for the roots")


def _definition(table: NodeTable, node_id: str) -> str | None:
    return table.nodes[node_id].description


def _known(table: NodeTable, node_id: str) -> None:
    if node_id not in table.nodes:
        raise ToolError(f"there is no service node {node_id!r} in the active Service facet; use service_search or "
                        "service_browse to find ids")


def service_tools(onto: Ontology) -> list[Tool]:
    """The three tools over ``onto``'s Service facet; [] when the facet is inactive."""
    if not onto.service_facet_active:
        return []
    table = onto.services
    assert table is not None

    def row(node_id: str) -> dict[str, Any]:
        return {**node_summary(onto, node_id, table), "definition": _definition(table, node_id)}

    def search(args: SearchArgs) -> dict[str, Any]:
        hits = table.search(args.query, set(table.nodes))
        rows = hit_rows(onto, hits, args.limit, table)
        for r in rows:
            r["definition"] = _definition(table, r["id"])
        return {"query": args.query, "results": rows, "total": len(hits)}

    def browse(args: BrowseArgs) -> dict[str, Any]:
        if args.node_id is not None:
            _known(table, args.node_id)
        return {"node_id": args.node_id, "children": [row(c) for c in table.children_of.get(args.node_id, [])]}

    def verify(args: NodeArgs) -> dict[str, Any]:
        _known(table, args.node_id)
        return {"node": onto.node_view(args.node_id, table), "definition": _definition(table, args.node_id),
                "children": list(table.children_of.get(args.node_id, [])), "valid": True}

    return [
        Tool("service_search", "Find kinds of matter (services: litigation, lease, share deal, ...) whose label or "
             "synonym occurs in the query, e.g. the matter's title or the folder name. Results carry each kind's "
             "definition.", SearchArgs, search),
        Tool("service_browse", "The kinds of matter directly below a node of the Service facet (null: its top "
             "level), each with its definition.", BrowseArgs, browse),
        Tool("service_verify", "One kind of matter in full: labels, synonyms, definition, path and children. "
             "Read the definition before submitting it as matter_kind.", NodeArgs, verify),
    ]


def visited_service(state: AgentState, node_id: str) -> bool:
    """Whether ``node_id`` appeared as a node id in a result of one of the ``service_*`` tools."""
    return any(state.appeared(node_id, key="id", tool=t) for t in SERVICE_TOOLS)
