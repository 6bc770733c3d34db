"""The offline rules policy of extract_decisions: the change rules of :mod:`ki.decisions.changes`.

DESIGN.md "Two deployments": it answers the same schema and is judged by the same validators as the
model's structured call (:mod:`ki.decisions.schema`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ki.agents.loop import AgentState, Tool
from ki.decisions.changes import decision_entries
from ki.decisions.schema import DecisionResult


class DecisionRulesPolicy:
    """Pairs the body's revisions into entries (no tools needed)."""

    def __init__(self, body: dict[str, Any]):
        self.body = body

    def decide(self, tools: Sequence[Tool], state: AgentState) -> DecisionResult:
        entries = decision_entries(self.body)
        kinds = sorted({e["kind"] for e in entries})
        return DecisionResult.model_validate({"entries": entries,
                                              "summary": f"{len(entries)} changed point(s): {', '.join(kinds)}"})
