"""Orchestration providers behind ``launch_insertion``.

Spec: insertion-pipeline.md "Orchestration": ``components.orchestrator_provider`` selects the
executor, ``hatchet`` (:mod:`ki.orchestration.providers.hatchet`, with the batch ledger in
:mod:`ki.store.runs`) or ``local`` (``PipelineRunner`` in
:mod:`ki.orchestration.insertion`). Any other value fails closed.
"""

PROVIDERS = ("local", "hatchet")
