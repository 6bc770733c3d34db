"""Matters: the firm's client files, their references, and which matter each source object belongs to.

Spec: insertion-pipeline.md "Classify (classify_matter)" and "Agentic stages: Classify and Relate".
"""
