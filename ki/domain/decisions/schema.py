"""The extract_decisions answer (the structured call's schema) and its validators.

Spec: insertion-pipeline.md "Extract decisions": "one structured call (chat_json) produces a
DecisionRecord with locus, change summary, rationale category (validated against the taxonomy),
rationale text and generalizability". The same validators judge the model (one ``submit_result``
call, :func:`ki.adapters.agents.loop.chat_agent` without tools) and the rules policy
(:func:`ki.adapters.agents.loop.run_policy`): categories and generalizability come from the shipped taxonomy,
and every ``before``/``after`` text must be text the revisions actually deleted/inserted (never
invented).
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from ki.adapters.agents.loop import AgentState
from ki.domain.decisions.taxonomy import rationale_taxonomy

#: Limits of one answer (a redline's every changed point is valid input; the rules policy
#: cuts its own texts to fit and counts the entries beyond ``MAX_ENTRIES`` in ``entries_omitted``).
MAX_ENTRIES = 2000
LOCUS_CHARS = 300
CHANGE_SUMMARY_CHARS = 1000
RATIONALE_CHARS = 4000
SUMMARY_CHARS = 2000


class DecisionEntryOut(BaseModel):
    """One changed point (``date``: the revision's ISO 8601 timestamp; one that is not a timestamp is null,
    as the record's ``changed_at`` column can hold only a timestamp)."""

    kind: Literal["replacement", "insertion", "deletion", "move"]
    locus: str | None = Field(default=None, max_length=LOCUS_CHARS, description="the enclosing clause heading")
    before: str = Field(default="", description="text the change removed (empty for an insertion)")
    after: str = Field(default="", description="text the change inserted (empty for a deletion)")
    change_summary: str = Field(min_length=1, max_length=CHANGE_SUMMARY_CHARS)
    rationale_category: str = Field(description="a category id of the rationale taxonomy")
    rationale_text: str | None = Field(default=None, max_length=RATIONALE_CHARS,
                                       description="the reason as the comments give it, or null")
    generalizability: str = Field(description="a generalizability id of the rationale taxonomy")
    author: str | None = None
    date: str | None = None

    @field_validator("date")
    @classmethod
    def _timestamp_or_null(cls, value: str | None) -> str | None:
        if not value:
            return None
        try:
            return dt.datetime.fromisoformat(value.strip()).isoformat()
        except ValueError:
            return None


class DecisionResult(BaseModel):
    """The decisions of one document version; an empty ``entries`` list means no decision was made;
    ``entries_omitted`` counts changed points left out beyond :data:`MAX_ENTRIES` (0: none)."""

    entries: list[DecisionEntryOut] = Field(default_factory=list, max_length=MAX_ENTRIES)
    entries_omitted: int = Field(default=0, ge=0, description="changed points left out beyond the limit (else 0)")
    summary: str = Field(default="", max_length=SUMMARY_CHARS)


def _norm(value: str) -> str:
    return " ".join((value or "").split())


def make_validators(deleted: list[str], inserted: list[str]):
    """Validators for a document whose revisions deleted ``deleted`` and inserted ``inserted`` texts."""
    deleted_all = _norm(" ".join(deleted))
    inserted_all = _norm(" ".join(inserted))

    def taxonomy_ids(result: DecisionResult, state: AgentState) -> str | None:
        tax = rationale_taxonomy()
        bad = sorted({e.rationale_category for e in result.entries if not tax.is_category(e.rationale_category)})
        bad_g = sorted({e.generalizability for e in result.entries if not tax.is_generalizability(e.generalizability)})
        if bad or bad_g:
            return (f"unknown rationale_category {bad} / generalizability {bad_g}; use only ids of the taxonomy: "
                    f"categories {sorted(tax.categories)}, generalizability {list(tax.generalizability)}")
        return None

    def texts_come_from_revisions(result: DecisionResult, state: AgentState) -> str | None:
        for i, e in enumerate(result.entries):
            if e.before and e.kind != "insertion" and _norm(e.before) not in deleted_all \
                    and not (e.kind == "move" and _norm(e.before) in inserted_all):
                return f"entries[{i}].before {e.before[:80]!r} is not text any revision deleted; quote deleted text"
            if e.after and e.kind != "deletion" and _norm(e.after) not in inserted_all \
                    and not (e.kind == "move" and _norm(e.after) in deleted_all):
                return f"entries[{i}].after {e.after[:80]!r} is not text any revision inserted; quote inserted text"
            if e.kind == "replacement" and not (e.before and e.after):
                return f"entries[{i}] is a replacement and needs both before and after"
        return None

    return [taxonomy_ids, texts_come_from_revisions]
