"""Stage order, statuses, skip reasons, buckets and durable markers.

Spec: insertion-pipeline.md "Stages in execution order", "Processing states and
console buckets" and "Index" (the ``access_only_reindex`` marker). Everything here is
pure data and pure functions so it can be tested as tables; the error treatment is in
:mod:`ki.core.retry`.
"""

from __future__ import annotations

import enum
from typing import Any

PIPELINE_STAGE_ORDER: tuple[str, ...] = (
    "fetch",
    "convert",
    "classify_matter",
    "relate",
    "extract_metadata",
    "extract_decisions",
    "index",
)

STAGE_CONSOLE_NAMES: dict[str, str] = {
    "fetch": "Fetch",
    "convert": "Parse",
    "classify_matter": "Classify",
    "relate": "Relate",
    "extract_metadata": "Extract metadata",
    "extract_decisions": "Extract decisions",
    "index": "Index",
}



def stage_label(stage: str) -> str:
    """A stage as people read it on every surface: its console name with the id that ``--stage``, the
    JSON and the settings use (``Parse (convert)``; ``Fetch`` alone where the two are the same word)."""
    name = STAGE_CONSOLE_NAMES.get(stage)
    if name is None or name.lower() == stage:
        return name or stage
    return f"{name} ({stage})"


#: Stages that call a model.
MODEL_STAGES: frozenset[str] = frozenset({"classify_matter", "relate", "extract_metadata", "extract_decisions"})

#: Claim lanes (DESIGN.md "Lanes"; spec work-queue.md "Lease-Based Claiming", 1. Poll), in priority
#: order: why a ``processing_state`` row is owed. ``live``: a watcher/sync change; ``retry``: an
#: operator's retry; ``rerun``: a version bump, rerun token, ontology change, re-enabled stage or
#: released capability; ``backfill``: a document's first insertion.
CLAIM_LANES: tuple[str, ...] = ("live", "retry", "rerun", "backfill")
LANE_LIVE, LANE_RETRY, LANE_RERUN, LANE_BACKFILL = CLAIM_LANES
#: Default claim share of each lane when every lane has work (``pipeline.lanes.weights``).
DEFAULT_LANE_WEIGHTS: dict[str, int] = {"live": 8, "retry": 4, "rerun": 2, "backfill": 1}


#: The stages whose output a stage needs. When one of them is disabled, the stage cannot do its
#: work and is skipped (``input_stage_disabled``) instead of failing; re-enabling the input stage
#: requeues it and parks this one back to waiting (requeue_newly_enabled_stages).
STAGE_INPUTS: dict[str, tuple[str, ...]] = {
    "fetch": (),
    "convert": ("fetch",),
    "classify_matter": ("convert",),
    "relate": ("convert", "classify_matter"),
    "extract_metadata": ("convert",),
    "extract_decisions": ("convert",),
    "index": ("convert",),
}


class ProcessingStatus(enum.StrEnum):
    """Stored values of ``processing_state.status``."""

    pending = "pending"
    running = "running"
    done = "done"
    failed = "failed"
    quarantined = "quarantined"
    skipped = "skipped"


# Skip reasons with a meaning of their own (stored in last_error.reason).
WAITING_FOR_PREVIOUS_STAGE = "waiting_for_previous_stage"
#: A fetch row whose file the share will not let ki read (mode 000, an ACL): parked ``skipped`` with this
#: reason, console bucket ``waiting``, until a scan sees its permissions change (``ki.store.unreadable``).
SOURCE_UNREADABLE = "source_unreadable"
#: The ``skipped`` reasons shown in the ``waiting`` bucket.
WAITING_REASONS = (WAITING_FOR_PREVIOUS_STAGE, SOURCE_UNREADABLE)
DISABLED_BY_CONFIGURATION = "disabled_by_configuration"
SOURCE_OBJECT_DELETED = "source_object_deleted"
CANCELLED = "cancelled"
INPUT_STAGE_DISABLED = "input_stage_disabled"

BUCKETS: tuple[str, ...] = ("pending", "running", "done", "failed", "waiting", "disabled", "skipped", "quarantined")

#: Statuses a run can finish on (nothing more will happen without an operator).
TERMINAL_STATUSES = frozenset({"done", "skipped", "quarantined"})


def stage_bucket(status: str, reason: str | None) -> str:
    """Map a stored (status, last_error.reason) to its console bucket.

    Returns one of :data:`BUCKETS`. ``skipped`` splits three ways: ``waiting`` (parked behind a
    predecessor, or a file ki may not read: :data:`WAITING_REASONS`), ``disabled`` (stage off) and
    ``skipped`` (the handler's own judgement). Mirrors :data:`STAGE_BUCKET_SQL`.
    """
    if status == "skipped":
        if reason in WAITING_REASONS:
            return "waiting"
        if reason == DISABLED_BY_CONFIGURATION:
            return "disabled"
        return "skipped"
    return status


#: The same mapping as :func:`stage_bucket`, as a SQL CASE over processing_state.
STAGE_BUCKET_SQL = f"""CASE
  WHEN status = 'skipped' AND reason IN ('{WAITING_FOR_PREVIOUS_STAGE}', '{SOURCE_UNREADABLE}') THEN 'waiting'
  WHEN status = 'skipped' AND reason = '{DISABLED_BY_CONFIGURATION}' THEN 'disabled'
  ELSE status END"""


#: The durable marker on an ``index`` row whose object's grants alone changed (spec: "Index"): the scan
#: writes ``{"access_only_reindex": true}`` into its ``last_error``; a failed access-only attempt keeps it
#: in ``last_error.details``, so the retry is access-only too.
ACCESS_ONLY_REINDEX = "access_only_reindex"


def has_access_only_marker(last_error: dict[str, Any] | None) -> bool:
    """Whether an index row's ``last_error`` carries :data:`ACCESS_ONLY_REINDEX` (top level or in ``details``)."""
    if not last_error:
        return False
    details = last_error.get("details") or {}
    return bool(last_error.get(ACCESS_ONLY_REINDEX)) or (isinstance(details, dict)
                                                         and bool(details.get(ACCESS_ONLY_REINDEX)))
