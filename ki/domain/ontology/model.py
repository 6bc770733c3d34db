"""The document-type ontology: nodes, the active scope, its fingerprint, navigation and search.

Spec: insertion-pipeline.md "Extract metadata" (the agent walks the active document-type
ontology; only a node id inside the active scope is accepted; the fingerprint of the scope
that judged a document is stored with it) and "producer_version semantics"
(``requeue_ontology_outdated`` compares node ids and fingerprints against the scope).

Shape of an ontology JSON (the ``ontology`` object of an estate's ``truth.json`` is one)::

    {"version": "estate-ontology-1",
     "nodes": [{"id": "lease", "parent": "contract",
                "label": {"de": "Mietvertrag", "en": "Lease agreement"},
                "synonyms": {"de": ["Gewerbemietvertrag"], "en": ["commercial lease"]},
                "description": "optional"}],
     "scope": {"include": ["contract"], "exclude": ["term_sheet"]},      # optional
     "facets": {"clause": {"version": "...", "nodes": [... same node shape ...]},      # optional
                "area_of_law": {"nodes": [...]}, "service": {"nodes": [...]}}}       # optional

A node is in scope when it or an ancestor is included (an empty/missing ``include`` includes
everything) and neither it nor an ancestor is excluded. A facet is active when it has nodes: the
clause facet types clauses (Extract metadata, Index); the Area-of-Law facet (``area_of_law``, the
practice areas) and the Service facet (``service``, the kinds of matter — its ``description`` is the
node's definition) let Classify set a matter's practice area and kind (insertion-pipeline.md "Classify").
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ki.core.errors import OntologyError
from ki.domain.ontology.terms import TermMatch, find_term, tokens


class Labels(BaseModel):
    """German and English text of a node (either may be empty); other languages (``nl``, ``fr`` …) are kept
    as extra fields and name the node too."""

    model_config = ConfigDict(extra="allow")

    de: str = ""
    en: str = ""


class Synonyms(BaseModel):
    """German and English synonyms of a node; other languages as extra fields (lists of strings)."""

    model_config = ConfigDict(extra="allow")

    de: list[str] = Field(default_factory=list)
    en: list[str] = Field(default_factory=list)


class OntologyNode(BaseModel):
    """One node: ``id`` unique, ``parent`` None for a root."""

    id: str = Field(min_length=1)
    parent: str | None = None
    label: Labels = Field(default_factory=Labels)
    synonyms: Synonyms = Field(default_factory=Synonyms)
    description: str | None = None

    @field_validator("synonyms", mode="before")
    @classmethod
    def _null_synonyms(cls, value: Any) -> Any:
        return value or {}

    def terms(self) -> list[tuple[str, str]]:
        """Every (language, term) naming the node: labels first, then synonyms."""
        out = [("de", self.label.de), ("en", self.label.en)]
        out += [(lang, str(v)) for lang, v in sorted((self.label.model_extra or {}).items()) if v]
        out += [("de", s) for s in self.synonyms.de] + [("en", s) for s in self.synonyms.en]
        out += [(lang, str(v)) for lang, vs in sorted((self.synonyms.model_extra or {}).items())
                for v in (vs if isinstance(vs, list) else [vs]) if v]
        seen: set[str] = set()
        result = []
        for lang, term in out:
            # "Beschluss / Verfügung": each side of a slash names the node too.
            for part in [term, *([p.strip() for p in term.split("/")] if "/" in term else [])]:
                if part and part not in seen:
                    seen.add(part)
                    result.append((lang, part))
        return result


@dataclass(frozen=True)
class SearchHit:
    """One ranked search result.

    Attributes:
        node: the matching node.
        term: the label or synonym that matched.
        match: where in the query it matched (token start, length, kind).
        score: match strength × term coverage of the query, in (0, 1].
    """

    node: OntologyNode
    term: str
    match: TermMatch
    score: float


@dataclass
class NodeTable:
    """A validated set of nodes with navigation (the type tree, or a facet such as clauses)."""

    nodes: dict[str, OntologyNode]
    children_of: dict[str | None, list[str]] = field(default_factory=dict)
    _term_tokens: dict[str, list[tuple[str, list[str]]]] = field(default_factory=dict)

    @classmethod
    def build(cls, raw_nodes: list[Any], what: str) -> NodeTable:
        """Validate ``raw_nodes``; raises :class:`OntologyError` naming the offending node."""
        nodes: dict[str, OntologyNode] = {}
        for i, raw in enumerate(raw_nodes or []):
            try:
                node = OntologyNode.model_validate(raw)
            except ValidationError as exc:
                raise OntologyError(f"{what} node #{i} is malformed: {exc.errors(include_url=False)[:3]}") from exc
            if node.id in nodes:
                raise OntologyError(f"{what} node id {node.id!r} appears twice")
            nodes[node.id] = node
        children: dict[str | None, list[str]] = {}
        for node in nodes.values():
            if node.parent is not None and node.parent not in nodes:
                raise OntologyError(f"{what} node {node.id!r} names an unknown parent {node.parent!r}")
            children.setdefault(node.parent, []).append(node.id)
        table = cls(nodes=nodes, children_of=children)
        for node_id in nodes:
            table.ancestors(node_id)  # raises on a cycle
        table._term_tokens = {nid: [(t, tokens(t)) for _, t in n.terms()] for nid, n in nodes.items()}
        return table

    def ancestors(self, node_id: str) -> list[str]:
        """Ids root → ``node_id`` (inclusive). Raises KeyError for an unknown id, OntologyError on a cycle."""
        path = [node_id]
        node = self.nodes[node_id]
        while node.parent is not None:
            if node.parent in path:
                raise OntologyError(f"node {node_id!r} is on a parent cycle")
            path.append(node.parent)
            node = self.nodes[node.parent]
        return list(reversed(path))

    def search(self, query: str, visible: set[str]) -> list[SearchHit]:
        """Visible nodes whose label or synonym occurs in ``query`` (or equals it), best first.

        For each node the leftmost, then longest, matching term counts. Ranking: score
        (match strength × share of the query's tokens the term covers, with a floor of 0.5 for
        a whole-term hit), then earlier position, then longer term, then deeper node.
        """
        seq = tokens(query)
        if not seq:
            return []
        hits: list[SearchHit] = []
        for node_id in visible:
            best: SearchHit | None = None
            for term, term_toks in self._term_tokens.get(node_id, []):
                match = find_term(term_toks, seq)
                if match is None:
                    continue
                coverage = match.length / len(seq)
                score = round(match.strength * (0.5 + 0.5 * coverage), 4)
                hit = SearchHit(self.nodes[node_id], term, match, score)
                if best is None or _hit_key(hit, self) < _hit_key(best, self):
                    best = hit
            if best is not None:
                hits.append(best)
        hits.sort(key=lambda h: (-h.score, *_hit_key(h, self)))
        return hits


def _facet(facets: dict[str, Any], name: str) -> NodeTable | None:
    """The facet ``name``'s node table, or None when absent or empty. Raises OntologyError when malformed."""
    facet = facets.get(name) or {}
    if not isinstance(facet, dict):
        raise OntologyError(f"facet {name!r} must be an object with a 'nodes' list")
    nodes = facet.get("nodes") or []
    return NodeTable.build(nodes, name) if nodes else None


