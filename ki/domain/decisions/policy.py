"""The offline rules policy of extract_decisions: the change rules of :mod:`ki.domain.decisions.changes`.

DESIGN.md "Two deployments": it answers the same schema and is judged by the same validators as the
model's structured call (:mod:`ki.domain.decisions.schema`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ki.adapters.agents.loop import AgentState, Tool
from ki.domain.decisions.changes import decision_entries
from ki.domain.decisions.schema import CHANGE_SUMMARY_CHARS, LOCUS_CHARS, MAX_ENTRIES, RATIONALE_CHARS, DecisionResult


def _fit(value: str | None, limit: int) -> str | None:
    return value if value is None or len(value) <= limit else value[:limit - 1] + "…"


class DecisionRulesPolicy:
    """Pairs the body's revisions into entries (no tools needed).

    The answer fits :class:`DecisionResult` whatever the document holds: a locus or a
    comment longer than the schema allows is cut (``…``), and the changed points beyond :data:`MAX_ENTRIES`
    are counted in ``entries_omitted`` (and named in the summary).
    """

    def __init__(self, body: dict[str, Any]):
        self.body = body

    def decide(self, tools: Sequence[Tool], state: AgentState) -> DecisionResult:
        entries = decision_entries(self.body)
        kept, omitted = entries[:MAX_ENTRIES], max(0, len(entries) - MAX_ENTRIES)
        for e in kept:
            e["locus"] = _fit(e["locus"], LOCUS_CHARS)
            e["change_summary"] = _fit(e["change_summary"], CHANGE_SUMMARY_CHARS)
            e["rationale_text"] = _fit(e["rationale_text"], RATIONALE_CHARS)
        kinds = sorted({e["kind"] for e in entries})
        left_out = f" ({omitted} beyond the limit of {MAX_ENTRIES} left out)" if omitted else ""
        return DecisionResult.model_validate({
            "entries": kept, "entries_omitted": omitted,
            "summary": f"{len(entries)} changed point(s): {', '.join(kinds)}{left_out}"})
