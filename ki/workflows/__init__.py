"""ki's Hatchet workflows and the worker that runs them.

* :mod:`ki.workflows.insertion` — the per-document DAG and the access refresh (the DAG in one place);
* :mod:`ki.workflows.sync` — the source scan;
* :mod:`ki.workflows.runtime` — what every task does (drive its ``processing_state`` row);
* :mod:`ki.workflows.worker` — ``ki worker``.

Importing these modules has no side effects (Hatchet workers spawn processes).
"""
