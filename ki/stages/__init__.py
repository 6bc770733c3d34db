"""Stage handlers, one module per stage: ``(StageContext) -> StageOutcome``.

Spec: insertion-pipeline.md "Stages in execution order"; every stage has a handler.
"""

from __future__ import annotations

from collections.abc import Callable

from ki.context import StageContext, StageOutcome
from ki.stages import classify_matter, convert, extract_decisions, extract_metadata, fetch, index, relate

STAGE_HANDLERS: dict[str, Callable[[StageContext], StageOutcome]] = {
    "fetch": fetch.handle,
    "convert": convert.handle,
    "classify_matter": classify_matter.handle,
    "relate": relate.handle,
    "extract_metadata": extract_metadata.handle,
    "extract_decisions": extract_decisions.handle,
    "index": index.handle,
}
