"""A TCP relay: accepts connections on one address and pipes each, byte for byte, to a TCP address or a
Unix socket (as a TCP load balancer in front of a service would).

Not a test module. ``tests/helpers/netns.py`` puts one on its bridge's address in front of each service a
network namespace must reach (the engine's gRPC and REST ports, PostgreSQL's Unix socket, the OpenSearch
node), since the session's services listen on the loopback interface or a Unix socket only.

A connection ends on both sides as soon as one side ends (EOF, reset): a client killed with ``kill -9``
closes its server-side connection at once (PostgreSQL ends the session and releases its locks, the engine
sees the worker's stream end), as it would without the relay.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading


class TcpRelay:
    """Relay connections accepted on ``(listen_host, port)`` to ``target``: ``(host, port)`` or a Unix
    socket path. :meth:`start` binds an ephemeral port (``port`` after it); ``accepted`` counts the
    connections relayed so far, ``open`` the ones open now. Thread-safe start/stop; runs its own event
    loop on a daemon thread."""

    def __init__(self, listen_host: str, target: tuple[str, int] | str) -> None:
        self.listen_host = listen_host
        self.target = target
        self.port = 0
        self.accepted = 0
        self.open = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task] = set()

    @property
    def address(self) -> str:
        """``host:port`` a client connects to."""
        return f"{self.listen_host}:{self.port}"

    def start(self) -> TcpRelay:
        """Listen now (raises OSError when the address cannot be bound). Returns self."""
        ready = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(asyncio.start_server(self._serve, self.listen_host, 0))
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:  # noqa: BLE001 - handed to start()
                failed.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name=f"relay-{self.target}", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failed:
            raise failed[0]
        return self

    def stop(self) -> None:
        """Stop listening and close every relayed connection."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.sleep(0)

        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.accepted += 1
        self.open += 1
        server_writer: asyncio.StreamWriter | None = None
        try:
            if isinstance(self.target, str):
                server_reader, server_writer = await asyncio.open_unix_connection(self.target)
            else:
                server_reader, server_writer = await asyncio.open_connection(*self.target)
            pipes = [asyncio.create_task(_pipe(client_reader, server_writer)),
                     asyncio.create_task(_pipe(server_reader, client_writer))]
            try:
                await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)  # one side ended: end both
            finally:
                for pipe in pipes:
                    pipe.cancel()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for writer in (client_writer, server_writer):
                if writer is not None:
                    writer.close()
            self.open -= 1
            self._tasks.discard(task)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
