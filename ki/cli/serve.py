"""``ki serve``: the console page, the JSON API and ``/healthz`` on uvicorn (DESIGN.md ``ki/api/``), and the daily
archival pass (:class:`ki.orchestration.archive.DailyArchiver`)."""

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
    _warm_search(ctx)
    from ki.orchestration.archive import DailyArchiver

    archiver = DailyArchiver(ctx)  # cold history: one pass a day (ki.orchestration.archive)
    archiver.start()
    console.print(f"ki console on http://{host}:{port}/  (sign in with a token from `ki token create`)")
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level, proxy_headers=False, server_header=False)
    finally:
        archiver.stop()
        if stop is not None:
            stop.set()


def _warm_search(ctx) -> None:  # noqa: ANN001 - a PipelineContext
    """Warm the search path in the background while the server starts (lexicons, indexes, embedder), so the
    first ``/v1/search`` answers as fast as any other; a failure is logged, never fatal."""
    import logging
    import threading

    def run() -> None:
        from ki.index.search import warm

        try:
            logging.getLogger("ki.serve").info("search path warm in %.2f s", warm(ctx.db, ctx.config))
        except Exception:  # noqa: BLE001 - the first real search reports its own fault
            logging.getLogger("ki.serve").warning("warming the search path failed", exc_info=True)

    threading.Thread(target=run, name="ki-search-warm", daemon=True).start()


def register(app: typer.Typer) -> None:
    """Add ``ki serve``."""
    app.command("serve")(serve)
