"""The ``ki`` command.

``ki insert PATH`` registers (or reuses) a local-folder source, scans it, launches
an insertion run and shows a progress bar per stage, then the bucket summary and
where quarantined files are. ``status``, ``search``, ``quarantine list`` take
``--json`` for scripts. The data directory is ``KI_DATA_DIR`` (default: the
platform's user data directory).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ki.errors import ConfigurationError, KiError, SourceUnavailable
from ki.taxonomies import BUCKETS, PIPELINE_STAGE_ORDER, STAGE_CONSOLE_NAMES

app = typer.Typer(add_completion=False, no_args_is_help=True, help="ki: durable document insertion")
quarantine_app = typer.Typer(no_args_is_help=True, help="Inspect and release quarantined files")
config_app = typer.Typer(no_args_is_help=True, help="Show and edit the saved configuration")
db_app = typer.Typer(no_args_is_help=True, help="The embedded PostgreSQL")
app.add_typer(quarantine_app, name="quarantine")
app.add_typer(config_app, name="config")
app.add_typer(db_app, name="db")

console = Console(stderr=True)
out = Console(width=None if sys.stdout.isatty() else 160)


def _context():
    from ki.orchestration.context import PipelineContext

    try:
        return PipelineContext.open()
    except ConfigurationError as exc:
        console.print(f"[red]configuration error:[/] {exc}")
        raise typer.Exit(2) from exc


def _buckets(ctx) -> dict[str, dict[str, int]]:
    from ki.store.claims import bucket_counts

    with ctx.db.engine.connect() as conn:
        return bucket_counts(conn)


FINISHED_BUCKETS = ("done", "skipped", "disabled", "quarantined")


@app.command()
def insert(
    path: Path = typer.Argument(..., help="folder to insert (a local-folder source)"),
    workers: int = typer.Option(None, help="worker threads (default KI_WORKERS, 8)"),
    wait_retries: float = typer.Option(None, help="wait this many seconds for retries falling due"),
) -> None:
    """Scan PATH and run every stage until idle; exit 0 when the run completes."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from ki.orchestration.insertion import launch_insertion
    from ki.sources.scan import register_local_source, scan_source

    ctx = _context()
    root = path.expanduser().resolve()
    source_id = register_local_source(ctx, root)
    try:
        report = scan_source(ctx, source_id)
    except SourceUnavailable as exc:
        console.print(f"[red]source unavailable:[/] {exc} — nothing was changed; run again when it is back")
        raise typer.Exit(3) from exc
    console.print(
        f"scanned {root}: {report.listed} files, {report.new} new, {report.changed} changed, "
        f"{report.unchanged} unchanged, {len(report.tombstoned)} tombstoned"
        + (" [yellow](empty listing of a non-empty source: nothing tombstoned)[/]" if report.suspicious else "")
    )
    enabled = [s for s in PIPELINE_STAGE_ORDER if ctx.config.pipeline.stage(s).enabled]
    progress = Progress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=console,
                        disable=not console.is_terminal and not _force_progress())
    tasks = {s: progress.add_task(STAGE_CONSOLE_NAMES[s], total=None, note="") for s in enabled}
    last = [0.0]

    def on_tick(status) -> None:
        now = time.monotonic()
        if now - last[0] < 0.5:
            return
        last[0] = now
        counts = _buckets(ctx)
        for s in enabled:
            c = counts[s]
            total = sum(c.values())
            finished = sum(c[b] for b in FINISHED_BUCKETS)
            note = f"[red]{c['quarantined']} quarantined[/]" if c["quarantined"] else ""
            if c["failed"]:
                note += f" [yellow]{c['failed']} awaiting retry[/]"
            progress.update(tasks[s], completed=finished, total=total, note=note)
        if status.waiting_for_retry is not None:
            due, n = status.waiting_for_retry
            console.print(f"waiting for {n} retr{'y' if n == 1 else 'ies'} due at {due:%H:%M:%S} UTC", end="\r")

    started = time.monotonic()
    with progress:
        summary = launch_insertion(ctx, trigger="cli", source_id=source_id, workers=workers,
                                   wait_for_retries_seconds=wait_retries, on_tick=on_tick, wait=True)
        last[0] = 0.0
        from ki.orchestration.runner import RunnerStatus

        on_tick(RunnerStatus(summary.counters, 0))
    elapsed = time.monotonic() - started
    c = summary.counters
    console.print(f"run {summary.run_id} {summary.status} in {elapsed:.1f} s: {c.processed} stage executions "
                  f"({c.done} done, {c.skipped} skipped, {c.retried} retried, {c.quarantined} quarantined)")
    _print_status(_buckets(ctx))
    from ki.orchestration.quarantine import list_quarantine

    quarantined = list_quarantine(ctx, limit=20)
    if quarantined:
        console.print(f"[red]quarantined files[/] (first {len(quarantined)}; `ki quarantine list` for all):")
        for e in quarantined:
            console.print(f"  {e.path}  [{e.stage}] {e.error.get('reason') or e.error.get('class')}: "
                          f"{str(e.error.get('message', ''))[:120]}")
    if summary.status != "completed":
        console.print(f"[red]run failed:[/] {summary.error}")
        raise typer.Exit(1)


