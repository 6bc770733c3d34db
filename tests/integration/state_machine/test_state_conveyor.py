"""The batch conveyor of a Hatchet batch (``ki.store.conveyor``) on the real database, without an engine.

Spec: insertion-pipeline.md "Orchestration" (KI_HATCHET_DOCUMENT_CONCURRENCY) and DESIGN.md "Hatchet
DAG shape and pacing": a batch triggers at most its window of document DAGs at once; each DAG's end
releases the next members under the per-run advisory lock; a replayed release returns the same
successors (never a member twice); a conveyor that stopped is visible to the sweeper. The
engine-backed behaviour is in tests/integration/orchestrator/test_hatchet_provider.py.
"""

from __future__ import annotations

import threading
from collections import Counter

from sqlalchemy import text

from ki.store import batches, conveyor, runs
from tests.helpers.state import make_source

WINDOW = 3


def _batch(ctx, src, n: int) -> tuple[int, list[int]]:
    ids = make_source(ctx, src, n)
    with ctx.db.engine.begin() as conn:
        run_id = runs.create_run(conn, kind=runs.KIND_INSERTION, label="Insertion", provider="hatchet",
                                 status="queued", source_id=None, trigger="test")
        reservation = batches.reserve_batch(conn, run_id)
        conveyor.set_shape(conn, run_id, "ki-insertion-f-c-i", WINDOW)
    assert list(reservation.object_ids) == sorted(ids)
    return run_id, sorted(ids)


def _release(ctx, run_id: int, by: int | None, **kw) -> list[int]:
    with ctx.db.engine.begin() as conn:
        return conveyor.release(conn, run_id, released_by=by, default_window=99, **kw)


def _record(ctx, run_id: int, oids: list[int]) -> None:
    with ctx.db.engine.begin() as conn:
        batches.record_workflow_runs(conn, run_id, [(o, f"wf-{o}") for o in oids])


def _finish(ctx, run_id: int, oid: int) -> list[int]:
    """A final task's commit: the member's end and its release, in one transaction."""
    with ctx.db.engine.begin() as conn:
        batches.finish_member(conn, run_id, oid, "done")
        return conveyor.release(conn, run_id, released_by=oid, default_window=99)


def sql(ctx, statement: str, **params) -> list:
    with ctx.db.engine.connect() as conn:
        return conn.execute(text(statement), params).fetchall()


def _state(ctx, run_id: int) -> conveyor.ConveyorState:
    with ctx.db.engine.connect() as conn:
        return conveyor.conveyor_states(conn, [run_id])[run_id]


def test_window_release_replay_and_end(ctx, src):
    run_id, ids = _batch(ctx, src, 8)
    with ctx.db.engine.connect() as conn:
        assert conveyor.shape(conn, run_id) == conveyor.Shape("ki-insertion-f-c-i", WINDOW)
        assert conveyor.active_workflow_names(conn) == {"ki-insertion-f-c-i"}
    first = _release(ctx, run_id, None)
    assert first == ids[:WINDOW]  # the recorded window, lowest ids first (the default is not used)
    assert _release(ctx, run_id, None) == first  # a trigger that died before recording: the same members
    _record(ctx, run_id, first)
    assert _release(ctx, run_id, None) == []
    s = _state(ctx, run_id)
    assert (s.in_flight, s.triggered, s.stranded, s.waiting, s.stopped) == (3, 3, 0, 5, False)

    # a DAG ends: exactly one successor; its replay (before the trigger was recorded) returns the same one
    assert _finish(ctx, run_id, ids[1]) == [ids[3]]
    assert _finish(ctx, run_id, ids[1]) == [ids[3]]
    assert _state(ctx, run_id).stranded == 1 and _state(ctx, run_id).stopped  # the sweeper would see it
    _record(ctx, run_id, [ids[3]])
    assert _finish(ctx, run_id, ids[1]) == []  # a replay after the trigger: nothing, never a member twice
    assert _state(ctx, run_id).in_flight == WINDOW

    # the rest of the batch: every end releases at most one, the window is never exceeded
    order = [ids[0], ids[2], ids[3]] + ids[4:]
    for oid in order:
        nxt = _finish(ctx, run_id, oid)
        assert len(nxt) <= 1
        _record(ctx, run_id, nxt)
        assert _state(ctx, run_id).in_flight <= WINDOW
    members = sql(ctx, "SELECT source_object_id, released_by, finished_at FROM pipeline_run_object WHERE run_id = :r",
                  r=run_id)
    assert all(m.finished_at for m in members)
    assert Counter(m.released_by for m in members)[None] == WINDOW
    assert sql(ctx, "SELECT status FROM pipeline_runs WHERE id = :r", r=run_id)[0][0] == "completed"
    with ctx.db.engine.connect() as conn:
        assert conveyor.active_workflow_names(conn) == set()


