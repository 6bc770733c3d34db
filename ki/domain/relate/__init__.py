"""Relate: document identity (new / version / duplicate), version order, redlines, typed relations, threads.

Spec: insertion-pipeline.md "Relate (relate)" and "Agentic stages: Classify and Relate".
"""
