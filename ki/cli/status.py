"""``ki status [--json] [--watch]``: per-stage bucket counts, active runs with rate and ETA, the runnable queue
and waiting reasons, the work owed per claim lane, the paused dependencies (``paused: gateway unavailable
since …``), the optional converters (available or what to install: :mod:`ki.adapters.convert.components`) and the
folder watcher's health per watched source."""

from __future__ import annotations

import json

import typer

from ki.cli.common import STATUS_WIDTH, bucket_counts, open_context, out, print_stage_ids, print_status, shown


def status(as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
           watch: bool = typer.Option(False, "--watch", help="refresh in place until Ctrl-C"),
           interval: float = typer.Option(2.0, min=0.1, max=3600, help="seconds between refreshes with --watch"),
           ) -> None:
    """Per-stage bucket counts (pending, running, done, failed, waiting, disabled, skipped, quarantined),
    the active runs (rate, ETA), the runnable queue and why the rest waits, the paused dependencies
    (circuit breakers) and the watched sources."""
    ctx = open_context()
    if watch and not as_json:
        watch_status(ctx, interval)
        return
    show_status(ctx, as_json)


def watch_status(ctx, interval: float) -> None:
    """Print the status every ``interval`` seconds until interrupted: in place on a terminal (the screen is
    cleared first), one block after another when piped."""
    import threading

    stop = threading.Event()
    try:
        while True:
            if out.is_terminal:
                out.clear()
            show_status(ctx, False)
            if not out.is_terminal:
                out.print()
            out.file.flush()
            if stop.wait(interval):
                return
    except KeyboardInterrupt:
        return


def show_status(ctx, as_json: bool) -> None:
    """One status report on stdout (see :func:`status`)."""
    from ki.workflows.sweeper import sweep_if_due

    sweep_if_due(ctx)  # opportunistic (hatchet provider only; spec: "the sweeper")
    counts = bucket_counts(ctx)
    from ki.adapters.breaker import describe_pauses
    from ki.cli.live import live_report, print_live
    from ki.store.blocked import blocked_counts
    from ki.store.lanes import lane_counts
    from ki.store.pauses import read_pauses
    from ki.store.unreadable import parked_unreadable
    from ki.store.watch import watch_health

    with ctx.db.engine.connect() as conn:
        watched = watch_health(conn)
        paused = describe_pauses(read_pauses(conn), ctx.config)
        lanes = lane_counts(conn)
        unreadable = [unreadable_entry(p) for p in parked_unreadable(conn, limit=UNREADABLE_SHOWN + 1000)]
        blocked = blocked_counts(conn)
    from ki.adapters.convert.components import converter_components, describe
    from ki.orchestration.budget import budget_wait

    budget = budget_wait(ctx.db.engine, ctx.config)
    converters = converter_components(ctx.config)
    live = live_report(ctx, counts)
    if as_json:
        from ki.core.taxonomies import STAGE_CONSOLE_NAMES

        out.print_json(json.dumps({"stages": counts, "blocked_by_quarantine": blocked,
                                   "stage_names": STAGE_CONSOLE_NAMES, "lanes": lanes,
                                   "watch": [w.model_dump(mode="json") for w in watched],
                                   "paused": paused, "budget": budget, "unreadable": unreadable,
                                   "converters": [c.as_dict() for c in converters], **live}, default=str))
    else:
        print_status(counts)
        print_blocked(blocked)
        print_stage_ids()
        print_live(live, blocked)
        busy = [f"{lane} {n['owed']} owed" + (f" ({n['running']} running)" if n["running"] else "")
                for lane, n in lanes.items() if n["owed"] or n["running"]]
        if busy:
            out.print("lanes: " + " · ".join(busy))
        print_paused(paused)
        print_budget(budget)
        print_unreadable(unreadable)
        for c in converters:
            out.print(describe(c), style=None if c.available else "yellow", markup=False,
                      width=min(out.width, STATUS_WIDTH))
        if watched:
            print_watch(watched)


