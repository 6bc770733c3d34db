"""The shapes of Classify: the tools' arguments and the answer (:class:`ClassifyResult`).

Spec: insertion-pipeline.md "Classify: what the model is given" (the four tools) and the result
validator; the rules policy (:mod:`ki.domain.matters.policy`) and the model answer in the same shape.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

#: Characters of a created matter's title and of an answer's evidence (the rules policy cuts its own to fit:
#: the evidence names a folder path, and paths have no such limit; ki's own limit is never the file's fault).
TITLE_CHARS = 300
EVIDENCE_CHARS = 1000


class SearchMattersArgs(BaseModel):
    """Arguments of ``search_matters``."""

    query: str = Field(default="", max_length=500, description="reference number, client or party name, subject")
    limit: int = Field(default=8, ge=1, le=50)
    offset: int = Field(default=0, ge=0)


class PeekMatterArgs(BaseModel):
    """Arguments of ``peek_matter``."""

    matter_id: int


class ListFolderArgs(BaseModel):
    """``list_folder`` takes no arguments (it shows the file's neighbourhood)."""


class CreateMatterArgs(BaseModel):
    """Arguments of ``create_matter``."""

    reference_number: str = Field(min_length=1, max_length=64, description="the firm's reference, e.g. 2024-0153")
    title: str = Field(default="", max_length=TITLE_CHARS)


class ClassifyResult(BaseModel):
    """Classify's answer.

    Attributes:
        matter_id: a matter id exactly as a tool returned it; null when no matter fits.
        confidence: 0..1; below the stage's abstain threshold the answer counts as null.
        evidence: what decided it (a reference in the path or text, the thread, the folder, a party).
        practice_area / matter_kind: facet nodes (only when those facets are active; else null).
    """

    matter_id: int | None = Field(description="id from search_matters / peek_matter / create_matter, or null")
    confidence: float = Field(default=0.9, ge=0.0, le=1.0)
    evidence: str = Field(default="", max_length=EVIDENCE_CHARS)
    practice_area: str | None = None
    matter_kind: str | None = None
