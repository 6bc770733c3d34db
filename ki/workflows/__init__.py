"""The whole Hatchet provider: ki's workflows, their task bodies, the trigger, the sweeper, the worker.

One concept per module, imports pointing downwards:

* :mod:`ki.workflows.inputs` — the workflow inputs;
* :mod:`ki.workflows.client` — the Hatchet client (cached, fail closed) and registration;
* :mod:`ki.workflows.task` — what a document task does (drive its ``processing_state`` row);
* :mod:`ki.workflows.sync` — what the sync task does (scan, finish the sync run, hand off);
* :mod:`ki.workflows.dag` — the workflow declarations (document DAG, access refresh, sync);
* :mod:`ki.workflows.trigger` — triggering a batch, adopted members, replacements, a sync;
* :mod:`ki.workflows.sweeper` — resolving runs nothing will advance;
* :mod:`ki.workflows.worker` — ``ki worker``.

Task bodies never import the trigger: ``ki worker`` hands them what they may start. Importing these
modules has no side effects (Hatchet workers spawn processes). ``ki.app.launch`` sits above this package.
"""
