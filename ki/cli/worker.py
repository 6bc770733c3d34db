"""``ki worker``: a Hatchet worker with ki's workflows and the run sweeper."""

from __future__ import annotations

import logging

import typer


def worker(
    slots: int = typer.Option(None, help="concurrent tasks (default KI_WORKER_SLOTS, 8)"),
    name: str = typer.Option(None, help="worker name shown by Hatchet"),
) -> None:
    """Run a Hatchet worker with ki's workflows (and the run sweeper) until SIGTERM/SIGINT."""
    from ki.cli.faults import configure_logging

    configure_logging(logging.INFO)
    from ki.workflows.worker import run_worker

    run_worker(slots=slots, name=name)


def register(app: typer.Typer) -> None:
    """Add ``ki worker``."""
    app.command()(worker)
