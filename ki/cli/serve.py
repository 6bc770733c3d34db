"""``ki serve``: the console page, the JSON API and ``/healthz`` on uvicorn (DESIGN.md ``ki/api/``)."""

from __future__ import annotations

import typer

from ki.cli.common import console, open_context


def serve(
    host: str = typer.Option("127.0.0.1", envvar="KI_SERVE_HOST", help="address to listen on"),
    port: int = typer.Option(8470, envvar="KI_SERVE_PORT", min=1, max=65535, help="port to listen on"),
    log_level: str = typer.Option("info", help="uvicorn log level (critical, error, warning, info, debug)"),
    watch: bool = typer.Option(False, "--watch", help="also watch every local-folder source (as `ki watch`)"),
) -> None:
    """Serve the console at http://HOST:PORT/ (same data directory and database as every ki command)."""
    import logging

    import uvicorn

    from ki.api.app import create_app
    from ki.cli.faults import configure_logging

    configure_logging(logging.INFO)
    ctx = open_context()
    app = create_app(ctx)
    stop = None
    if watch:
        from ki.cli.watch import start_watcher

        watcher, stop, _ = start_watcher(ctx, app.state.ki.launcher)
        console.print(f"watching {len(watcher.sources)} local-folder source(s)")
    console.print(f"ki console on http://{host}:{port}/  (sign in with a token from `ki token create`)")
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level, proxy_headers=False, server_header=False)
    finally:
        if stop is not None:
            stop.set()


def register(app: typer.Typer) -> None:
    """Add ``ki serve``."""
    app.command("serve")(serve)
