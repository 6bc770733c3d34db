"""TEMPORARY re-export while other branches rebase onto ``ki.context`` (issue 13).

Removed before core's final landing: import from :mod:`ki.context`.
"""

from ki.context import PipelineContext, SourceObjectView, StageContext, StageOutcome  # noqa: F401
