"""Parties and the entities behind them: names, typed identifiers, mentions, rule-based resolution, roles.

Spec: insertion-pipeline.md "Extract metadata" (parties are searched by the agent but resolved by
rule, so one real company is one row across every matter it appears on).
"""
