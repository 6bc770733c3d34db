"""The clause-type filter of a search, resolved before the backends see it (a party's name is resolved by the
callers, above this layer: :func:`ki.domain.entities.store.entities_named_by`).

Spec: insertion-pipeline.md "Index" (clause rows; the profile row of the latest final version), "Extract
metadata" (parties resolved by rule through the entity ledger and its aliases). ``--clause-type NODE`` names a
node of the ontology's clause facet and matches it and its descendants; ``--party NAME`` matches documents whose
parties resolved to an entity that NAME names — its canonical name or any alias on its ledger, compared as the
resolver compares names (:func:`ki.domain.entities.names.name_key`: legal form and case aside), or a name whose words
all occur in one of them ("Thalbach" names "Thalbach Immobilien GmbH & Co. KG").
"""

from __future__ import annotations

from typing import Any


def clause_types_under(config: Any, node: str) -> tuple[str, ...]:
    """``node`` and every clause-facet node below it (ids, ``node`` first).

    Raises: ValueError when the clause facet is inactive or has no node ``node`` (the message lists a few).
    """
    from ki.domain.ontology.load import active_ontology

    onto = active_ontology(config)
    table = onto.clauses if onto.clause_facet_active else None
    if table is None:
        raise ValueError("--clause-type: the ontology has no clause facet, so no clause is typed")
    if node not in table.nodes:
        known = ", ".join(sorted(table.nodes)[:12])
        raise ValueError(f"--clause-type: {node!r} is not a clause type of the ontology (known: {known}, …)")
    out, stack = [node], list(table.children_of.get(node, []))
    while stack:
        child = stack.pop(0)
        out.append(child)
        stack.extend(table.children_of.get(child, []))
    return tuple(out)
