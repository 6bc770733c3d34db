"""Offline rules policies: the embedded default when no model gateway is configured.

DESIGN.md "Two deployments": a rules policy makes the same decisions as the model, through the
same tools and the same validators (:func:`ki.agents.loop.run_policy`), deterministically.
"""
