"""Stage handlers, one module per stage: ``(StageContext) -> StageOutcome``.

Spec: insertion-pipeline.md "Stages in execution order". The model stages
(classify_matter, relate, extract_metadata, extract_decisions) have no handler in
this release; configuration refuses to enable them (``UNIMPLEMENTED_STAGES``).
"""

from __future__ import annotations

from collections.abc import Callable

from ki.orchestration.context import StageContext, StageOutcome
from ki.stages import convert, fetch, index

STAGE_HANDLERS: dict[str, Callable[[StageContext], StageOutcome]] = {
    "fetch": fetch.handle,
    "convert": convert.handle,
    "index": index.handle,
}
