"""``ki worker``: a Hatchet worker with ki's workflows and the run sweeper.

Without a Hatchet engine to serve (no ``HATCHET_CLIENT_TOKEN``, the ``hatchet`` extra not installed,
a client configuration the SDK refuses) it says so in three lines — what is wrong, both ways out
(connect an engine, or do without a worker: the ``local`` provider) as they fit the configured
``components.orchestrator_provider``, and where ``ki.log`` is — and exits 2 (README "Exit codes").
"""

from __future__ import annotations

import logging

import typer

from ki.cli.common import console, shown

#: The configuration field naming the orchestrator provider.
PROVIDER_FIELD = "components.orchestrator_provider"


def worker(
    slots: int = typer.Option(None, help="concurrent tasks (default KI_WORKER_SLOTS, 8)"),
    name: str = typer.Option(None, help="worker name shown by Hatchet"),
) -> None:
    """Run a Hatchet worker with ki's workflows (and the run sweeper) until SIGTERM/SIGINT."""
    from ki.cli.faults import EXIT_USAGE, configure_logging, log_path
    from ki.core.errors import OrchestratorUnavailable

    configure_logging(logging.INFO)
    from ki.app.launch import hand_off_to_insertion
    from ki.cli.common import open_context, serve_metrics
    from ki.config.process import ProcessSettings, current
    from ki.workflows.worker import run_worker

    if current(ProcessSettings).metrics_port is not None:  # only then the database is opened here
        serve_metrics(open_context())

    try:
        run_worker(hand_off=hand_off_to_insertion, slots=slots, name=name)
    except OrchestratorUnavailable as exc:
        what, todo = no_engine(str(exc), configured_provider())
        console.print(f"[red]ki:[/] {shown(what)}", highlight=False)
        console.print(f"what to do: {shown(todo)}", highlight=False)
        console.print(f"details: {shown(str(log_path()))}", highlight=False)
        raise typer.Exit(EXIT_USAGE) from exc


def configured_provider() -> str:
    """``components.orchestrator_provider`` as configured (``local`` when the configuration cannot be read)."""
    from ki.cli.faults import data_dir
    from ki.config.loader import load_config

    try:
        return load_config(data_dir()).components.orchestrator_provider
    except Exception:  # noqa: BLE001 - a bad configuration is reported by the commands that use it
        return "local"


def no_engine(cause: str, provider: str) -> tuple[str, str]:
    """(what, what to do) when ``ki worker`` has no Hatchet engine to serve: ``cause`` is the
    :class:`~ki.core.errors.OrchestratorUnavailable` message, ``provider`` the configured one."""
    if "not installed" in cause:
        connect = "install the Hatchet SDK (pip install 'ki[hatchet]'), start an engine and set HATCHET_CLIENT_TOKEN"
    elif "TOKEN is not set" in cause:
        cause = "no Hatchet engine is configured: HATCHET_CLIENT_TOKEN is not set"
        connect = "start a Hatchet engine and set HATCHET_CLIENT_TOKEN (and HATCHET_CLIENT_HOST_PORT) to its token"
    else:
        lines = [ln.strip() for ln in cause.splitlines() if ln.strip() and "errors.pydantic.dev" not in ln]
        cause = "; ".join(ln.split(" [type=")[0] for ln in lines if not ln.startswith("1 validation error"))
        connect = "fix the HATCHET_CLIENT_* variables (token, host:port) of the engine"
    from ki.config.loader import env_pinned_fields

    pinned = env_pinned_fields().get(PROVIDER_FIELD)
    if pinned:
        other = (f"or go without a worker: unset {pinned} (it pins the provider to {provider}) and "
                 "`ki insert` runs every stage in its own process")
        connect += " (README, section Hatchet)"
    elif provider == "hatchet":
        other = ("or go without a worker: `ki config set components.orchestrator_provider local` and `ki insert` "
                 "runs every stage in its own process")
        connect += " (README, section Hatchet)"
    else:
        other = ("or go without a worker: components.orchestrator_provider is local, so `ki insert` already runs "
                 "every stage in its own process")
        connect += ", then `ki config set components.orchestrator_provider hatchet` (README, section Hatchet)"
    return f"`ki worker` cannot serve a Hatchet engine: {cause}", f"either {connect}; {other}"


def register(app: typer.Typer) -> None:
    """Add ``ki worker``."""
    app.command()(worker)