def print_budget(budget: dict | None) -> None:
    """One line when a spending cap holds the model stages: the cap, the spend, how many rows wait, until when."""
    if budget is not None:
        out.print(f"{budget['message']}; {budget['waiting']} row(s) wait (reason budget)", style="yellow",
                  highlight=False)


#: Paths of files ki may not read that ``ki status`` prints (the JSON lists them all, up to 1,000 more).
UNREADABLE_SHOWN = 20


def unreadable_entry(parked) -> dict:
    """A file parked as unreadable (``ki.store.unreadable.ParkedFile``) as ``ki status --json`` and
    ``/api/status`` list it: source_id, source_object_id, path, mode, uid, gid."""
    d = parked.details
    return {"source_id": parked.source_id, "source_object_id": parked.source_object_id,
            "path": d.get("path") or parked.path, "mode": d.get("mode"), "uid": d.get("uid"), "gid": d.get("gid")}


def print_unreadable(unreadable: list[dict]) -> None:
    """The files the share will not let ki read: a count, then up to :data:`UNREADABLE_SHOWN` paths."""
    if not unreadable:
        return
    n = len(unreadable)
    out.print(f"{n} file{'s' if n != 1 else ''} ki may not read (waiting until "
              f"{'their' if n != 1 else 'its'} permissions change):", style="yellow", highlight=False)
    for u in unreadable[:UNREADABLE_SHOWN]:
        owner = f", owner {u['uid']}:{u['gid']}" if u.get("uid") is not None else ""
        out.print(f"  {shown(u['path'])}  mode {u['mode'] or '?'}{owner}", highlight=False, soft_wrap=True)
    if n > UNREADABLE_SHOWN:
        out.print(f"  … and {n - UNREADABLE_SHOWN} more (ki status --json lists them)", highlight=False)


def print_blocked(blocked: dict[str, int]) -> None:
    """One line when waiting rows will not move on their own: ``of the waiting, blocked by a quarantined
    stage: Classify 1, Index 1 …`` (they are in the waiting row of the table too)."""
    from ki.core.taxonomies import STAGE_CONSOLE_NAMES

    named = [f"{STAGE_CONSOLE_NAMES[s]} {n}" for s, n in blocked.items() if n]
    if named:
        out.print("of the waiting, blocked by a quarantined stage (they move once `ki quarantine retry` releases "
                  f"it): {', '.join(named)}", markup=False, highlight=False, width=min(out.width, 80))


def print_paused(paused: list[dict]) -> None:
    """One line per open circuit breaker: what is paused, since when, why, the next probe."""
    from datetime import UTC, datetime

    from rich.text import Text

    for p in paused:
        wait = max(0, round((p["next_probe_at"] - datetime.now(UTC)).total_seconds()))
        out.print(Text.assemble((p["message"], "yellow"), f": {', '.join(p['stages']) or 'no stage'} wait "
                                f"(next probe in {wait} s; {p['reason']})"))


def print_watch(watched) -> None:
    """The watcher health table: one row per watched source."""
    from rich.table import Table

    table = Table(title="watched sources")
    counts = ("seen", "handed over", "ignored")  # handed over: settled files passed to a sync
    for col in ("source", "mode", "state", "last event", "last full scan", *counts):
        table.add_column(col, justify="right" if col in counts else "left")
    for w in watched:
        state = w.state + (f": {w.paused_reason}" if w.paused_reason else "")
        if w.restarts:
            state += f" ({w.restarts} observer restart{'s' if w.restarts > 1 else ''})"
        ignored = str(w.files_ignored) + (" (" + ", ".join(f"{n} {r}" for r, n in sorted(
            w.ignored_reasons.items(), key=lambda kv: -kv[1])) + ")" if w.ignored_reasons else "")
        table.add_row(f"{w.source_id} {w.root}", w.mode, state,
                      f"{w.last_event_at:%Y-%m-%d %H:%M:%S}" if w.last_event_at else "-",
                      f"{w.last_full_scan_at:%Y-%m-%d %H:%M:%S}" if w.last_full_scan_at else "-",
                      str(w.files_seen), str(w.files_queued), ignored)
    out.print(table)


def register(app: typer.Typer) -> None:
    """Add ``ki status``."""
    app.command()(status)
