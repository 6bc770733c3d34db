"""The extract_metadata answer (``submit_result`` schema) and its validators.

Spec: insertion-pipeline.md "Extract metadata": the agent "may only submit a type node id that
appeared in a tool result and is inside the active scope; when the clause facet is active, notable
clauses are typed the same way through clause_search"; parties are searched with ``search_entities``
(an entity id the agent names must come from that tool). The same validators judge the model
(:func:`ki.adapters.agents.loop.chat_agent`) and the rules policy (:func:`ki.adapters.agents.loop.run_policy`).
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, Field

from ki.adapters.agents.loop import AgentState
from ki.domain.ontology.model import Ontology
from ki.domain.ontology.tools import CLAUSE_TOOL, TYPE_TOOLS

IdentifierType = Literal["register_number", "vat_id", "lei", "matter_reference", "case_number", "invoice_number",
                         "external_reference"]
PartyKind = Literal["company", "law_firm", "person", "court"]
Role = Literal["client", "counterparty", "advisor", "court", "other"]

#: Limits of one answer. A document can name more (a shareholder list, a mass claim; ki's own limit is never
#: the file's fault):
#: the rules policy lists the first ones and counts the rest in ``parties_omitted`` / ``identifiers_omitted``;
#: the stage records every party and identifier of the rules reading in any case.
MAX_PARTIES = 100
MAX_IDENTIFIERS = 200
MAX_PARTY_IDENTIFIERS = 20
NAME_CHARS = 300
VALUE_CHARS = 200
TITLE_CHARS = 500
REASONING_CHARS = 2000


class IdentifierOut(BaseModel):
    """A typed identifier as written (``issuer``: the register court, registry or court)."""

    type: IdentifierType
    value: str = Field(min_length=1, max_length=VALUE_CHARS)
    issuer: str | None = Field(default=None, max_length=VALUE_CHARS)


class PartyOut(BaseModel):
    """A party the document names: legal parties, law firms (ours and opposing), the court of the
    proceedings — not people who merely sign or act for a party."""

    name: str = Field(min_length=1, max_length=NAME_CHARS, description="as written (first occurrence)")
    kind: PartyKind
    role: Role | None = Field(default=None, description="what the document says about the party's side")
    identifiers: list[IdentifierOut] = Field(default_factory=list, max_length=MAX_PARTY_IDENTIFIERS)
    entity_id: int | None = Field(default=None, description="an entity_id search_entities returned, if it is one")


class ClauseOut(BaseModel):
    """A notable clause typed against the clause facet."""

    clause_type: str = Field(description="a clause node id clause_search returned")
    locus: str | None = Field(default=None, max_length=300)
    excerpt: str = Field(default="", max_length=1000)


class MetadataResult(BaseModel):
    """What extract_metadata submits for one document version."""

    doc_type: str | None = Field(default=None, description="a type node id an ontology tool returned, or null")
    language: Literal["de", "en"] | None = None
    doc_date: dt.date | None = Field(default=None, description="the date the document states for itself")
    title: str | None = Field(default=None, max_length=TITLE_CHARS)
    parties: list[PartyOut] = Field(default_factory=list, max_length=MAX_PARTIES)
    parties_omitted: int = Field(default=0, ge=0, description="parties left out beyond the limit (else 0)")
    identifiers: list[IdentifierOut] = Field(default_factory=list, max_length=MAX_IDENTIFIERS)
    identifiers_omitted: int = Field(default=0, ge=0, description="identifiers left out beyond the limit (else 0)")
    notable_clauses: list[ClauseOut] = Field(default_factory=list, max_length=100)
    reasoning: str = Field(default="", max_length=REASONING_CHARS)


def make_validators(onto: Ontology):
    """Validators for answers judged against ``onto`` (its active scope and clause facet)."""

    def doc_type_visited_and_in_scope(result: MetadataResult, state: AgentState) -> str | None:
        node = result.doc_type
        if node is None:
            return None
        seen = any(state.appeared(node, key="id", tool=t) for t in TYPE_TOOLS)
        if not seen:
            return (f"doc_type {node!r} did not appear in any ontology tool result; find it with ontology_search or "
                    "ontology_children and submit an id exactly as returned (or null when no type fits)")
        if not onto.in_scope(node):
            return f"doc_type {node!r} is outside the active ontology scope; choose an in-scope node or null"
        return None

    def clauses_visited(result: MetadataResult, state: AgentState) -> str | None:
        if result.notable_clauses and not onto.clause_facet_active:
            return "the clause facet is not active: submit notable_clauses as an empty list"
        unknown = sorted({c.clause_type for c in result.notable_clauses
                          if not state.appeared(c.clause_type, key="id", tool=CLAUSE_TOOL)})
        if unknown:
            return f"clause types {unknown} did not appear in a clause_search result; use ids clause_search returns"
        return None

    def entity_ids_searched(result: MetadataResult, state: AgentState) -> str | None:
        unknown = sorted({p.entity_id for p in result.parties if p.entity_id is not None
                          and not state.appeared(p.entity_id, key="entity_id", tool="search_entities")})
        if unknown:
            return f"entity ids {unknown} did not come from search_entities; search first or leave entity_id null"
        return None

    return [doc_type_visited_and_in_scope, clauses_visited, entity_ids_searched]
