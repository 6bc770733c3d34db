"""Negotiation decisions from tracked changes and comments.

Spec: insertion-pipeline.md "Extract decisions"; DESIGN.md "Decisions" (one DecisionRecord per
(document, target version), one entry per changed point). Modules: :mod:`locus` (clause headings),
:mod:`taxonomy` (the shipped rationale taxonomy), :mod:`changes` (revisions → changed points),
:mod:`schema` (the structured-call schema and validators), :mod:`policy` (the rules policy),
:mod:`store` (DecisionRecord rows).
"""
