"""Stage handlers, one module per stage: ``(StageContext) -> StageOutcome``.

Spec: insertion-pipeline.md "Stages in execution order". The model stages
extract_metadata and extract_decisions have no handler in this release;
configuration refuses to enable them (``UNIMPLEMENTED_STAGES``).
"""

from __future__ import annotations

from collections.abc import Callable

from ki.orchestration.context import StageContext, StageOutcome
from ki.stages import classify_matter, convert, fetch, index, relate

STAGE_HANDLERS: dict[str, Callable[[StageContext], StageOutcome]] = {
    "fetch": fetch.handle,
    "convert": convert.handle,
    "classify_matter": classify_matter.handle,
    "relate": relate.handle,
    "index": index.handle,
}
