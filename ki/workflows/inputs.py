"""The inputs of ki's Hatchet workflows (pydantic models; strings, because CEL keys are strings).

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider). Outputs are small JSON objects of ids
and statuses, never documents (Hatchet's payload limit).
"""

from __future__ import annotations

from pydantic import BaseModel


class DocumentInput(BaseModel):
    """Input of one document's workflow run. Strings, because CEL keys are strings.

    Attributes:
        batch_id: the pipeline_runs id of the batch (decimal).
        doc_id: the source_object id (decimal).
        attempt: empty for the batch's trigger; a fresh token when the sweeper supersedes a DAG the
            engine stalled (so the replacement gets its own idempotency key).
    """

    batch_id: str
    doc_id: str
    attempt: str = ""

    @property
    def run_id(self) -> int:
        return int(self.batch_id)

    @property
    def source_object_id(self) -> int:
        return int(self.doc_id)


class SyncInput(BaseModel):
    """Input of a sync run: the pipeline_runs id (kind ``sync``) and the source, as decimal strings, and
    what the scan looks at (``ki.adapters.sources.scan.ScanScope``: the watcher's settled paths, what to defer;
    the defaults: the whole source). ``attempt``: empty for the run's trigger; a fresh token when the sweeper
    re-triggers a sync whose workflow run the engine lost (its own idempotency key, ``input.run_id + ':' +
    input.attempt``)."""

    run_id: str
    source_id: str
    attempt: str = ""
    paths: list[str] | None = None
    defer: list[str] = []
    defer_younger_than: float | None = None
    gone: list[str] = []
    delete_at_once_max: int = 0