def _force_progress() -> bool:
    import os

    return os.environ.get("KI_PROGRESS") == "1"


def _print_status(counts: dict[str, dict[str, int]]) -> None:
    table = Table(title="processing_state by stage")
    table.add_column("stage")
    for b in BUCKETS:
        table.add_column(b, justify="right")
    for s in PIPELINE_STAGE_ORDER:
        table.add_row(s, *[str(counts[s][b]) for b in BUCKETS])
    out.print(table)


@app.command()
def status(as_json: bool = typer.Option(False, "--json", help="machine-readable output")) -> None:
    """Per-stage bucket counts (pending, running, done, failed, waiting, disabled, skipped, quarantined)."""
    ctx = _context()
    from ki.orchestration.sweeper import sweep_if_due

    sweep_if_due(ctx)  # opportunistic (hatchet provider only; spec: "the sweeper")
    counts = _buckets(ctx)
    if as_json:
        out.print_json(json.dumps({"stages": counts}))
    else:
        _print_status(counts)


@app.command()
def search(
    query: str = typer.Argument(..., help="words, \"phrases\", -excluded"),
    as_principal: list[str] = typer.Option(None, "--as", help="search as this principal (repeat for groups; "
                                           "default: the local operator, all grants)"),
    matter: str = typer.Option(None, "--matter", help="only this matter (reference)"),
    doc_type: str = typer.Option(None, "--type", help="only this document type (ontology node, ancestors match)"),
    since: str = typer.Option(None, "--since", help="only documents dated on or after YYYY-MM-DD"),
    mode: str = typer.Option("hybrid", help="hybrid, lexical or vector"),
    limit: int = typer.Option(10, min=1, max=200),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Hybrid search (German + English full text and vectors, fused by RRF) over indexed documents."""
    from datetime import date

    from ki.index.search import search as run_search

    try:
        since_day = date.fromisoformat(since) if since else None
    except ValueError as exc:
        console.print(f"[red]--since must be a date YYYY-MM-DD, not {since!r}[/]")
        raise typer.Exit(2) from exc
    if mode not in ("hybrid", "lexical", "vector"):
        console.print(f"[red]--mode must be hybrid, lexical or vector, not {mode!r}[/]")
        raise typer.Exit(2)
    ctx = _context()
    response = run_search(ctx.db, query, principals=as_principal or None, operator=not as_principal,
                          matter=matter, doc_type=doc_type, since=since_day, limit=limit, mode=mode,
                          config=ctx.config)
    for note in response.notes:
        console.print(f"[yellow]{note}[/]")
    if as_json:
        out.print_json(json.dumps([h.model_dump() for h in response.hits]))
        return
    if not as_principal:
        console.print("[dim]searching as the local operator (all grants); use --as PRINCIPAL to check access[/]")
    if not response.hits:
        out.print("no results")
    for i, h in enumerate(response.hits, 1):
        facts = " ".join(f"{k} {v}" for k, v in (("matter", h.matter), ("type", h.doc_type)) if v)
        out.print(f"{i:>2}. [bold]{h.path}[/]  (score {h.score:.3f}{', ' + facts if facts else ''})")
        out.print(f"    {h.snippet}", markup=False, highlight=False)


@app.command()
def export(
    as_json: bool = typer.Option(True, "--json", help="one JSON object per line (the only format)"),
    root: Path = typer.Option(None, help="only the source registered for this folder"),
) -> None:
    """What Classify and Relate concluded: one JSON object per live source object, one per line."""
    from ki.export import export_rows

    ctx = _context()
    root_s = str(root.expanduser().resolve()) if root else None
    for row in export_rows(ctx.db, root=root_s):
        sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")


@app.command()
def worker(
    slots: int = typer.Option(None, help="concurrent tasks (default KI_WORKER_SLOTS, 8)"),
    name: str = typer.Option(None, help="worker name shown by Hatchet"),
) -> None:
    """Run a Hatchet worker with ki's workflows (and the run sweeper) until SIGTERM/SIGINT."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from ki.workflows.worker import run_worker

    run_worker(slots=slots, name=name)


@quarantine_app.command("list")
def quarantine_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """Quarantined files: path, stage, reason, attempts, message."""
    from ki.orchestration.quarantine import list_quarantine

    ctx = _context()
    entries = list_quarantine(ctx)
    if as_json:
        out.print_json(json.dumps([e.model_dump() for e in entries]))
        return
    if not entries:
        out.print("no quarantined files")
    for e in entries:
        out.print(f"{e.source_object_id:>7}  {e.stage:<10} {e.error.get('reason') or e.error.get('class')}: "
                  f"{e.path}\n         {str(e.error.get('message', ''))[:300]}", markup=False, highlight=False)


@quarantine_app.command("retry")
def quarantine_retry(
    source_object_id: int = typer.Argument(..., help="the id shown by `ki quarantine list`"),
    stage: str = typer.Option(None, help="stage to release (the earliest quarantined one is released)"),
    run: bool = typer.Option(True, help="launch a run at once"),
) -> None:
    """Release a quarantined file with a fresh attempt budget and run it again."""
    from ki.orchestration.insertion import launch_insertion
    from ki.orchestration.quarantine import retry_quarantined

    ctx = _context()
    try:
        resp = retry_quarantined(ctx, source_object_id, stage=stage)
    except (LookupError, ValueError) as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc
    out.print_json(resp.model_dump_json())
    if resp.deterministic:
        console.print("[yellow]the original failure was deterministic: it will quarantine again unless "
                      "the file changed[/]")
    if run:
        summary = launch_insertion(ctx, trigger="quarantine_retry")
        console.print(f"run {summary.run_id} {summary.status}: {summary.counters.quarantined} quarantined")


@config_app.command("show")
def config_show() -> None:
    """The effective configuration (saved file + environment pins), with pinned fields listed."""
    from ki.config.loader import env_pinned_fields

    ctx = _context()
    data = ctx.config.model_dump(mode="json")
    for name, stage in data["pipeline"]["stages"].items():
        stage["producer_version"] = ctx.config.pipeline.producer_version(name)
    out.print_json(json.dumps({"config": data, "env_pinned": env_pinned_fields(),
                               "data_dir": str(ctx.settings.data_dir)}))


@config_app.command("set")
def config_set(key: str = typer.Argument(..., help="dotted field, e.g. pipeline.max_file_mb"),
               value: str = typer.Argument(..., help="new value (JSON or plain text)")) -> None:
    """Edit one field of the saved configuration (refused when pinned by the environment)."""
    from ki.config.loader import ProcessSettings, set_config_value

    settings = ProcessSettings()
    try:
        set_config_value(settings.data_dir, key, value)
    except ConfigurationError as exc:
        console.print(f"[red]refused:[/] {exc}")
        raise typer.Exit(2) from exc
    out.print(f"{key} = {value}")


@db_app.command("stop")
def db_stop() -> None:
    """Stop the embedded PostgreSQL of this data directory (it otherwise keeps running)."""
    from ki.config.loader import ProcessSettings
    from ki.store.db import stop_embedded_server

    settings = ProcessSettings()
    stopped = stop_embedded_server(settings.data_dir / "pg")
    out.print("stopped" if stopped else "not running")


def main() -> None:  # pragma: no cover - console entry
    try:
        app()
    except KiError as exc:
        console.print(f"[red]{type(exc).__name__}:[/] {exc}")
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    main()
