"""``ki source list|remove|rescan``: the registered sources."""

from __future__ import annotations

import json
import sys

import typer
from rich.table import Table

from ki.cli.common import console, open_context, out, shown

group = typer.Typer(no_args_is_help=True, help="List, rescan and remove sources")


def _when(at) -> str:
    return f"{at:%Y-%m-%d %H:%M}" if at else "never"


@group.command("list")
def source_list(as_json: bool = typer.Option(False, "--json", help="one JSON array of sources")) -> None:
    """Every source: id, folder, permission model (share, configured, or public: open to everyone), files (and
    how many are missing, and waiting because ki may not read them), last scan, last run's outcome,
    quarantined files, watcher state."""
    from ki.adapters.sources.overview import source_overview
    from ki.domain.access.share_permissions import PUBLIC

    ctx = open_context()
    with ctx.db.engine.connect() as conn:
        rows = source_overview(conn)
    if as_json:
        sys.stdout.write(json.dumps(rows, ensure_ascii=False) + "\n")
        return
    if not rows:
        out.print("no sources; add one with `ki insert FOLDER`")
        return
    table = Table()
    for col, justify in (("id", "right"), ("path", "left"), ("permissions", "left"), ("files", "right"),
                         ("last scan", "left"), ("last run", "left"), ("quarantined", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    watching = any(r["watcher"] for r in rows)
    if watching:
        table.add_column("watcher")
    for r in rows:
        run = f"{r['last_run']['id']} {r['last_run']['status']}" if r["last_run"] else "none"
        notes = [f"{r['missing']} missing"] * bool(r["missing"]) + \
            [f"{r['unreadable']} waiting: ki may not read"] * bool(r["unreadable"])
        model = "[bold red]public (everyone)[/]" if r["permissions"] == PUBLIC else r["permissions"]
        scanned = r["last_scan_at"][:16].replace("T", " ") if r["last_scan_at"] else "never"
        cells = [str(r["id"]), shown(r["path"]), model, f"{r['files']}" + (f" ({', '.join(notes)})" if notes else ""),
                 scanned, shown(run), str(r["quarantined"])]
        table.add_row(*cells, *([shown(r["watcher"] or "")] if watching else []))
    out.print(table)


@group.command("remove")
def source_remove(
    ref: str = typer.Argument(..., metavar="PATH|ID", help="the source's folder or its id (`ki source list`)"),
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation"),
) -> None:
    """Remove a source: every document of it is tombstoned (hidden from search and export); its history is
    kept. Inserting the folder again restores it."""
    from ki.adapters.sources.registry import SourceRefused, remove_source, resolve_source

    ctx = open_context()
    try:
        with ctx.db.engine.connect() as conn:
            src = resolve_source(conn, ref)
    except SourceRefused as exc:
        console.print(f"[red]{shown(str(exc))}[/]", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from exc
    if src.removed_at is not None:
        out.print(f"source {src.id} ({shown(src.root)}) was already removed at {_when(src.removed_at)}",
                  highlight=False)
        return
    what = f"source {src.id} ({shown(src.root)}): {src.files} files, {src.documents} documents"
    if not yes:
        if not sys.stdin.isatty():
            console.print(f"refused: removing {what} needs confirmation; pass --yes", highlight=False,
                          soft_wrap=True)
            raise typer.Exit(2)
        if not typer.confirm(f"Remove {what}? Their documents are tombstoned", default=False):
            console.print("nothing removed")
            raise typer.Exit(1)
    n = remove_source(ctx, src.id)
    out.print(f"removed {what}: {n} documents tombstoned, history kept", highlight=False)


@group.command("rescan")
def source_rescan(
    refs: list[str] = typer.Argument(None, metavar="[PATH|ID]...", help="sources to rescan (default: all)"),
    workers: int = typer.Option(None, help="worker threads (default KI_WORKERS, 8)"),
    wait_retries: float = typer.Option(None, help="wait this many seconds for retries falling due"),
) -> None:
    """Scan sources again and run every stage until idle (as `ki insert` does for its folder).

    Exit code: the worst of the sources' (0 completed, 1 a run failed, 3 a folder unavailable)."""
    from pathlib import Path

    from ki.adapters.sources.registry import SourceRefused, resolve_source
    from ki.cli.insert import scan_and_run
    from ki.store.sources import list_sources

    ctx = open_context()
    with ctx.db.engine.connect() as conn:
        try:
            sources = [resolve_source(conn, r) for r in refs] if refs else list_sources(conn)
        except SourceRefused as exc:
            console.print(f"[red]{shown(str(exc))}[/]", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from exc
    removed = [s for s in sources if s.removed_at is not None]
    if removed:
        console.print(f"[red]refused:[/] source {removed[0].id} ({shown(removed[0].root)}) was removed; "
                      f"`ki insert {shown(removed[0].root)}` restores it", highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    if not sources:
        out.print("no sources; add one with `ki insert FOLDER`")
        return
    worst = 0
    for src in sources:
        try:
            scan_and_run(ctx, src.id, Path(src.root), workers=workers, wait_retries=wait_retries)
        except typer.Exit as exc:
            worst = max(worst, exc.exit_code)
    if worst:
        raise typer.Exit(worst)


def register(app: typer.Typer) -> None:
    """Add ``ki source``."""
    app.add_typer(group, name="source")
