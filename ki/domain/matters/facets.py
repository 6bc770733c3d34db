"""A matter's practice area and kind from the ontology's Area-of-Law and Service facets.

Spec: insertion-pipeline.md "Classify (classify_matter)" ("When the Area-of-Law or Service facets are active it
also sets the matter's practice area and kind (first valid value wins; matters imported from practice
management stay authoritative)") and "Classify: what the model is given" (the ``service_*`` tools; the result
validator: "a practice-area node is on the offered menu, and a matter-kind node was actually visited and is in
the active facet"). The model picks from the menu and walks the Service facet with the tools; the rules do the
same through the same tools (:func:`rule_facets`), and the same validators judge both. The stage writes the
values with :func:`ki.store.matters.note_matter_kind` (empty fields of a matter found by Classify only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ki.adapters.agents.loop import AgentState
from ki.core.errors import ToolError
from ki.domain.ontology.model import Ontology
from ki.domain.ontology.service_tools import visited_service


def practice_area_menu(onto: Ontology | None) -> list[dict[str, Any]] | None:
    """The offered menu of practice areas: ``[{id, label: {de, en, …}, path}]`` in facet order; None while the
    Area-of-Law facet is inactive."""
    if onto is None or not onto.area_facet_active:
        return None
    table = onto.areas
    assert table is not None
    return [{"id": nid, "label": table.nodes[nid].label.model_dump(), "path": table.ancestors(nid)}
            for nid in table.nodes]


def matter_kind_ids(onto: Ontology | None) -> list[str] | None:
    """The Service facet's node ids; None while it is inactive."""
    if onto is None or not onto.service_facet_active:
        return None
    assert onto.services is not None
    return list(onto.services.nodes)


def evidence_texts(*, matter_title: str | None, rel_path: str) -> list[str]:
    """What the rules read, in order (the first text naming a node decides): the matter's title, the file's
    folders (nearest the root first, as one path), the file's name."""
    folders, _, name = rel_path.rpartition("/")
    return [t for t in (matter_title, folders.replace("/", " / "), name) if t and t.strip()]


def rule_facets(onto: Ontology | None, state: AgentState, texts: Sequence[str]) -> tuple[str | None, str | None]:
    """(practice_area, matter_kind) by rule: for each facet, the best node whose label or synonym occurs in the
    first of ``texts`` that names one (:meth:`ki.domain.ontology.model.NodeTable.search` ranking). The matter kind is
    found through ``service_search`` (so the validator sees it visited, as for the model).

    Returns: a node id of each active facet, or None (inactive, or no text names a node).
    """
    area = kind = None
    if onto is not None and onto.area_facet_active:
        assert onto.areas is not None
        every = set(onto.areas.nodes)
        area = next((hits[0].node.id for t in texts if (hits := onto.areas.search(t, every))), None)
    if onto is not None and onto.service_facet_active and "service_search" in state.tools:
        for t in texts:
            try:
                found = state.call("service_search", query=t[:500], limit=1)
            except ToolError:  # nothing searchable in the text (the arguments were refused)
                continue
            if found["results"]:
                kind = found["results"][0]["id"]
                break
    return area, kind


def facet_validators(practice_areas: Sequence[str] | None, matter_kinds: Sequence[str] | None) -> list[Any]:
    """The two facet checks of the result validator (:class:`~ki.domain.matters.schema.ClassifyResult`); None menus:
    the facet is inactive, so a value is refused."""

    def practice_area_on_menu(result: Any, state: AgentState) -> str | None:
        """Reject a practice area off the offered menu (or any, when the facet is off)."""
        if result.practice_area is None:
            return None
        if not practice_areas:
            return "the Area-of-Law facet is not active: leave practice_area null"
        if result.practice_area not in practice_areas:
            return (f"practice_area must be the id of one of the offered practice_areas {list(practice_areas)}, "
                    f"not {result.practice_area!r}")
        return None

    def matter_kind_visited(result: Any, state: AgentState) -> str | None:
        """Reject a matter kind outside the active Service facet or not returned by a ``service_*`` tool."""
        if result.matter_kind is None:
            return None
        if not matter_kinds:
            return "the Service facet is not active: leave matter_kind null"
        if result.matter_kind not in matter_kinds:
            return (f"matter_kind {result.matter_kind!r} is not a node of the Service facet; find one with "
                    "service_search or service_browse")
        if not visited_service(state, result.matter_kind):
            return (f"matter_kind {result.matter_kind!r} was not returned by service_search, service_browse or "
                    "service_verify in this run; visit it (service_verify) before submitting it")
        return None

    return [practice_area_on_menu, matter_kind_visited]
