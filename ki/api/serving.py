"""Several uvicorn servers in one process and one event loop: ``ki serve``'s TCP port and its Unix socket
(:mod:`ki.api.local_socket`), sharing the process's warm search path and stopping together."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket

import uvicorn


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signals to :func:`serve_together` (uvicorn's own capture would stop only the
    server that installed its handler last, and re-raise the signal once that one has stopped)."""

    def capture_signals(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


def serve_together(servers: list[tuple[uvicorn.Config, socket.socket]]) -> None:
    """Serve each (config, listening socket) in one event loop (the first config's: uvloop when installed) until
    SIGINT or SIGTERM, or until one of them stops; then every server shuts down gracefully (a second SIGINT: at
    once) and this returns. Must run in the main thread (it installs the signal handlers, restored on return)."""
    running = [(_Server(config), listening) for config, listening in servers]

    def on_signal(sig: int, _frame: object) -> None:
        for server, _ in running:
            if server.should_exit and sig == signal.SIGINT:
                server.force_exit = True
            server.should_exit = True

    async def main() -> None:
        tasks = [asyncio.create_task(server.serve(sockets=[listening])) for server, listening in running]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for server, _ in running:
            server.should_exit = True
        await asyncio.gather(*tasks)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with asyncio.Runner(loop_factory=servers[0][0].get_loop_factory()) as runner:
            runner.run(main())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
