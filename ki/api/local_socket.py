"""``ki serve``'s Unix socket: the local operator's search (:mod:`ki.app.local_search`), and nothing else.

``ki search`` asks a running server here instead of loading the search path itself (docs/design-decisions.md
"Cold CLI search through ki serve's socket"). The socket is ``serve.sock`` in the data directory, created
0600 (the data directory itself is the user's); it answers ``POST /local/search`` only, with the same code
``ki search --direct`` runs (:func:`ki.app.local_search.answer`), on the server's warm search path. A
connection from a process of another user (``SO_PEERCRED``) is closed unanswered. The route exists on this
socket alone: the TCP port's app (:func:`ki.api.app.create_app`) has no such route, and no token is asked here
— the caller is the local operator, as ``ki search`` on this machine is.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from ki.app.local_search import (
    ENVIRONMENT_HEADER,
    ROUTE,
    LocalSearch,
    SearchRefused,
    answer,
    environment_digest,
    peer_uid,
)

_log = logging.getLogger("ki.serve")

#: The largest request body the socket reads (a query and its options).
MAX_REQUEST_BYTES = 64 * 1024


def create_local_app(ctx: Any) -> Starlette:
    """The socket's ASGI app: ``POST /local/search`` → 200 and the answer, 400 and ``{"error": …}`` for a request
    or query refused, 409 for a caller whose environment digest is not this process's (another database or
    configuration pins), 500 for any other fault (logged); on a 409 or 500 ``ki search`` searches itself."""

    environment = environment_digest()

    async def search(request: Request) -> JSONResponse:
        if request.headers.get(ENVIRONMENT_HEADER) != environment:
            return JSONResponse({"fault": "this server searches another database or configuration"}, status_code=409)
        raw = await request.body()
        if len(raw) > MAX_REQUEST_BYTES:
            return JSONResponse({"error": "the request is too large"}, status_code=400)
        try:
            import json

            wanted = LocalSearch.from_json(json.loads(raw))
            return JSONResponse(await run_in_threadpool(answer, ctx, wanted))
        except SearchRefused as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        except ValueError as exc:  # a body that is no JSON
            return JSONResponse({"error": f"the request is no JSON: {exc}"}, status_code=400)
        except Exception:  # noqa: BLE001 - the caller falls back to searching itself
            _log.warning("a local search failed", exc_info=True)
            return JSONResponse({"fault": "the search failed; see ki.log"}, status_code=500)

    return Starlette(routes=[Route(ROUTE, search, methods=["POST"])])


def same_user_protocol(uid: int) -> type:
    """uvicorn's HTTP protocol, closing every connection whose peer's uid is not ``uid`` before it is read."""

    class SameUserProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            sock = transport.get_extra_info("socket")
            try:
                peer = peer_uid(sock)
            except (OSError, AttributeError):
                peer = None
            if peer != uid:
                _log.warning("refused a local search connection of uid %s (the server runs as uid %s)", peer, uid)
                transport.close()

    return SameUserProtocol


@dataclass
class LocalSocket:
    """A listening Unix socket and the file it is bound to (``inode``: the file's, to know it is still ours)."""

    path: Path
    sock: socket.socket
    inode: int

    def close(self) -> None:
        """Close the socket and remove its file, unless another server replaced the file meanwhile."""
        self.sock.close()
        try:
            if self.path.lstat().st_ino == self.inode:
                self.path.unlink()
        except OSError:
            pass


def bind_local_socket(path: Path) -> LocalSocket | None:
    """A listening Unix socket at ``path``, mode 0600; None (logged as a warning) when it cannot be had: the
    path is too long for a socket, or a live server of this data directory answers there already. A stale file
    (a killed server's: nothing accepts on it) is replaced."""
    if path.exists() or path.is_symlink():
        if _alive(path):
            _log.warning("another ki serve answers on %s: this one serves no local socket", path)
            return None
        path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # created 0600, never briefly wider
    try:
        sock.bind(str(path))
        os.chmod(path, 0o600)
        sock.listen(128)
        return LocalSocket(path, sock, path.lstat().st_ino)
    except OSError as exc:
        sock.close()
        _log.warning("cannot listen on %s (%s): ki search will search itself", path, exc.strerror or exc)
        return None
    finally:
        os.umask(old)


def _alive(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        try:
            probe.connect(str(path))
        except OSError as exc:
            return exc.errno not in (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTSOCK)
        return True
