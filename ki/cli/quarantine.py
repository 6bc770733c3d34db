"""``ki quarantine list|retry``: inspect and release quarantined files."""

from __future__ import annotations

import json

import typer

from ki.cli.common import console, open_context, out, plain, shown

group = typer.Typer(no_args_is_help=True, help="Inspect and release quarantined files")


@group.command("list")
def quarantine_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """Quarantined files: path, stage, reason, attempts, message."""
    from ki.orchestration.quarantine import list_quarantine

    ctx = open_context()
    entries = list_quarantine(ctx)
    if as_json:
        out.print_json(json.dumps([e.model_dump() for e in entries]))
        return
    if not entries:
        out.print("no quarantined files")
    for e in entries:
        out.print(f"{e.source_object_id:>7}  {e.stage:<10} {e.error.get('reason') or e.error.get('class')}, "
                  f"{e.attempts} attempt{'' if e.attempts == 1 else 's'}: {plain(e.path)}\n"
                  f"         {plain(str(e.error.get('message', ''))[:300])}", markup=False, highlight=False)


@group.command("retry")
def quarantine_retry(
    source_object_id: int = typer.Argument(..., help="the id shown by `ki quarantine list`"),
    stage: str = typer.Option(None, help="stage to release (the earliest quarantined one is released)"),
    run: bool = typer.Option(True, help="launch a run at once"),
) -> None:
    """Release a quarantined file with a fresh attempt budget and run its work again.

    Exit 0 when released (and, with ``--run``, its work ran: a file that quarantines again is reported,
    not an error), 2 for an id that names no object, an object with nothing quarantined or an unknown
    ``--stage`` (nothing is written), 1 when the run itself failed. The run waits only for the work
    this retry released (the object and its embedded documents), not for other sources' work.
    """
    from ki.launch import launch_insertion
    from ki.orchestration.quarantine import retry_quarantined

    ctx = open_context()
    try:
        resp = retry_quarantined(ctx, source_object_id, stage=stage)
    except (LookupError, ValueError) as exc:
        console.print(f"[red]{shown(exc)}[/]", highlight=False)
        raise typer.Exit(2) from exc
    out.print_json(resp.model_dump_json())
    if resp.note:
        console.print(f"[yellow]{shown(resp.note)}[/]", highlight=False)
    if resp.deterministic:
        console.print("[yellow]the original failure was deterministic: it will quarantine again unless "
                      "the file changed[/]")
    if run:
        summary = launch_insertion(ctx, trigger="quarantine_retry", label="Retry", released_object=source_object_id)
        c = summary.counters
        console.print(f"run {summary.run_id} {summary.status}: {c.processed} stage executions of object "
                      f"{source_object_id} ({c.done} done, {c.skipped} skipped, {c.retried} retried, "
                      f"{c.quarantined} quarantined)", highlight=False)
        if summary.status == "failed":
            console.print(f"[red]run failed:[/] {shown(summary.error)}", highlight=False)
            raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``ki quarantine``."""
    app.add_typer(group, name="quarantine")