def _hit_key(hit: SearchHit, table: NodeTable) -> tuple:
    return (hit.match.start, -hit.match.length, -hit.match.strength, -len(table.ancestors(hit.node.id)),
            hit.node.id)


@dataclass
class Ontology:
    """A loaded ontology with its active scope.

    Attributes:
        version: the document's ``version`` string.
        types: the document-type tree.
        clauses: the clause facet (None when inactive).
        areas: the Area-of-Law facet, the practice areas (None when inactive).
        services: the Service facet, the kinds of matter (None when inactive).
        include / exclude: the scope roots (see module doc).
        source: where it came from (``package:…`` or a file path).
    """

    version: str
    types: NodeTable
    clauses: NodeTable | None = None
    areas: NodeTable | None = None
    services: NodeTable | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    source: str = ""
    _visible: set[str] = field(default_factory=set)
    _fingerprint: str = ""

    @classmethod
    def from_document(cls, doc: dict[str, Any], *, source: str = "") -> Ontology:
        """Build from a parsed JSON object (an ontology, or a ``truth.json`` holding one under ``ontology``).

        Raises:
            OntologyError: no nodes, malformed nodes, unknown scope ids.
        """
        if not isinstance(doc, dict):
            raise OntologyError("an ontology must be a JSON object with a 'nodes' list")
        if "nodes" not in doc and isinstance(doc.get("ontology"), dict):
            doc = doc["ontology"]
        if not isinstance(doc.get("nodes"), list) or not doc["nodes"]:
            raise OntologyError("the ontology has no 'nodes' list")
        types = NodeTable.build(doc["nodes"], "type")
        facets = doc.get("facets") or {}
        if not isinstance(facets, dict):
            raise OntologyError("'facets' must be an object of facets ({\"clause\": {\"nodes\": [...]}, ...})")
        clauses, areas, services = (_facet(facets, name) for name in ("clause", "area_of_law", "service"))
        scope = doc.get("scope") or {}
        include = tuple(scope.get("include") or ())
        exclude = tuple(scope.get("exclude") or ())
        for node_id in (*include, *exclude):
            if node_id not in types.nodes:
                raise OntologyError(f"the scope names an unknown node {node_id!r}")
        onto = cls(version=str(doc.get("version") or "unversioned"), types=types, clauses=clauses, areas=areas,
                   services=services, include=include, exclude=exclude, source=source)
        onto._visible = {nid for nid in types.nodes if onto._in_scope(nid)}
        onto._fingerprint = onto._compute_fingerprint()
        return onto

    def _in_scope(self, node_id: str) -> bool:
        path = self.types.ancestors(node_id)
        if self.include and not any(a in self.include for a in path):
            return False
        return not any(a in self.exclude for a in path)

    def _compute_fingerprint(self) -> str:
        visible = sorted(self._visible)
        canon = [self.types.nodes[nid].model_dump(mode="json", exclude={"description"}) for nid in visible]
        raw = json.dumps({"version": self.version, "nodes": canon}, ensure_ascii=False, sort_keys=True,
                         separators=(",", ":"))
        return "sha256:" + hashlib.sha256(raw.encode("utf-8")).hexdigest()[:32]

    # --- scope ------------------------------------------------------------------------------------

    @property
    def fingerprint(self) -> str:
        """Stable fingerprint of the active scope: ``sha256:<32 hex>`` over version + visible nodes.

        Unchanged by key order, node order or descriptions; changed by any label, synonym,
        parent or scope change.
        """
        return self._fingerprint

    @property
    def visible_ids(self) -> frozenset[str]:
        """Ids of the nodes in the active scope."""
        return frozenset(self._visible)

    def in_scope(self, node_id: str | None) -> bool:
        """Whether ``node_id`` is a node inside the active scope."""
        return node_id is not None and node_id in self._visible

    @property
    def clause_facet_active(self) -> bool:
        """Whether notable clauses are typed (the clause facet has nodes)."""
        return self.clauses is not None and bool(self.clauses.nodes)

    # --- navigation (what the tools return) -------------------------------------------------------

    def node_view(self, node_id: str, table: NodeTable | None = None) -> dict[str, Any]:
        """``{id, label: {de, en}, synonyms: {de, en}, parent, path: [root … id], has_children, description}``."""
        table = table or self.types
        node = table.nodes[node_id]
        kids = table.children_of.get(node_id, [])
        if table is self.types:
            kids = [k for k in kids if k in self._visible]
        view = {"id": node.id, "label": node.label.model_dump(), "synonyms": node.synonyms.model_dump(),
                "parent": node.parent, "path": table.ancestors(node_id), "has_children": bool(kids)}
        if node.description:
            view["description"] = node.description
        return view

    def roots(self) -> list[str]:
        """Visible nodes whose parent is not visible (the tops of the scope), in document order."""
        return [nid for nid in self.types.nodes if nid in self._visible
                and (self.types.nodes[nid].parent is None or self.types.nodes[nid].parent not in self._visible)]

    def children(self, node_id: str) -> list[str]:
        """Visible children of ``node_id`` in document order (KeyError for an unknown id)."""
        if node_id not in self.types.nodes:
            raise KeyError(node_id)
        return [c for c in self.types.children_of.get(node_id, []) if c in self._visible]

    def ancestors(self, node_id: str) -> list[str]:
        """Ids root → node (the stored ``doc_type_ancestors``)."""
        return self.types.ancestors(node_id)

    def search(self, query: str) -> list[SearchHit]:
        """Visible type nodes matching ``query``, best first (see :meth:`NodeTable.search`)."""
        return self.types.search(query, self._visible)

    def search_clauses(self, query: str) -> list[SearchHit]:
        """Clause-facet nodes matching ``query``; empty when the facet is inactive."""
        if not self.clause_facet_active:
            return []
        assert self.clauses is not None
        return self.clauses.search(query, set(self.clauses.nodes))

    @property
    def area_facet_active(self) -> bool:
        """Whether Classify sets a matter's practice area (the Area-of-Law facet has nodes)."""
        return self.areas is not None and bool(self.areas.nodes)

    @property
    def service_facet_active(self) -> bool:
        """Whether Classify sets a matter's kind (the Service facet has nodes)."""
        return self.services is not None and bool(self.services.nodes)
