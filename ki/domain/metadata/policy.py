"""The rules reading of one document, and the offline rules policy that submits it through the tools.

Spec: insertion-pipeline.md "Extract metadata" (the offline rules policy "walks the same
tools with keyword and synonym matching"); DESIGN.md "Two deployments". :func:`read_document` is pure:
it reads title, language, date, identifiers, party mentions with their role hints and clause headings
off a ``structured_json`` body. :class:`MetadataRulesPolicy` then types the document by searching the
ontology through ``ontology_search`` (:mod:`ki.domain.metadata.typing_rules`), confirms the node with
``ontology_node``, types clause headings with ``clause_search`` and (``search_parties=True``) looks each
party up with ``search_entities`` — so its answer passes the same validators as a model's. Resolution of
parties to entities happens by rule afterwards in any case (:mod:`ki.domain.metadata.parties`), so the rules
policy skips the per-party lookups by default.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ki.adapters.agents.loop import AgentState, Tool
from ki.core.errors import ToolError
from ki.domain.decisions.locus import headings
from ki.domain.entities.identifiers import ENTITY_TYPES, Identifier, find_identifiers, unique
from ki.domain.entities.mentions import KnownName, Mention, find_mentions
from ki.domain.entities.role_cues import add_role_hints
from ki.domain.metadata.language import detect_language
from ki.domain.metadata.path_dates import dated
from ki.domain.metadata.schema import (
    MAX_IDENTIFIERS,
    MAX_PARTIES,
    MAX_PARTY_IDENTIFIERS,
    NAME_CHARS,
    VALUE_CHARS,
    ClauseOut,
    IdentifierOut,
    MetadataResult,
    PartyOut,
)
from ki.domain.metadata.title import document_title
from ki.domain.metadata.typing_rules import TypingFacts, choose_type, typing_facts
from ki.domain.ontology.tools import CLAUSE_TOOL

#: A clause heading must match a clause node this well (ontology_search score) to count as notable.
CLAUSE_MIN_SCORE = 0.6
MAX_CLAUSES = 40
EXCERPT_CHARS = 400


def mention_text(body: dict[str, Any]) -> str:
    """The text parties are read from: for an e-mail its subject line, then the body (quotes included)."""
    mail = body.get("mail")
    text = body.get("text") or ""
    if mail and mail.get("subject") and not text.lstrip().startswith("Subject:"):
        return f"Subject: {mail['subject']}\n{text}"
    return text


@dataclass
class Reading:
    """What the rules read off one document (before any tool or database is consulted).

    Attributes:
        title / language / doc_date / doc_date_source: the plain facts.
        typing: the facts :func:`~ki.domain.metadata.typing_rules.choose_type` decides on.
        identifiers: every identifier of the document (deduplicated).
        mentions: party mentions with role hints.
        clause_headings: (heading, excerpt of the clause body) for the clause facet.
    """

    title: str
    language: str | None
    doc_date: dt.date | None
    doc_date_source: str | None
    typing: TypingFacts
    identifiers: list[Identifier]
    mentions: list[Mention]
    clause_headings: list[tuple[str, str]] = field(default_factory=list)


def read_document(body: dict[str, Any], rel_path: str, mtime_ns: int | None, *, firm_names: list[str],
                  known: list[KnownName], date_order: str | None = None, mtime_trusted: bool = True) -> Reading:
    """Read a ``structured_json`` body (see :class:`Reading`); ``date_order``: ``firm.date_order``;
    ``mtime_trusted``: whether the mtime may date the document (:func:`ki.domain.metadata.path_dates.dated`). Pure."""
    title = document_title(body, rel_path)
    text = mention_text(body)
    found = find_identifiers(text)
    mentions = find_mentions(text, firm_names=firm_names, known=known, found=found)
    add_role_hints(text, mentions, title=title, mail=body.get("mail"), firm_names=firm_names)
    doc_date, source = dated(body, rel_path, mtime_ns, date_order=date_order, mtime_trusted=mtime_trusted)
    lines = (body.get("text") or "").split("\n")
    clauses = []
    for i, heading in headings(body.get("text") or ""):
        excerpt = " ".join(" ".join(lines[i + 1:i + 4]).split())[:EXCERPT_CHARS]
        clauses.append((heading, excerpt))
    return Reading(title=title, language=detect_language(body.get("text") or ""), doc_date=doc_date,
                   doc_date_source=source, typing=typing_facts(body, rel_path, title),
                   identifiers=unique([f.identifier for f in found]), mentions=mentions,
                   clause_headings=clauses[:MAX_CLAUSES])


def identifier_out(ident: Identifier) -> IdentifierOut:
    """An identifier in the answer's shape (value and issuer cut to the schema's length)."""
    return IdentifierOut(type=ident.type, value=ident.value[:VALUE_CHARS], issuer=(ident.issuer or "")[:VALUE_CHARS]
                         or None)


def best_role(m: Mention) -> str | None:
    """The strongest role the document itself claims for a mention (None: no claim)."""
    from ki.domain.entities.roles import RANKS

    if m.is_firm or m.kind == "law_firm":
        return "advisor"
    if m.kind == "court":
        return "court"
    return max(m.hints, key=lambda h: RANKS.get(h[1], 0))[0] if m.hints else None


class MetadataRulesPolicy:
    """Submits a :class:`Reading` through the tools (see module doc).

    The answer fits :class:`MetadataResult` whatever the document names: parties and
    identifiers beyond the schema's limits are counted in ``parties_omitted`` / ``identifiers_omitted`` (the
    stage records all of the reading's in any case), names and values are cut to the schema's lengths.
    """

    def __init__(self, reading: Reading, *, search_parties: bool = False):
        self.reading = reading
        self.search_parties = search_parties

    def decide(self, tools: Sequence[Tool], state: AgentState) -> MetadataResult:
        names = {t.name for t in tools}
        r = self.reading

        def search(query: str) -> list[dict[str, Any]]:
            try:
                return state.call("ontology_search", query=query[:500], limit=20)["results"]
            except ToolError:
                return []

        def walk(kind: str, node_id: str) -> Any:
            if kind == "children":
                return state.call("ontology_children", node_id=node_id)["children"]
            return state.call("ontology_node", node_id=node_id)["node"]

        node, rule = choose_type(r.typing, search, walk)
        if node is not None:
            state.call("ontology_node", node_id=node)
        parties = []
        for m in r.mentions[:MAX_PARTIES]:
            if self.search_parties and "search_entities" in names:
                state.call("search_entities", query=m.name[:NAME_CHARS], limit=5)
            own = [identifier_out(i) for i in m.identifiers if i.type in ENTITY_TYPES]
            parties.append(PartyOut(name=m.name[:NAME_CHARS], kind=m.kind, role=best_role(m),
                                    identifiers=own[:MAX_PARTY_IDENTIFIERS]))
        clauses = []
        if CLAUSE_TOOL in names:
            for heading, excerpt in r.clause_headings:
                hits = state.call(CLAUSE_TOOL, query=heading[:500], limit=3)["results"]
                if hits and hits[0]["score"] >= CLAUSE_MIN_SCORE:
                    clauses.append(ClauseOut(clause_type=hits[0]["id"], locus=heading[:300], excerpt=excerpt))
        parties_omitted = max(0, len(r.mentions) - MAX_PARTIES)
        identifiers_omitted = max(0, len(r.identifiers) - MAX_IDENTIFIERS)
        return MetadataResult(doc_type=node, language=r.language, doc_date=r.doc_date, title=r.title[:500] or None,
                              parties=parties, parties_omitted=parties_omitted,
                              identifiers=[identifier_out(i) for i in r.identifiers[:MAX_IDENTIFIERS]],
                              identifiers_omitted=identifiers_omitted, notable_clauses=clauses,
                              reasoning=f"rules: type by {rule}"[:2000])
