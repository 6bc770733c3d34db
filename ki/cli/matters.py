"""``ki matters import FILE`` / ``ki matters list``: the firm's matters from practice management."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ki.cli.common import console, open_context, out, plain, shown

group = typer.Typer(no_args_is_help=True, help="Import and list the firm's matters")


@group.command("import")
def matters_import(
    file: Path = typer.Argument(..., help="CSV with a header row, or JSON lines (one matter per line)"),
) -> None:
    """Import matters from practice management: reference, title, client, client_number, opened, closed,
    practice_area, responsible, aliases. Re-importing updates, never duplicates; imported matters are
    authoritative for classification. Files classified before whose matter the import decides differently
    are re-opened for Classify (the next `ki insert` or watcher run classifies them again)."""
    from ki.core.errors import ConfigurationError
    from ki.domain.matters.known import known_references
    from ki.domain.matters.matter_list import read_matter_list
    from ki.store.matters import default_project_id, import_matters

    try:
        rows, errors = read_matter_list(file.expanduser())
    except ConfigurationError as exc:
        console.print(f"[red]{shown(exc)}[/]", highlight=False)
        raise typer.Exit(2) from exc
    ctx = open_context()
    with ctx.db.engine.connect() as conn:
        project_id = default_project_id(conn)
        before = known_references(conn, project_id)
    report = import_matters(ctx.db, project_id=project_id, rows=rows)
    for line, message in [(e.line, e.message) for e in errors] + list(report.refused or []):
        console.print(f"[yellow]line {line}:[/] {shown(message)}", markup=True, highlight=False)
    refused = len(errors) + len(report.refused or [])
    out.print(f"{report.created} created, {report.updated} updated, {report.unchanged} unchanged, "
              f"{refused} refused ({file})")
    if report.created or report.updated:
        _reopen(ctx, project_id, before)
    if refused and not (report.created or report.updated or report.unchanged):
        raise typer.Exit(1)


#: At most this many re-opened files are listed by name.
SHOW_REOPENED = 20


def _reopen(ctx, project_id: int, before) -> None:
    """Re-open Classify for the files the import decides differently (:mod:`ki.domain.matters.reopen`) and say so."""
    from ki.config.reference_patterns import formats_for
    from ki.domain.matters.known import known_references
    from ki.domain.matters.reopen import reopen_after_import

    firm = ctx.config.firm
    window = ctx.config.pipeline.text_window
    with ctx.db.engine.connect() as conn:
        after = known_references(conn, project_id)
    with console.status("checking the files classified before the import …") as status:
        report = reopen_after_import(
            ctx.db, project_id=project_id, before=before, after=after,
            formats=formats_for(tuple(firm.matter_reference_patterns) or None),
            firm_names=[n for n in [firm.name, *firm.aliases] if n], head_chars=window.head_chars,
            tail_chars=window.tail_chars,
            progress=lambda done, total: status.update(f"checking the files classified before the import: "
                                                       f"{done}/{total}"))
    if not report.changed:
        out.print(f"0 files re-opened ({report.examined} classified files keep their matter)")
        return
    out.print(f"{report.reopened} files re-opened for Classify: the import decides their matter differently "
              f"({report.examined} classified files checked); run `ki insert` to classify them again")
    for path, then, now in report.changed[:SHOW_REOPENED]:
        out.print(f"  {plain(path)}: {plain(then or 'unassigned')} → {plain(now or 'unassigned')}",
                  markup=False, highlight=False)
    if len(report.changed) > SHOW_REOPENED:
        out.print(f"  … and {len(report.changed) - SHOW_REOPENED} more", markup=False, highlight=False)


@group.command("list")
def matters_list(as_json: bool = typer.Option(False, "--json", help="one JSON object per matter, per line")) -> None:
    """The matters: reference, client, title, files on it; imported ones marked."""
    from ki.store.matters import default_project_id, list_matters

    ctx = open_context()
    with ctx.db.engine.connect() as conn:
        rows = list_matters(conn, project_id=default_project_id(conn))
    if as_json:
        for r in rows:
            out.print(json.dumps(r, ensure_ascii=False), markup=False, highlight=False, soft_wrap=True)
        return
    if not rows:
        out.print("no matters (import them with `ki matters import FILE`, or run `ki insert`)")
    for r in rows:
        mark = "imported" if r["imported"] else "placeholder" if r["placeholder"] else "found"
        out.print(f"{plain(r['reference']):<20} {mark:<11} {r['files']:>6} files  "
                  f"{plain(r['client'] or ''):<34.34} {plain(r['title'])}",
                  markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``ki matters``."""
    app.add_typer(group, name="matters")
