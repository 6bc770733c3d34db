"""The Classify rules policy: a matter from the references the firm knows, client numbers, the thread, case
numbers, the folder, client names, and the firm's reference formats.

DESIGN.md "Two deployments"; spec: insertion-pipeline.md "Classify" and "Agentic stages"; imported matters and
firm-configurable reference formats. The evidence comes from :func:`ki.domain.matters.evidence.infer_reference`
(order-independent: it reads converted text and the imported matters, never other files' classification); the
decision goes through the same tools as the model (``search_matters`` to find the matter's id, ``create_matter`` for
a reference no matter has yet) and is judged by the same validators. No evidence → ``matter_id = null`` (the stage
then falls back to the reference-number scan and the ``UNASSIGNED-<slug>`` placeholder). With the ontology's
Area-of-Law / Service facets active, the practice area and kind by rule (:mod:`ki.domain.matters.facets`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ki.adapters.agents.loop import AgentState, Tool
from ki.config.reference_patterns import ReferenceFormats, formats_for
from ki.domain.matters.evidence import Corpus, Evidence, Knowledge, infer_reference
from ki.domain.matters.facets import evidence_texts, rule_facets
from ki.domain.matters.references import KnownReferences, title_from_folder
from ki.domain.matters.schema import EVIDENCE_CHARS, TITLE_CHARS, ClassifyResult
from ki.domain.ontology.model import Ontology

#: Confidence the rules give each kind of evidence (the stage abstains below its threshold).
CONFIDENCE = {"content_label": 0.95, "path": 0.95, "content": 0.85, "client_number": 0.85, "thread": 0.8,
              "case_number": 0.8, "folder": 0.75, "client_name": 0.7, "party": 0.6}


@dataclass
class ClassifyRulesPolicy:
    """Decide one file's matter from its own evidence.

    Args:
        rel_path: path relative to the source root.
        text: converted text (an attachment's text followed by its container's).
        mail: mail headers (an attachment: its container's), or None.
        corpus: evidence queries over the project's converted files.
        firm_names: the firm's own names (``firm.name`` and ``firm.aliases``), never a client.
        formats: the firm's reference formats (``firm.matter_reference_patterns``; None: the defaults).
        known: the imported matters (None: none imported).
        ontology: the active ontology; while its Area-of-Law / Service facets are active the answer carries the
            practice area and matter kind the matter's title, the file's folders or its name name
            (:func:`ki.domain.matters.facets.rule_facets`, the kind found through ``service_search``).
    """

    rel_path: str
    text: str
    mail: dict[str, Any] | None
    corpus: Corpus
    firm_names: Sequence[str] = ()
    formats: ReferenceFormats | None = None
    known: KnownReferences | None = None
    ontology: Ontology | None = None
    evidence: Evidence | None = field(default=None, init=False)
    scanned: bool = field(default=False, init=False)

    def decide(self, tools: Sequence[Tool], state: AgentState) -> ClassifyResult:
        """One round: find the evidence once, then resolve its reference to a matter id through the tools."""
        if not self.scanned:
            self.evidence = infer_reference(self.rel_path, self.text, self.mail, self.corpus,
                                            firm_names=self.firm_names, formats=self.formats, known=self.known)
            self.scanned = True
        ev = self.evidence
        if ev is None:
            area, kind = rule_facets(self.ontology, state, evidence_texts(matter_title=None, rel_path=self.rel_path))
            return ClassifyResult(matter_id=None, confidence=0.0, evidence="no reference, thread, case number, "
                                  "folder consensus or party points to a matter", practice_area=area,
                                  matter_kind=kind)
        found = state.call("search_matters", query=ev.reference, limit=8, offset=0)
        hit = next((r for r in found["results"] if r["reference"] == ev.reference), None)
        if hit is None:
            folder = ev.detail if ev.how in ("path", "folder") else None
            hit = state.call("create_matter", reference_number=ev.reference,
                             title=_fit(title_from_folder(folder, ev.reference), TITLE_CHARS))
        area, kind = rule_facets(self.ontology, state, evidence_texts(matter_title=hit.get("title"),
                                                                      rel_path=self.rel_path))
        detail = f" ({ev.detail})" if ev.detail else ""
        return ClassifyResult(matter_id=hit["matter_id"], confidence=CONFIDENCE.get(ev.how, 0.5),
                              evidence=_fit(f"{ev.how}: {ev.reference}{detail}", EVIDENCE_CHARS),
                              practice_area=area, matter_kind=kind)


def _fit(value: str, limit: int) -> str:
    """``value`` within ``limit`` characters (cut with ``…``): a folder path has no length limit, the schema has."""
    return value if len(value) <= limit else value[:limit - 1] + "…"


def classify_knowledge(conn: Any, project_id: int, patterns: Sequence[str] | None) -> Knowledge:
    """The firm's reference formats (``firm.matter_reference_patterns``; empty: the defaults) and the project's
    imported matters, for :class:`ClassifyRulesPolicy` and the stage's fallback scan."""
    from ki.domain.matters.known import known_references

    return Knowledge(formats_for(tuple(patterns) if patterns else None), known_references(conn, project_id))
