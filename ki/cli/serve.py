"""``ki serve``: the console page, the JSON API and ``/healthz`` on uvicorn (DESIGN.md ``ki/api/``), and the daily
archival pass (:class:`ki.orchestration.archive.DailyArchiver`)."""

from __future__ import annotations

import errno
import os
import socket

import typer

from ki.cli.common import console, open_context
from ki.cli.faults import EXIT_PORT_IN_USE

#: Database connections the server keeps (as many again at peaks: 40, the worker threads FastAPI runs requests on),
#: so concurrent requests neither wait for a connection nor open and close one each.
SERVE_POOL_SIZE = 20

#: The cyclic garbage collector's first-generation threshold in ``ki serve`` (Python's default: 700 allocations).
#: A request allocates thousands of short-lived objects, nearly all freed by reference counting; at the default
#: the collector ran every few requests and took about a tenth of the server's CPU under 32 clients.
SERVE_GC_GEN0 = 50_000


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
    from ki.api.local_socket import bind_local_socket, create_local_app, same_user_protocol
    from ki.api.serving import serve_together
    from ki.cli.faults import configure_logging
    from ki.config.data_dir import serve_socket_path

    configure_logging(logging.INFO)
    sock = listen(host, port)  # before the database: a taken port is said at once, in one line
    ctx = open_context(pool_size=SERVE_POOL_SIZE)
    app = create_app(ctx)
    stop = None
    if watch:
        from ki.cli.watch import start_watcher

        watcher, stop, _ = start_watcher(ctx, app.state.ki.launcher)
        console.print(f"watching {len(watcher.sources)} local-folder source(s)")
    _warm_search(ctx)
    _tune_gc()
    from ki.orchestration.archive import DailyArchiver

    archiver = DailyArchiver(ctx)  # cold history: one pass a day (ki.orchestration.archive)
    archiver.start()
    console.print(f"ki console on http://{host}:{port}/  (sign in with a token from `ki token create`)")
    local = bind_local_socket(serve_socket_path(ctx.settings.data_dir))
    try:
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level, proxy_headers=False,
                                server_header=False)
        servers = [(config, sock)]
        if local is not None:
            console.print(f"ki search asks this server on {local.path}", highlight=False, markup=False)
            servers.append((uvicorn.Config(create_local_app(ctx), log_level=log_level, lifespan="off",
                                           http=same_user_protocol(os.getuid()), proxy_headers=False,
                                           server_header=False), local.sock))
        serve_together(servers)
    finally:
        if local is not None:
            local.close()
        archiver.stop()
        if stop is not None:
            stop.set()


def _tune_gc() -> None:
    """Move what start-up allocated (modules, the app, settings) out of the collector's sight (``gc.freeze``)
    and raise the first generation's threshold to :data:`SERVE_GC_GEN0`: the long-lived heap is not re-scanned
    on every collection, and collections are rarer. Memory stays bounded: cycles are still collected."""
    import gc

    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(SERVE_GC_GEN0, gen1, gen2)


def _warm_search(ctx) -> None:  # noqa: ANN001 - a PipelineContext
    """Warm the search path in the background while the server starts (lexicons, indexes, embedder), so the
    first ``/v1/search`` answers as fast as any other; a failure is logged, never fatal."""
    import logging
    import threading

    def run() -> None:
        from ki.adapters.search.search import warm

        try:
            logging.getLogger("ki.serve").info("search path warm in %.2f s", warm(ctx.db, ctx.config))
        except Exception:  # noqa: BLE001 - the first real search reports its own fault
            logging.getLogger("ki.serve").warning("warming the search path failed", exc_info=True)

    threading.Thread(target=run, name="ki-search-warm", daemon=True).start()


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (uvicorn listens on it).

    A port another process holds ends the command (README "Exit codes": 9) with one line naming the
    holder when the system tells it: ``port 8470 is in use by pid 4711 (python3 -m http.server 8470);
    use --port``. Any other bind error (an address this machine does not have, a privileged port) is
    one line and exit 2.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a TIME_WAIT port is free
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            console.print(f"port {port} is in use by {port_holder(port)}; use --port", markup=False,
                          highlight=False)
            raise typer.Exit(EXIT_PORT_IN_USE) from exc
        console.print(f"cannot listen on {host}:{port}: {exc.strerror or exc}; use --host or --port",
                      markup=False, highlight=False)
        raise typer.Exit(2) from exc
    return sock


def port_holder(port: int) -> str:
    """Who listens on TCP ``port``: ``pid 4711 (python3 -m http.server 8470)``, or ``another process``
    when the system does not say (another user's process, no permission to list sockets)."""
    import psutil

    try:
        pids = sorted({c.pid for c in psutil.net_connections(kind="tcp")
                       if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN and c.pid})
    except (psutil.Error, OSError):
        pids = []
    if not pids:
        return "another process"
    try:
        command = " ".join(psutil.Process(pids[0]).cmdline())[:120]
    except psutil.Error:
        command = ""
    return f"pid {pids[0]}" + (f" ({command})" if command else "")


def register(app: typer.Typer) -> None:
    """Add ``ki serve``."""
    app.command("serve")(serve)
