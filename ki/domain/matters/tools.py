"""Classify's tools: ``search_matters``, ``peek_matter``, ``list_folder``, ``create_matter``; the validators of
its answer (:class:`~ki.domain.matters.schema.ClassifyResult`).

Spec: insertion-pipeline.md "Classify: what the model is given" (tools, descriptions, the rule
that a full page with ``has_more`` is not grounds for a new matter) and the result validator
("a submitted matter_id appeared in a tool result (never invented), a practice-area node is on
the offered menu, and a matter-kind node was actually visited and is in the active facet").
Every tool opens its own short database session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ki.adapters.agents.loop import AgentState, Tool
from ki.core.errors import ToolError
from ki.domain.matters.facets import facet_validators
from ki.domain.matters.references import is_placeholder
from ki.domain.matters.schema import ClassifyResult, CreateMatterArgs, ListFolderArgs, PeekMatterArgs, SearchMattersArgs
from ki.store.db import Database
from ki.store.matters import get_matter, get_or_create_matter, peek_matter, search_matters

SEARCH_DESCRIPTION = (
    "Rank the firm's existing matters for a query: reference-number match, title words, and the text of documents "
    "already filed on each matter — by its words, and by meaning when the index holds vectors (a description of "
    "the subject finds a matter whose files say it in other words). Returns {results: [{matter_id, reference, "
    "title, score, why, similarity}], page: {offset, limit, total, has_more}}; the whole ranking is computed before "
    "the page is cut, so page.total is exact and "
    "offset walks the same ranking. A full page with has_more is NOT grounds for creating a new matter: page on "
    "or refine the query — creating a second matter for one case splits its files in two."
)
PEEK_DESCRIPTION = (
    "One matter: its references (reference number, court case numbers), title, practice area, kind, folders, "
    "document_count (the true number of files on it) and a sample of document titles "
    "(document_titles_are_sample says whether more exist)."
)
LIST_DESCRIPTION = ("The file's folder neighbourhood again: its folder in full, two levels up (other subfolders "
                    "name-only with file counts) and two levels down; files show the matter they are on.")
CREATE_DESCRIPTION = (
    "Get or create the matter with this reference number (committed at once, so other files of the same matter "
    "find it immediately). Use it only for a reference the file itself names that no existing matter has; "
    "never for a guess, and never because a search page was full."
)


def classify_tools(db: Database, *, project_id: int, neighbourhood: Callable[[], dict[str, Any]],
                   embed_query: Callable[[str], Sequence[float]] | None = None) -> list[Tool]:
    """The four Classify tools bound to one project and one file's neighbourhood (built on first use).

    ``embed_query`` embeds a ``search_matters`` query with the model the index records (None: the index holds no
    vectors, and the search ranks by reference, title and full text only). Its errors (a gateway embedder's
    classified errors) end the run like any other infrastructure fault.
    """

    def _search(args: SearchMattersArgs) -> dict[str, Any]:
        vector = embed_query(args.query) if embed_query is not None and args.query.strip() else None
        with db.engine.connect() as conn:
            return search_matters(conn, project_id=project_id, query=args.query, limit=args.limit,
                                  offset=args.offset, query_vector=vector)

    def _peek(args: PeekMatterArgs) -> dict[str, Any]:
        with db.engine.connect() as conn:
            found = peek_matter(conn, args.matter_id)
        if found is None:
            raise ToolError(f"no matter with id {args.matter_id}; use search_matters to find ids")
        return found

    def _list(_args: ListFolderArgs) -> dict[str, Any]:
        hood = neighbourhood()
        return {k: hood[k] for k in ("file", "folder", "above", "own", "below")}

    def _create(args: CreateMatterArgs) -> dict[str, Any]:
        if is_placeholder(args.reference_number):
            raise ToolError("UNASSIGNED-… references are placeholders the stage assigns itself; submit null instead")
        matter, created = get_or_create_matter(db, project_id=project_id, reference=args.reference_number,
                                               title=args.title)
        return {"matter_id": matter.id, "reference": matter.reference, "title": matter.title, "created": created}

    return [
        Tool("search_matters", SEARCH_DESCRIPTION, SearchMattersArgs, _search),
        Tool("peek_matter", PEEK_DESCRIPTION, PeekMatterArgs, _peek),
        Tool("list_folder", LIST_DESCRIPTION, ListFolderArgs, _list),
        Tool("create_matter", CREATE_DESCRIPTION, CreateMatterArgs, _create),
    ]


def classify_validators(db: Database, *, practice_areas: Sequence[str] | None = None,
                        matter_kinds: Sequence[str] | None = None) -> list[Any]:
    """The result validators: the matter id came from a tool and exists; the facet values
    (:func:`ki.domain.matters.facets.facet_validators`: ``practice_areas`` / ``matter_kinds`` are the active facets'
    ids, None while inactive)."""

    def matter_id_came_from_a_tool(result: ClassifyResult, state: AgentState) -> str | None:
        """Reject an id no tool returned (or one that no longer exists)."""
        if result.matter_id is None:
            return None
        if not state.appeared(result.matter_id, key="matter_id"):
            return (f"matter_id {result.matter_id} did not appear in any tool result; ids are never invented — "
                    "use search_matters (or create_matter for a reference the file names) and submit an id it "
                    "returned, or null")
        with db.engine.connect() as conn:
            if get_matter(conn, result.matter_id) is None:
                return f"matter {result.matter_id} no longer exists; search again"
        return None

    return [matter_id_came_from_a_tool, *facet_validators(practice_areas, matter_kinds)]