def test_a_stopped_conveyor_and_an_inactive_run(ctx, src):
    run_id, ids = _batch(ctx, src, 6)
    _record(ctx, run_id, _release(ctx, run_id, None))
    # a DAG ended without releasing (its worker died after the commit, Hatchet gave up on the task)
    with ctx.db.engine.begin() as conn:
        batches.finish_member(conn, run_id, ids[0], "done")
    s = _state(ctx, run_id)
    assert (s.in_flight, s.waiting, s.stranded, s.stopped) == (2, 3, 0, True)
    # a releaser that died between its commit and the trigger: the sweeper takes every releaser's
    stranded = _finish(ctx, run_id, ids[1])
    assert stranded == [ids[3], ids[4]]  # the free slot of ids[0] and its own
    assert _release(ctx, run_id, None) == []  # not the sweeper's own, and no slot free
    assert _release(ctx, run_id, None, every_releaser=True) == stranded
    _record(ctx, run_id, stranded)
    assert not _state(ctx, run_id).stopped
    # a run that is no longer active releases nothing
    with ctx.db.engine.begin() as conn:
        batches.fail_run(conn, run_id, "test")
        batches.finish_member(conn, run_id, ids[2], "done")
    assert _release(ctx, run_id, ids[2]) == []
    assert sql(ctx, "SELECT count(*) FROM pipeline_run_object WHERE run_id = :r AND released_at IS NULL",
               r=run_id)[0][0] == 1


def test_concurrent_ends_never_exceed_the_window(ctx, src):
    """Many DAGs of one batch ending at once (threads, one connection each): the per-run lock keeps
    the released-and-unfinished count within the window and releases each member once."""
    run_id, ids = _batch(ctx, src, 30)
    in_flight = _release(ctx, run_id, None)
    _record(ctx, run_id, in_flight)
    peak = [len(in_flight)]
    lock = threading.Lock()
    errors: list[BaseException] = []

    def end(oid: int) -> None:
        try:
            nxt = _finish(ctx, run_id, oid)
            with ctx.db.engine.connect() as conn:
                n = conn.execute(text("SELECT count(*) FROM pipeline_run_object WHERE run_id = :r "
                                      "AND released_at IS NOT NULL AND finished_at IS NULL"), {"r": run_id}).scalar()
            with lock:
                peak[0] = max(peak[0], n)
            _record(ctx, run_id, nxt)
            threads = [threading.Thread(target=end, args=(o,)) for o in nxt]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=end, args=(o,)) for o in in_flight]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert peak[0] <= WINDOW
    members = sql(ctx, "SELECT source_object_id, released_by, workflow_run_id, finished_at FROM pipeline_run_object "
                       "WHERE run_id = :r", r=run_id)
    assert len(members) == 30 and all(m.finished_at and m.workflow_run_id for m in members)
    assert sql(ctx, "SELECT status FROM pipeline_runs WHERE id = :r", r=run_id)[0][0] == "completed"


def test_a_member_reopened_after_its_end_is_owed_a_new_dag(ctx, src):
    """A later classification re-opens a finished member's relate (lane ``rerun``): the next member's end
    puts it back on the conveyor (``reopen_finished``), the run is not finalised, its next DAG gets a new
    idempotency key (``reopen1``) that a replay of the same end reproduces; once its rows are done the run
    completes."""
    run_id, ids = _batch(ctx, src, 2)
    a, b = ids
    _record(ctx, run_id, _release(ctx, run_id, None))
    sql_done = "UPDATE processing_state SET status = 'done' WHERE source_object_id = ANY(:o)"
    with ctx.db.engine.begin() as conn:
        conn.execute(text(sql_done), {"o": ids})
    assert _finish(ctx, run_id, a) == []
    with ctx.db.engine.begin() as conn:  # b's classification changed what a's relate read (ki.domain.relate.basis)
        conn.execute(text("UPDATE processing_state SET status = 'pending', lane = 'rerun' "
                          "WHERE source_object_id = :a AND stage = 'fetch'"), {"a": a})

    def end_b() -> tuple[str | None, list[int]]:
        with ctx.db.engine.begin() as conn:
            status = batches.finish_member(conn, run_id, b, "done", before_finalize=conveyor.reopen_finished)
            return status, conveyor.release(conn, run_id, released_by=b, default_window=99)

    assert end_b() == (None, [a])  # not completed: a is released again, by b's end
    assert end_b() == (None, [a])  # a replay of b's end: the same member, not re-opened twice
    with ctx.db.engine.connect() as conn:
        assert conveyor.attempt_keys(conn, run_id, [a, b]) == {a: "reopen1", b: ""}
    assert sql(ctx, "SELECT reopens FROM pipeline_run_object WHERE source_object_id = :a", a=a) == [(1,)]
    _record(ctx, run_id, [a])
    with ctx.db.engine.begin() as conn:
        conn.execute(text(sql_done), {"o": [a]})
        assert batches.finish_member(conn, run_id, a, "done", before_finalize=conveyor.reopen_finished) == "completed"
    assert sql(ctx, "SELECT status FROM pipeline_runs WHERE id = :r", r=run_id) == [("completed",)]
