"""The local operator's search, run here or asked of a running ``ki serve`` over its Unix socket.

``ki search`` (DESIGN.md "CLI search": the local operator unless ``--as``) is one :class:`LocalSearch`.
:func:`answer` computes its answer — :func:`ki.adapters.search.search.search`, the JSON ``ki search --json``
prints — in the process that calls it: ``ki search --direct``, or ``ki serve`` for a request on its socket,
where the search path is warm. :func:`ask` is the other end: it sends the request to the socket in the data
directory (:func:`ki.config.data_dir.serve_socket_path`) and returns the server's answer, or None whenever the
server cannot give one (no socket, a stale one, a refused connection, a timeout, an unexpected status), so
the caller runs the search itself. A query the search refuses is :class:`SearchRefused` on both paths.

The protocol: ``POST /local/search`` with :meth:`LocalSearch.as_json` as the body and the caller's
:func:`environment_digest` in the ``X-Ki-Environment`` header; 200 and the answer, 400 and ``{"error": "<the
refusal>"}``, or 409 when the server's digest differs (another database or configuration pins: the caller
searches itself). The module imports only the standard library at load (the search
package is imported by :func:`answer`): a forwarded ``ki search`` stays a small process.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import struct
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

#: The socket route (``ki serve``'s Unix socket only; the TCP port has no such route).
ROUTE = "/local/search"
#: Seconds :func:`ask` waits to connect (a live server accepts at once; a wedged one is not waited for).
CONNECT_TIMEOUT = 0.2
#: Seconds :func:`ask` waits for the answer before running the search itself.
ANSWER_TIMEOUT = 60.0
#: The largest answer :func:`ask` reads (200 hits with their snippets are well under it).
MAX_ANSWER_BYTES = 64 * 1024 * 1024

#: The header carrying the caller's :func:`environment_digest`.
ENVIRONMENT_HEADER = "X-Ki-Environment"

_log = logging.getLogger("ki.search.local")
_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


class SearchRefused(ValueError):
    """The search refused the query (a bad cursor, an unknown clause type …): ``str()`` is the one-line reason."""


@dataclass(frozen=True)
class LocalSearch:
    """What ``ki search`` asks (its options, README "ki search"; the meaning of each is
    :func:`ki.adapters.search.search.search`'s).

    Attributes:
        query: words, "phrases", -excluded.
        principals: ``--as`` (empty: the local operator, all grants).
        matter / doc_type / since: the filters (``since`` as ``YYYY-MM-DD``).
        parts / not_parts: ``--in`` / ``--not-in``.
        clauses / clause_type / party / final: the clause search and the party and finality filters.
        mode: ``hybrid``, ``lexical`` or ``vector``; limit / offset / cursor: the page; explain: ``--explain``.
    """

    query: str
    principals: tuple[str, ...] = ()
    matter: str | None = None
    doc_type: str | None = None
    since: str | None = None
    parts: tuple[str, ...] = ()
    not_parts: tuple[str, ...] = ()
    clauses: bool = False
    clause_type: str | None = None
    party: str | None = None
    final: bool = False
    mode: str = "hybrid"
    limit: int = 10
    offset: int = 0
    cursor: str | None = None
    explain: bool = False

    def as_json(self) -> dict[str, Any]:
        """The request body: every field, tuples as lists."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: Any) -> LocalSearch:
        """The request :meth:`as_json` wrote. Raises: SearchRefused for another shape (an unknown or missing
        field, a value of the wrong type)."""
        if not isinstance(data, dict) or not isinstance(data.get("query"), str):
            raise SearchRefused("the request is no ki search (a JSON object with the query)")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise SearchRefused(f"unknown field(s) in the request: {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for name, value in data.items():
            kind = str(known[name].type)
            if kind.startswith("tuple"):
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise SearchRefused(f"{name} must be a list of strings")
                value = tuple(value)
            elif not _typed(kind, value):
                raise SearchRefused(f"{name} must be {kind}")
            values[name] = value
        return cls(**values)


def _typed(kind: str, value: Any) -> bool:
    if value is None:
        return "None" in kind
    if kind.startswith("bool"):
        return isinstance(value, bool)
    if kind.startswith("int"):
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, str)


def answer(ctx: Any, request: LocalSearch) -> dict[str, Any]:
    """The answer to ``request`` on ``ctx``'s database and index: the JSON form of
    :class:`ki.adapters.search.search.SearchResponse` (what ``ki search --json`` prints).

    Raises: SearchRefused for what the search refuses (a bad date, cursor, mode, limit or offset, a clause type
    the ontology lacks); the search's other faults (database, index) as they come."""
    from datetime import date

    from ki.adapters.search.search import search

    try:
        since = date.fromisoformat(request.since) if request.since else None
        party_entities = None
        if request.party is not None:
            from ki.domain.entities.store import party_filter_ids  # only for --party: a plain search does not load it

            party_entities = party_filter_ids(ctx.db, request.party)
        response = search(ctx.db, request.query, principals=list(request.principals) or None,
                          operator=not request.principals, matter=request.matter, doc_type=request.doc_type,
                          since=since, parts=list(request.parts) or None, not_parts=request.not_parts,
                          limit=request.limit, offset=request.offset, cursor=request.cursor, mode=request.mode,
                          explain=request.explain, config=ctx.config, clauses=request.clauses,
                          clause_type=request.clause_type, party=request.party, party_entities=party_entities,
                          final=request.final)
    except SearchRefused:
        raise
    except ValueError as exc:
        raise SearchRefused(str(exc)) from exc
    return response.model_dump(mode="json")


def environment_digest(environ: Any = None) -> str:
    """A digest of the environment variables that decide what a search finds, so a server answers only a caller
    that would search the same thing: ``KI_DATABASE_URL``, the OpenSearch settings (``KI_OPENSEARCH_*``) and the
    configuration pins (``KI_SECTION__FIELD``). ``environ``: default ``os.environ``; empty values count as unset."""
    import hashlib

    from ki.config.environment import search_environment

    return hashlib.sha256(json.dumps(search_environment(environ)).encode()).hexdigest()[:32]


def peer_uid(sock: Any) -> int:
    """The uid of the process at the other end of the Unix socket ``sock`` (``SO_PEERCRED``)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size)
    return _CREDENTIALS.unpack(raw)[1]


def ask(request: LocalSearch, path: Path, *, connect_timeout: float = CONNECT_TIMEOUT,
        answer_timeout: float = ANSWER_TIMEOUT) -> dict[str, Any] | None:
    """The answer of the ``ki serve`` listening on the socket at ``path``, or None when there is none to be had
    (no socket, a stale one, a server of another user, a timeout, a status other than 200 or 400 — 409: the
    server's database or configuration pins differ from this environment's —, a body that is no JSON object): the
    reason is logged at debug, and the caller searches itself.

    Raises: SearchRefused with the server's reason when it refused the query (400)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(connect_timeout)
            sock.connect(str(path))
            if peer_uid(sock) != os.getuid():
                _log.debug("the server on %s runs as another user: searching here", path)
                return None
            sock.settimeout(answer_timeout)
            status, body = _exchange(sock, json.dumps(request.as_json()).encode())
    except (OSError, ValueError) as exc:  # absent, refused, stale, timed out, a malformed answer
        _log.debug("no answer from %s (%s): searching here", path, exc)
        return None
    if status == 400 and isinstance(body, dict) and isinstance(body.get("error"), str):
        raise SearchRefused(body["error"])
    if status != 200 or not isinstance(body, dict):
        _log.debug("the server on %s answered %s: searching here", path, status)
        return None
    return body


def _exchange(sock: socket.socket, payload: bytes) -> tuple[int, Any]:
    """One HTTP/1.1 request (``Connection: close``) and its (status, JSON body). Raises: OSError, ValueError."""
    head = (f"POST {ROUTE} HTTP/1.1\r\nHost: ki\r\nContent-Type: application/json\r\n"
            f"{ENVIRONMENT_HEADER}: {environment_digest()}\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n").encode()
    sock.sendall(head + payload)
    chunks, size = [], 0
    while chunk := sock.recv(65536):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise ValueError("the answer is too large")
    raw = b"".join(chunks)
    header, sep, body = raw.partition(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if not sep or len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise ValueError("the answer is not HTTP")
    headers = dict(line.lower().split(":", 1) for line in lines[1:] if ":" in line)
    if "chunked" in headers.get("transfer-encoding", ""):
        raise ValueError("a chunked answer")
    length = headers.get("content-length")
    if length is not None and int(length) != len(body):
        raise ValueError("the answer was cut short")
    return int(parts[1]), json.loads(body) if body else None
