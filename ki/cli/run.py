"""``ki run list [--json]`` and ``ki run cancel RUN_ID``: the run ledger and a run's cancellation
(:mod:`ki.app.cancel`)."""

from __future__ import annotations

import json

import typer

from ki.cli.common import console, open_context, out, shown

group = typer.Typer(no_args_is_help=True, help="List runs and cancel one")

STATUSES = ("queued", "running", "completed", "failed", "cancelled")


@group.command("list")
def run_list(
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
    limit: int = typer.Option(20, min=1, max=1000, help="newest runs shown"),
    status: str = typer.Option(None, help=f"only runs in this status ({', '.join(STATUSES)})"),
) -> None:
    """Runs newest first: id, kind, provider, status (``cancelling`` while a cancellation is being carried out)
    and the counters (stage executions: processed, done, skipped, retried, quarantined). Exit 2 for an unknown
    ``--status``."""
    if status is not None and status not in STATUSES:
        console.print(f"[red]unknown status {shown(status)!r}; one of {', '.join(STATUSES)}[/]", highlight=False)
        raise typer.Exit(2)
    from ki.store import runs

    ctx = open_context()
    with ctx.db.engine.connect() as conn:
        rows, total = runs.runs_page(conn, status=status, limit=limit)
    if as_json:
        out.print_json(json.dumps({"runs": [r.model_dump(mode="json") for r in rows], "total": total}))
        return
    if not rows:
        out.print("no runs")
        return
    out.print(f"{'id':>6}  {'kind':<15} {'provider':<8} {'status':<10} {'processed':>9} {'done':>7} {'skipped':>7} "
              f"{'retried':>7} {'quarant.':>8}  started", highlight=False)
    for r in rows:
        shown_status = "cancelling" if r.status in runs.ACTIVE_RUN_STATUSES and r.cancel_requested_at else r.status
        out.print(f"{r.id:>6}  {r.kind:<15} {r.provider:<8} {shown_status:<10} {r.processed:>9} {r.done:>7} "
                  f"{r.skipped:>7} {r.retried:>7} {r.quarantined:>8}  {r.started_at:%Y-%m-%d %H:%M:%S}",
                  highlight=False)
    if total > len(rows):
        out.print(f"({len(rows)} of {total} runs; --limit shows more)", highlight=False)


@group.command("cancel")
def run_cancel(
    run_id: int = typer.Argument(..., help="the id shown by `ki run list`"),
    wait: float = typer.Option(30.0, min=0, help="seconds to wait for a local run to end"),
) -> None:
    """Cancel an active insertion run: it claims nothing more; the stages it holds finish; it ends ``cancelled``
    with its counters; every row it did not finish keeps its state, and the next ``ki insert`` resumes there.

    Exit 0 when the run is cancelled (or, past ``--wait``, still finishing the stages it holds), 2 for an unknown
    run, a run that already ended or a sync run (nothing is written)."""
    from ki.app.cancel import RunNotCancellable, cancel_run

    ctx = open_context()
    try:
        outcome = cancel_run(ctx, run_id, actor="cli", wait_seconds=wait)
    except RunNotCancellable as exc:
        console.print(f"[red]{shown(exc)}[/]", highlight=False)
        raise typer.Exit(2) from exc
    out.print(outcome.message, highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``ki run``."""
    app.add_typer(group, name="run")
