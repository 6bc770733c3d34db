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
    from ki.core.taxonomies import stage_label

    if not entries:
        out.print("no quarantined files")
    for e in entries:
        out.print(f"{e.source_object_id:>7}  {stage_label(e.stage)}: {e.error.get('reason') or e.error.get('class')}, "
                  f"{e.attempts} attempt{'' if e.attempts == 1 else 's'}: {plain(e.path)}\n"
                  f"         {plain(str(e.error.get('message', ''))[:300])}", markup=False, highlight=False)


@group.command("retry")
def quarantine_retry(
    source_object_id: int = typer.Argument(..., help="the id shown by `ki quarantine list`"),
    stage: str = typer.Option(None, help="stage to release (the earliest quarantined one is released)"),
    run: bool = typer.Option(True, help="launch a run at once"),
    as_json: bool = typer.Option(False, "--json", help="print what the retry did as JSON instead of text"),
) -> None:
    """Release a quarantined file with a fresh attempt budget and run its work again.

    Exit 0 when released (and, with ``--run``, its work ran: a file that quarantines again is reported,
    not an error), 2 for an id that names no object, an object with nothing quarantined or an unknown
    ``--stage`` (nothing is written), 1 when the run itself failed. The run waits only for the work
    this retry released (the object and its embedded documents), not for other sources' work.

    Prints on stdout what was released, what was invalidated and the outcome as text
    (:func:`retry_lines`, :func:`outcome_line`); with ``--json`` the retry's JSON record instead.
    """
    from ki.app.launch import launch_insertion
    from ki.orchestration.quarantine import retry_quarantined

    ctx = open_context()
    try:
        resp = retry_quarantined(ctx, source_object_id, stage=stage)
    except (LookupError, ValueError) as exc:
        console.print(f"[red]{shown(exc)}[/]", highlight=False)
        raise typer.Exit(2) from exc
    if as_json:
        out.print_json(resp.model_dump_json())
    else:
        for line in retry_lines(resp):
            out.print(line, markup=False, highlight=False, soft_wrap=True)
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
        if not as_json:
            out.print(outcome_line(source_object_id, resp.released_stage, c.quarantined, summary.status),
                      markup=False, highlight=False, soft_wrap=True)
        if summary.status == "failed":
            console.print(f"[red]run failed:[/] {shown(summary.error)}", highlight=False)
            raise typer.Exit(1)


def retry_lines(resp) -> list[str]:
    """What a retry released and invalidated, for people: ``released Parse (convert) of object 12 with a
    fresh budget of 3 attempts``, ``invalidated: Index (index), …`` (or ``none``), ``previous error: …``."""
    from ki.core.taxonomies import stage_label

    invalidated = ", ".join(stage_label(s) for s in resp.invalidated_stages) or "none (no later stage had run)"
    error = resp.previous_error
    lines = [f"released {stage_label(resp.released_stage)} of object {resp.source_object_id} with a fresh budget "
             f"of {resp.max_attempts} attempt{'' if resp.max_attempts == 1 else 's'}",
             f"invalidated: {invalidated}"]
    if error:
        lines.append(f"previous error: {error.get('reason') or error.get('class') or 'unknown'}"
                     + (f": {plain(str(error.get('message', ''))[:200])}" if error.get("message") else ""))
    return lines


def outcome_line(source_object_id: int, stage: str, quarantined: int, status: str) -> str:
    """The retry's outcome in one line: ran through, quarantined again, or the run's status."""
    from ki.core.taxonomies import stage_label

    if status == "failed":
        return f"outcome: the run failed; object {source_object_id} stays released"
    if quarantined:
        return f"outcome: object {source_object_id} was quarantined again ({quarantined} stage execution" \
               f"{'' if quarantined == 1 else 's'}; `ki quarantine list` says why)"
    if status != "completed":
        return f"outcome: the run is {status}; `ki status` shows its progress"
    return f"outcome: {stage_label(stage)} of object {source_object_id} and the stages after it ran through"


def register(app: typer.Typer) -> None:
    """Add ``ki quarantine``."""
    app.add_typer(group, name="quarantine")
