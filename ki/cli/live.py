"""What ``ki status`` adds while work is under way: active runs with their rate and ETA, the runnable queue
and why the rest waits.

Spec: insertion-pipeline.md "The console page" (active run progress; waiting reasons); prior-art §8
("telling stuck apart from waiting in line"). :func:`live_report` reads it (one connection, four short
statements), :func:`print_live` prints it under the bucket table. The rate is stage executions completed in
the last minute (:mod:`ki.store.progress`), the ETA the rows still owed divided by that rate.
"""

from __future__ import annotations

from typing import Any

from ki.cli.common import out

#: How ``ki status`` names a waiting reason.
WAIT_WORDS = {
    "waiting_for_previous_stage": "on the stage before",
    "run_after": "retry not yet due",
    "source_unreadable": "file unreadable on the share",
}


def live_report(ctx: Any, buckets: dict[str, dict[str, int]] | None = None) -> dict[str, list[dict[str, Any]]]:
    """``{"runs": [...], "queue": [...], "waiting": [...]}`` (the ``--json`` fields); ``buckets``: the bucket
    counts the caller already read (:func:`ki.store.status.bucket_counts`; read here when None — the count reads
    every state row, ~45 ms at 50,000 documents, so ``ki status`` reads it once):

    * runs: ``id, kind, provider, status, processed, done, quarantined, owed`` (rows still owed of the run's
      source, or of all sources), ``per_second`` (executions over the last minute), ``eta_seconds`` (None
      while nothing moved in the last minute);
    * queue: ``stage, runnable, oldest_seconds, lanes`` (rows runnable now, the oldest one's wait, and the
      oldest wait per claim lane holding runnable rows);
    * waiting: ``stage, reason, rows, oldest_seconds`` (owed but not runnable now, and why; no age for rows
      waiting on the stage before).
    """
    from ki.store.progress import RATE_WINDOW_SECONDS, recent_executions, remaining_rows
    from ki.store.queue_age import oldest_runnable, waiting_rows
    from ki.store.runs import active_runs
    from ki.store.status import bucket_counts

    with ctx.db.engine.connect() as conn:
        runs = active_runs(conn)
        recent = recent_executions(conn, [r.id for r in runs])
        owed = {sid: remaining_rows(conn, sid) for sid in {r.source_id for r in runs}}
        queue, due = oldest_runnable(conn)
        if buckets is None:
            buckets = bucket_counts(conn)
        waiting = waiting_rows(conn, buckets)
    report_runs = []
    for r in runs:
        rate = recent.get(r.id, 0) / RATE_WINDOW_SECONDS
        left = owed[r.source_id]
        report_runs.append({"id": r.id, "kind": r.kind, "provider": r.provider, "status": r.status,
                            "processed": r.processed, "done": r.done, "quarantined": r.quarantined, "owed": left,
                            "per_second": round(rate, 2), "eta_seconds": round(left / rate) if rate else None})
    return {"runs": report_runs,
            "queue": [{"stage": stage, "runnable": buckets[stage]["pending"] + due.get(stage, 0),
                       "oldest_seconds": round(max(q.oldest_seconds for q in lanes), 1),
                       "lanes": {q.lane: round(q.oldest_seconds, 1) for q in lanes}}
                      for stage, lanes in _by_stage(queue).items()],
            "waiting": [{"stage": w.stage, "reason": w.reason, "rows": w.rows,
                         "oldest_seconds": None if w.oldest_seconds is None else round(w.oldest_seconds, 1)}
                        for w in waiting]}


def _by_stage(queue: list) -> dict[str, list]:
    out: dict[str, list] = {}
    for q in queue:
        out.setdefault(q.stage, []).append(q)
    return out


def duration(seconds: float | None) -> str:
    """``3 h 05 min``, ``4 min 12 s``, ``9 s`` (``-`` for None)."""
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"


def print_live(report: dict[str, list[dict[str, Any]]], blocked: dict[str, int] | None = None) -> None:
    """Print the report's lines (nothing for an empty part): one per active run, then the queue and the
    waiting rows per stage, each under 80 columns where the numbers allow. ``blocked`` (stage → rows,
    :func:`ki.store.blocked.blocked_counts`): how many rows waiting on the stage before are blocked by a
    quarantined stage, said on their line (``waiting: index 2 blocked by a quarantined stage`` when all of
    them are, ``…; 2 blocked)`` when some are: they will not move without a retry)."""
    for r in report["runs"]:
        eta = f"ETA {duration(r['eta_seconds'])}" if r["eta_seconds"] is not None else "no progress in the last minute"
        out.print(f"run {r['id']} {r['kind']} ({r['provider']}, {r['status']}): {r['processed']:,} executions, "
                  f"{r['per_second']:g}/s, {r['owed']:,} rows owed, {eta}", highlight=False)
    for q in report["queue"]:
        out.print(f"runnable: {q['stage']} {q['runnable']:,} (oldest waits {duration(q['oldest_seconds'])}; "
                  + ", ".join(f"{lane} {duration(age)}" for lane, age in q["lanes"].items()) + ")", highlight=False)
    for w in report["waiting"]:
        stuck = (blocked or {}).get(w["stage"], 0) if w["reason"] == "waiting_for_previous_stage" else 0
        why = "blocked by a quarantined stage" if stuck and stuck >= w["rows"] else \
            WAIT_WORDS.get(w["reason"], w["reason"])
        notes = [f"oldest {duration(w['oldest_seconds'])}"] if w["oldest_seconds"] is not None else []
        if 0 < stuck < w["rows"]:
            notes.append(f"{stuck:,} blocked")
        out.print(f"waiting: {w['stage']} {w['rows']:,} {why}" + (f" ({'; '.join(notes)})" if notes else ""),
                  highlight=False)
