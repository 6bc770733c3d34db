"""The relate stage's answer (``submit_result`` schema) and its validators.

Spec: insertion-pipeline.md "Relate: what the model is given": "The result validator rejects any
target ref the model did not actually open; refs come only from open_file results, never from paths."
Both the model (:func:`ki.adapters.agents.loop.chat_agent`) and the rules policy
(:func:`ki.adapters.agents.loop.run_policy`) are judged by :data:`VALIDATORS`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ki.adapters.agents.loop import AgentState

RelationType = Literal["annex_of", "responds_to", "references", "amends"]
RELATION_TYPES: tuple[str, ...] = ("annex_of", "responds_to", "references", "amends")
#: Relations one answer may list. A mail relates to each of its attachments, and mails with hundreds of
#: attachments are valid input (50 quarantined them); the rules policy keeps the first
#: ``MAX_RELATIONS`` and counts the rest in ``relations_omitted``.
MAX_RELATIONS = 1000
#: Characters of ``reasoning`` (the rules policy cuts its own to fit).
REASONING_CHARS = 2000


class RelationOut(BaseModel):
    """One typed relation: this file *is* ``type`` the file ``target_ref`` (annex_of, responds_to...)."""

    type: RelationType
    target_ref: str = Field(description="the ref of the target exactly as open_file returned it")
    evidence: str = Field(default="", max_length=500, description="the words in either file that show it")


class RelateResult(BaseModel):
    """Identity and relations of the current file.

    Attributes:
        identity: ``new`` (a document of its own), ``version`` (another version or rendition of the
            document that ``same_as_ref`` belongs to) or ``duplicate`` (byte-identical to ``same_as_ref``).
        same_as_ref: the opened file this one is a version or duplicate of (None for ``new``).
        redline_against_ref: for a file with tracked changes, the opened file holding the version the
            changes were made against (None otherwise).
        relations: typed relations to opened files (at most :data:`MAX_RELATIONS`).
        relations_omitted: how many relations were left out beyond that limit (0: none).
        reasoning: one or two sentences.
    """

    identity: Literal["new", "version", "duplicate"]
    same_as_ref: str | None = Field(default=None, description="ref from open_file; required for version/duplicate")
    redline_against_ref: str | None = Field(default=None, description="ref from open_file, or null")
    relations: list[RelationOut] = Field(default_factory=list, max_length=MAX_RELATIONS)
    relations_omitted: int = Field(default=0, ge=0, description="relations left out beyond the limit (else 0)")
    reasoning: str = Field(default="", max_length=REASONING_CHARS)


def _opened(state: AgentState) -> dict[str, dict]:
    """ref → open_file result, for every file the run actually opened."""
    out: dict[str, dict] = {}
    for result in state.results_of("open_file"):
        if isinstance(result, dict) and result.get("ref") and result.get("status") == "ok":
            out[str(result["ref"])] = result
    return out


def make_validators(self_ref: str, content_hash: str):
    """The validators for the file ``self_ref`` whose bytes hash to ``content_hash``.

    Returns: a list of ``validator(result, state) -> None | message`` for ``chat_agent``/``run_policy``.
    """

    def refs_were_opened(result: RelateResult, state: AgentState) -> str | None:
        """Reject refs that no open_file result returned."""
        opened = _opened(state)
        refs = [r for r in (result.same_as_ref, result.redline_against_ref) if r] + \
            [r.target_ref for r in result.relations]
        unknown = sorted({r for r in refs if r not in opened})
        if unknown:
            return (f"refs {unknown} did not come from an open_file result; open the file with open_file(path) "
                    "and use the ref it returns (refs never come from paths)")
        return None

    def identity_is_consistent(result: RelateResult, state: AgentState) -> str | None:
        """new has no same_as; version/duplicate need one; no self refs; duplicates are byte-identical."""
        if result.identity == "new" and result.same_as_ref:
            return "identity 'new' takes no same_as_ref; use 'version' or 'duplicate' to name the other file"
        if result.identity != "new" and not result.same_as_ref:
            return f"identity '{result.identity}' needs same_as_ref (the opened file it is a {result.identity} of)"
        refs = [result.same_as_ref, result.redline_against_ref, *[r.target_ref for r in result.relations]]
        if self_ref in refs:
            return f"{self_ref} is the current file itself; a file is not its own version, duplicate or target"
        if result.identity == "duplicate":
            other = _opened(state).get(result.same_as_ref or "")
            if other is not None and other.get("content_hash") != content_hash:
                return (f"{result.same_as_ref} is not byte-identical to this file (different content hash); "
                        "call it a 'version' if it is the same document with other content")
        return None

    def relations_are_unique(result: RelateResult, state: AgentState) -> str | None:
        """Reject a relation listed twice."""
        seen = set()
        for r in result.relations:
            key = (r.type, r.target_ref)
            if key in seen:
                return f"relation {r.type} → {r.target_ref} is listed twice"
            seen.add(key)
        return None

    return [refs_were_opened, identity_is_consistent, relations_are_unique]
