"""The sweeper's repairs of a Hatchet run: DAGs the engine never made or lost, and stalled DAGs.

Spec: insertion-pipeline.md "Orchestration" (the sweeper; Hatchet provider) and docs/design-decisions.md
"Triggers the engine refuses". Two repairs, both re-triggering through :mod:`ki.workflows.trigger` (so a
re-trigger is itself retried with backoff and shrinks the window when refused):

* :func:`confirm_triggers` — the **early check**, every ``KI_HATCHET_TRIGGER_CHECK_SECONDS`` in ``ki worker``
  (and with each sweep), long before the silence threshold: members whose trigger was acknowledged but whose
  DAG showed no sign of life for that long are looked up in the engine by the run ids it returned (gRPC
  ``GetRunDetails``, which reads the engine's core tables, not its lagging read model); the ones it does not
  know get a DAG of their own (a fresh ``attempt`` token). Slots whose trigger was never acknowledged and is
  overdue (the releaser gave up or died) are triggered again. A queued sync run whose workflow run the engine
  does not know is triggered again (a whole-source scan: a superset of any scope it had).
* :func:`supersede_stalled` — a batch silent for ``KI_RUN_SILENT_MINUTES`` with nothing claimed: its stalled
  DAGs are replaced (engine gotcha "lost task assignment").
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ki.domain.context import PipelineContext
from ki.store import batches, conveyor, pushback, runs
from ki.workflows.client import hatchet_client
from ki.workflows.trigger import advance_conveyor, trigger_members, trigger_sync

log = logging.getLogger(__name__)

#: Members looked up per batch and check (the oldest acknowledgements first; the rest wait a check).
CHECK_BATCH = 200


def engine_verdicts(pairs: list[tuple[int, str]]) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """Split ``(object id, workflow run id)`` pairs into (the engine knows the run, the engine does not).

    One ``GetRunDetails`` each, attempted once: NOT_FOUND is a loss (measured on v0.105.0: a trigger
    acknowledged just before an engine crash, or while the engine sheds load, can be lost); any other failure
    (engine unreachable) puts the pair in neither list, so it is asked again later."""
    client = hatchet_client(once=True)
    known, lost = [], []
    for oid, wid in pairs:
        try:
            client.runs.get_details(wid)
        except Exception as exc:  # noqa: BLE001 - only NOT_FOUND is evidence of a loss
            code = getattr(exc, "code", None)
            if callable(code) and getattr(code(), "name", "") == "NOT_FOUND":
                lost.append((oid, wid))
            continue
        known.append((oid, wid))
    return known, lost


def lost_attempt(workflow_run_id: str) -> str:
    """The ``attempt`` key part of the DAG replacing the lost run ``workflow_run_id``: derived from it, so every
    worker whose check finds the same loss triggers the same idempotency key (one DAG, the others collide)."""
    return "lost-" + workflow_run_id.replace("-", "")[:12]


@dataclass(frozen=True)
class TriggerCheck:
    """What :func:`confirm_triggers` did for one run.

    Attributes:
        run_id: the run.
        confirmed: acknowledged DAGs the engine was found to know.
        retriggered: members (or the sync) whose run the engine did not know, triggered again.
        overdue: members whose unacknowledged slot was overdue, triggered again.
    """

    run_id: int
    confirmed: int = 0
    retriggered: int = 0
    overdue: int = 0


def confirm_triggers(ctx: PipelineContext, run_ids: list[int] | None = None) -> list[TriggerCheck]:
    """The early check of the active ``hatchet`` runs (or ``run_ids``); see the module doc. Never raises
    for one run's failure (logged; the next check tries again). Returns one :class:`TriggerCheck` per run
    where something was looked up or triggered."""
    settings = ctx.settings
    grace = settings.hatchet_trigger_check_seconds or 30.0
    overdue_after = settings.hatchet_trigger_retry_seconds + settings.hatchet_trigger_timeout_seconds + grace
    with ctx.db.engine.connect() as conn:
        ids = list(run_ids) if run_ids is not None else runs.active_run_ids(conn, provider="hatchet")
        states = [s for s in batches.batch_states(conn, ids) if s.status in runs.ACTIVE_RUN_STATUSES
                  and s.provider == "hatchet"]
    out = []
    for st in states:
        try:
            check = (_check_sync(ctx, st, grace) if st.kind == runs.KIND_SYNC
                     else _check_batch(ctx, st.run_id, grace, overdue_after))
        except Exception as exc:  # noqa: BLE001 - the next check tries again
            log.warning("early trigger check of run %s failed: %s", st.run_id, exc)
            continue
        if check is not None:
            out.append(check)
    return out


def _check_batch(ctx: PipelineContext, run_id: int, grace: float, overdue_after: float) -> TriggerCheck | None:
    with ctx.db.engine.connect() as conn:
        overdue = pushback.overdue_stranded(conn, run_id, older_than_seconds=overdue_after)
        pairs = pushback.unconfirmed(conn, run_id, grace_seconds=grace, limit=CHECK_BATCH)
    if not overdue and not pairs:
        return None
    triggered = advance_conveyor(ctx, run_id, released_by=None, every_releaser=True) if overdue else 0
    known, lost = engine_verdicts(pairs) if pairs else ([], [])
    with ctx.db.engine.begin() as conn:
        pushback.mark_verified(conn, run_id, known)
    if lost:
        log.warning("run %s: the engine does not know %d acknowledged document DAG(s) (%s); triggering them "
                    "again", run_id, len(lost), ", ".join(w for _, w in lost[:3]))
        for oid, wid in lost:  # the key part comes from the lost id: workers checking at once trigger one DAG
            trigger_members(ctx, run_id, [oid], attempt=lost_attempt(wid))
    return TriggerCheck(run_id, confirmed=len(known), retriggered=len(lost), overdue=triggered)


def _check_sync(ctx: PipelineContext, st: batches.BatchState, grace: float) -> TriggerCheck | None:
    """A queued sync run (its scan never started) whose recorded workflow run the engine does not know."""
    if st.status != "queued" or not st.workflow_run_id:
        return None
    if (datetime.now(UTC) - st.last_activity).total_seconds() < grace:
        return None
    known, lost = engine_verdicts([(0, st.workflow_run_id)])
    if not lost:
        return TriggerCheck(st.run_id, confirmed=len(known))
    with ctx.db.engine.connect() as conn:
        row = runs.get_run(conn, st.run_id)
    source_id = row.source_id if row is not None else None
    if source_id is None:
        return None
    log.warning("sync run %s: the engine does not know its workflow run %s; triggering a scan of the whole "
                "source again", st.run_id, st.workflow_run_id)
    trigger_sync(ctx, st.run_id, source_id, attempt=lost_attempt(st.workflow_run_id))
    return TriggerCheck(st.run_id, retriggered=1)


def supersede_stalled(ctx: PipelineContext, run_id: int, *, since: Any) -> int:
    """Replace the DAGs of a stalled batch: trigger a replacement per document (a fresh ``attempt``
    token, so its own idempotency key), record it on the member, then cancel the stalled DAG (its
    failure hook sees it superseded and records nothing). Replaced: every unfinished document whose
    DAG Hatchet reports running, plus at most the batch's window of those it reports queued;
    nothing when no worker of this namespace is active (then the batch waits for a worker rather
    than being stalled).

    Why: measured on v0.105.0, an engine restart can lose a task assignment (the task stays
    RUNNING on a live worker that never received it, holding a worker slot until its six-hour
    execution timeout) or the creation of a DAG's next task after its parent completed (the DAG
    stays RUNNING forever), and DAGs queued behind them never start. Hatchet's replay refuses
    running DAGs ("failed preflight check for DAG"). The replacement's tasks find the finished
    stages done and continue at the first unfinished one. The sweeper calls this only for a batch
    silent for ``KI_RUN_SILENT_MINUTES`` with nothing claimed and no retry pending. Returns the
    number of DAGs replaced.

    Also re-triggered (fresh ``attempt``, nothing to cancel): members in flight whose recorded DAG
    the engine does not know at all (:func:`engine_verdicts`), at most a window per sweep.
    """
    from hatchet_sdk import V1TaskStatus
    from hatchet_sdk.features.runs import BulkCancelReplayOpts

    client = hatchet_client()
    prefix = client.config.namespace or ""
    workers = client.workers.list().rows or []
    if not any(w.name.startswith(prefix) and str(w.status).endswith("ACTIVE") for w in workers):
        return 0  # nobody would run a replacement: the batch is waiting for a worker, not stalled
    stalled: dict[str, str] = {}
    for status in (V1TaskStatus.RUNNING, V1TaskStatus.QUEUED):
        listing = client.runs.list(additional_metadata={"ki_run_id": str(run_id)}, statuses=[status],
                                   only_tasks=False, since=since, limit=1000)
        for row in listing.rows or []:
            if prefix and not (row.display_name or "").startswith(prefix):
                continue  # another namespace's run with the same ki_run_id
            for x in (row.workflow_run_external_id, row.metadata.id):
                if x:
                    stalled.setdefault(str(x), status.value)
    with ctx.db.engine.connect() as conn:
        found = batches.unfinished_members(conn, run_id, list(stalled)) if stalled else []
        window = conveyor.shape(conn, run_id).window or ctx.settings.hatchet_document_concurrency
        unlisted = [m for m in conveyor.in_flight_members(conn, run_id) if m[1] not in stalled]
    # every DAG holding a slot (running), and at most one window of queued ones per sweep
    running = [m for m in found if stalled.get(m[1]) == V1TaskStatus.RUNNING.value]
    queued = [m for m in found if stalled.get(m[1]) != V1TaskStatus.RUNNING.value]
    members = running + queued[:window]
    lost = engine_verdicts(unlisted[:window])[1]
    if not members and not lost:
        return 0
    trigger_members(ctx, run_id, [oid for oid, _ in members + lost], attempt=uuid.uuid4().hex[:8])
    if members:
        client.runs.bulk_cancel(BulkCancelReplayOpts(ids=[wid for _, wid in members]))
    log.warning("run %s: superseded %d stalled document DAG(s), re-triggered %d the engine lost", run_id,
                len(members), len(lost))
    return len(members) + len(lost)
