"""``GET /api/status``, ``GET /api/sources``, ``GET /api/runs``, ``POST /api/actions/pipeline``,
``POST /api/actions/sync``.

Spec: insertion-pipeline.md "The console page" (stage bars and buckets, run banner: GET /api/status,
polled every 5 s while a run is active, also triggering an opportunistic sweep; recent processing
runs: GET /api/runs) and "Orchestration" (every trigger goes through ``launch_insertion``; a sync
through ``launch_sync``: a second sync of a source while one runs is refused with 409).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from fastapi import APIRouter, Depends, Path, Query, Response

from ki.adapters.breaker import describe_pauses
from ki.api.auth import Identity, require_scope
from ki.api.errors import ApiError, error_responses
from ki.api.schemas import (
    ActiveRun,
    BudgetWait,
    LaunchOut,
    PausedDependency,
    RunCancelIn,
    RunCancelOut,
    RunOut,
    RunsPage,
    SourceOut,
    StageStatus,
    StatusOut,
    SyncIn,
    SyncOut,
    UnreadableFile,
)
from ki.api.state import ServerState, server_state
from ki.app.launch import sweep_local_runs
from ki.app.scopes import READ_PIPELINE, WRITE_PIPELINE
from ki.core.errors import SyncAlreadyRunning
from ki.core.taxonomies import PIPELINE_STAGE_ORDER, STAGE_CONSOLE_NAMES
from ki.domain.access.visibility import split_visible
from ki.orchestration.budget import budget_wait
from ki.store import audit, runs
from ki.store.pauses import read_pauses
from ki.store.runs import RunRow
from ki.store.unreadable import parked_unreadable

router = APIRouter(prefix="/api", tags=["pipeline"])

#: Buckets of rows a run still owes work on (``total`` of an active run counts them).
OWED_BUCKETS = ("pending", "running", "failed", "waiting")


def run_out(row: RunRow) -> RunOut:
    """A run ledger row as the API shows it (``duration_seconds`` once finished)."""
    return RunOut.of(row)


@router.get("/status", response_model=StatusOut, responses=error_responses(401, 403))
async def get_status(state: ServerState = Depends(server_state),
                     identity: Identity = Depends(require_scope(READ_PIPELINE))) -> Response:
    """Per-stage bucket counts (one query), the active runs with progress and the paused dependencies;
    starts an opportunistic sweep. The files ki may not read are listed by path only to a token that may see
    them (a principal's token gets the others counted in the buckets, never named). One answer per principal is
    shared by every concurrent reader for up to :data:`ki.api.state.STATUS_SECONDS` (:mod:`ki.api.shared_answers`);
    ``generated_at`` is when its bucket counts were taken. A fresh answer is given on the event loop."""
    answer = await state.status_answers.get_async(identity.principal, lambda: status_json(state, identity.principal))
    return Response(answer.value, media_type="application/json")


def shared_status(state: ServerState, principal: str | None) -> bytes:
    """``GET /api/status``'s answer for ``principal`` as JSON, shared as the route shares it (in this thread)."""
    return state.status_answers.get(principal, lambda: status_json(state, principal)).value


def status_json(state: ServerState, principal: str | None) -> bytes:
    """``GET /api/status``'s answer for ``principal`` (None: an operator token), as JSON."""
    config = state.config()
    snapshot = state.buckets.get()
    counts = snapshot.counts
    sweep_local_runs(state.ctx)  # a run whose process ended is never shown active
    with state.ctx.db.engine.connect() as conn:
        active = runs.active_runs(conn)
        paused = [PausedDependency(**p) for p in describe_pauses(read_pauses(conn), config)]
        unreadable = [UnreadableFile(source_id=f.source_id, source_object_id=f.source_object_id,
                                     path=f.details.get("path") or f.path, mode=f.details.get("mode"),
                                     uid=f.details.get("uid"), gid=f.details.get("gid"))
                      for f in parked_unreadable(conn, limit=200)]
    unreadable, _hidden = split_visible(state.ctx.db.engine, principal, unreadable, lambda f: f.source_object_id)
    state.sweep_soon()
    enabled = {s: config.pipeline.stage(s).enabled for s in PIPELINE_STAGE_ORDER}
    blocked = snapshot.blocked or {}
    stages = [StageStatus(stage=s, name=STAGE_CONSOLE_NAMES[s], enabled=enabled[s], buckets=counts[s],
                          total=sum(counts[s].values()), blocked=blocked.get(s, 0)) for s in PIPELINE_STAGE_ORDER]
    owed = sum(counts[s][b] for s in PIPELINE_STAGE_ORDER if enabled[s] for b in OWED_BUCKETS)
    now = datetime.now(UTC)
    out = []
    for r in active:
        elapsed = max((now - r.started_at).total_seconds(), 0.001)
        rate = r.processed / elapsed if r.processed else None
        out.append(ActiveRun(**r.model_dump(), total=r.processed + owed, rate_per_second=rate,
                             eta_seconds=owed / rate if rate else None))
    budget = budget_wait(state.ctx.db.engine, config)
    return StatusOut(stages=stages, runs=out, generated_at=snapshot.at, paused=paused,
                     budget=BudgetWait(**budget) if budget else None, unreadable=unreadable).model_dump_json().encode()


@router.get("/sources", response_model=list[SourceOut], responses=error_responses(401, 403))
def get_sources(state: ServerState = Depends(server_state),
                _: Identity = Depends(require_scope(READ_PIPELINE))) -> list[SourceOut]:
    """Every live source with its permission model and how many of its indexed documents every principal
    sees (README "Permissions"). Sources name folders, not files: listed to every ``read:pipeline`` token,
    as runs are. Reads every chunk of each source (the console asks once a minute)."""
    from ki.adapters.sources.overview import source_overview

    with state.ctx.db.engine.connect() as conn:
        return [SourceOut(**record) for record in source_overview(conn, open_counts=True)]


RUN_KINDS = ("insertion", "access_refresh", "sync")


@router.get("/runs", response_model=RunsPage, responses=error_responses(401, 403))
async def get_runs(state: ServerState = Depends(server_state), _: Identity = Depends(require_scope(READ_PIPELINE)),
                   kind: list[Literal["insertion", "access_refresh", "sync"]] = Query(
                       default=[], description="only these kinds (default: all)"),
                   status: Literal["queued", "running", "completed", "failed", "cancelled"] | None = None,
                   limit: int = Query(20, ge=1, le=200), offset: int = Query(0, ge=0, le=10_000_000)) -> Response:
    """Insertion, access-refresh and sync runs, newest first, paged; starts an opportunistic sweep. A page is
    shared by every concurrent reader for up to :data:`ki.api.state.RUNS_SECONDS` (``generated_at`` says when it
    was read; :mod:`ki.api.shared_answers`)."""
    key = (tuple(sorted(set(kind))), status, limit, offset)
    answer = await state.runs_answers.get_async(key, lambda: runs_json(state, *key))
    return Response(answer.value, media_type="application/json")


def shared_runs(state: ServerState, kinds: tuple[str, ...], status: str | None, limit: int, offset: int) -> bytes:
    """``GET /api/runs``'s page as JSON, shared as the route shares it (in this thread)."""
    key = (tuple(sorted(set(kinds))), status, limit, offset)
    return state.runs_answers.get(key, lambda: runs_json(state, *key)).value


def runs_json(state: ServerState, kinds: tuple[str, ...], status: str | None, limit: int, offset: int) -> bytes:
    """``GET /api/runs``'s page as JSON (``kinds`` empty: every kind)."""
    generated_at = datetime.now(UTC)
    state.sweep_soon()
    sweep_local_runs(state.ctx)
    with state.ctx.db.engine.connect() as conn:
        rows, total = runs.runs_page(conn, kinds=list(kinds) or None, status=status, limit=limit, offset=offset)
    return RunsPage(runs=[run_out(r) for r in rows], total=total, limit=limit, offset=offset,
                    generated_at=generated_at).model_dump_json().encode()


#: Seconds ``POST /api/runs/{id}/cancel`` waits for a local run to end before answering (it keeps stopping).
CANCEL_WAIT_SECONDS = 5.0


@router.post("/runs/{run_id}/cancel", response_model=RunCancelOut, responses=error_responses(401, 403, 404, 409, 422))
def cancel(run_id: int = Path(ge=1, le=2**63 - 1), body: RunCancelIn | None = None,
           state: ServerState = Depends(server_state),
           identity: Identity = Depends(require_scope(WRITE_PIPELINE))) -> RunCancelOut:
    """Cancel an active insertion run (``ki.app.cancel.cancel_run``; audited as ``run_cancel``): it claims nothing
    more, the stages it holds finish, it ends ``cancelled``; 404 unknown run, 409 finished or sync run."""
    from ki.app.cancel import RunNotCancellable, cancel_run

    state.changed()
    try:
        outcome = cancel_run(state.ctx, run_id, actor=identity.name, wait_seconds=CANCEL_WAIT_SECONDS,
                             reason=body.reason if body else None)
    except RunNotCancellable as exc:
        raise ApiError(404 if exc.code == "not_found" else 409, exc.code, str(exc)) from exc
    finally:
        state.changed()
    return RunCancelOut(run=run_out(outcome.run), message=outcome.message)


def launch_run(state: ServerState, *, trigger: str) -> tuple[RunOut | None, bool]:
    """Start a run through the launcher; (the run, whether it is a follow-up behind an active one)."""
    state.changed()
    try:
        launch = state.launcher.launch(trigger=trigger)
    except TimeoutError as exc:
        raise ApiError(503, "run_not_started", str(exc)) from exc
    finally:
        state.changed()
    if launch.run_id is None:
        return None, launch.follow_up
    with state.ctx.db.engine.connect() as conn:
        row = runs.get_run(conn, launch.run_id)
    return (run_out(row) if row else None), launch.follow_up


@router.post("/actions/pipeline", status_code=202, response_model=LaunchOut,
             responses=error_responses(401, 403, 503))
def start_pipeline(state: ServerState = Depends(server_state),
                   identity: Identity = Depends(require_scope(WRITE_PIPELINE))) -> LaunchOut:
    """Start an insertion run through ``launch_insertion`` (local: in this process, in the background)."""
    run, follow_up = launch_run(state, trigger="api")
    with state.ctx.db.engine.begin() as conn:
        audit.record_audit(conn, actor=identity.name, action="pipeline_start",
                           details={"run_id": run.id if run else None, "follow_up": follow_up})
    if follow_up:
        message = (f"run {run.id if run else ''} is active; another run starts when it ends, so the new work "
                   "is picked up")
    else:
        message = f"run {run.id if run else ''} started"
    return LaunchOut(run=run, follow_up=follow_up, message=message.replace("  ", " "))


@router.post("/actions/sync", status_code=202, response_model=SyncOut,
             responses=error_responses(401, 403, 404, 409, 503))
def start_sync(body: SyncIn, state: ServerState = Depends(server_state),
               identity: Identity = Depends(require_scope(WRITE_PIPELINE))) -> SyncOut:
    """Start a sync run of one source through ``launch_sync`` (local: scanned in this process, in the
    background, handing off to the console's insertion run); 409 while that source's sync runs."""
    from ki.store.sources import source_by_id

    with state.ctx.db.engine.connect() as conn:
        src = source_by_id(conn, body.source_id)
    if src is None or src.removed_at is not None:
        raise ApiError(404, "not_found", f"no source {body.source_id}")
    state.changed()
    try:
        run_id = state.launcher.sync(body.source_id, trigger="api")
    except SyncAlreadyRunning as exc:
        raise ApiError(409, "sync_running", str(exc), run_id=exc.run_id) from exc
    except TimeoutError as exc:
        raise ApiError(503, "run_not_started", str(exc)) from exc
    finally:
        state.changed()
    with state.ctx.db.engine.begin() as conn:
        audit.record_audit(conn, actor=identity.name, action="sync_start",
                           details={"run_id": run_id, "source_id": body.source_id})
        row = runs.get_run(conn, run_id)
    if row is None:  # pragma: no cover - the row was created before the id was returned
        raise ApiError(503, "run_not_started", f"sync run {run_id} vanished")
    return SyncOut(run=run_out(row), message=f"sync run {run_id} of source {body.source_id} started")
