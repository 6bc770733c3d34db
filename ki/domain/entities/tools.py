"""``search_entities``: the agent's view of the entities the firm already holds.

Spec: insertion-pipeline.md "Extract metadata" ("Parties are searched by the agent (search_entities)
but resolved by rule"). Each call opens its own short database connection (no transaction is held
across model turns). Result shape::

    {"query": str, "results": [{"entity_id", "name", "kind", "aliases": [normalised names, up to 8], "identifiers":
      [{type, value, issuer}], "matters": int}], "total": int}

Candidates are those the resolution rules would consider (same normalised name, a shared token
run, a shared identifier value), ranked: identical name first, then containment, then the rest.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ki.adapters.agents.loop import Tool
from ki.domain.entities.identifiers import find_identifiers
from ki.domain.entities.names import contained, name_key
from ki.domain.entities.store import load_candidates
from ki.store.db import Database


class SearchEntitiesArgs(BaseModel):
    """A party name as written (optionally with its register number, VAT id or LEI)."""

    query: str = Field(min_length=1, max_length=300)
    limit: int = Field(default=5, ge=1, le=25)


def search_entities_tool(db: Database, project_id: int) -> Tool:
    """The ``search_entities`` tool over the entities of ``project_id``."""

    def run(args: SearchEntitiesArgs) -> dict:
        key = name_key(args.query)
        idents = [f.identifier for f in find_identifiers(args.query)]
        if key.empty and not idents:
            return {"query": args.query, "results": [], "total": 0}
        with db.engine.connect() as conn:
            candidates, _ = load_candidates(conn, project_id, key, idents)
        ranked = sorted(candidates, key=lambda c: (not any(n.key == key.key for n in c.names),
                                                   not any(contained(n, key) for n in c.names), c.entity_id))
        rows = [{"entity_id": c.entity_id, "name": c.name, "kind": c.kind,
                 "aliases": sorted({n.key for n in c.names})[:8],
                 "identifiers": [i.as_dict() for i in c.identifiers], "matters": len(c.matters)}
                for c in ranked[:args.limit]]
        return {"query": args.query, "results": rows, "total": len(ranked)}

    return Tool("search_entities", "Look up entities (companies, law firms, courts, persons) the firm already holds "
                "by a party's name as written; add a register number or VAT id to the query when the document gives "
                "one. Returns ids, names, identifiers and on how many matters each appears. Parties are linked to "
                "entities by rule; name an entity_id only if a result clearly is the party.", SearchEntitiesArgs, run)
