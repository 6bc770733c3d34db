"""Stage handlers, one module per stage: ``(StageContext) -> StageOutcome``.

Spec: insertion-pipeline.md "Stages in execution order"; every stage has a handler.

A stage's module is imported when its handler is first called, not when this package is: the seven
modules with their domains take about a second of CPU to import, and a restarted ``ki insert``
(recovery after a kill) need only import the stage of the row it claims first
before finishing it. Tests replace entries of :data:`STAGE_HANDLERS` as before.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ki.core.taxonomies import PIPELINE_STAGE_ORDER
from ki.domain.context import StageContext, StageOutcome

Handler = Callable[[StageContext], StageOutcome]


def _handler(stage: str) -> Handler:
    """The handler of ``stage``: imports ``ki.stages.<stage>`` on the first call, then calls its ``handle``."""

    def handle(ctx: StageContext) -> StageOutcome:
        return importlib.import_module(f"ki.stages.{stage}").handle(ctx)

    handle.__name__ = handle.__qualname__ = f"{stage}_handle"
    handle.__doc__ = f"``ki.stages.{stage}.handle`` (imported on first use)."
    return handle


#: stage → handler (:func:`_handler`: the stage's module is imported on its first row)
STAGE_HANDLERS: dict[str, Handler] = {stage: _handler(stage) for stage in PIPELINE_STAGE_ORDER}
