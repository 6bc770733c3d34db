"""``ki serve``'s Unix socket (ki/api/local_socket.py) and its client (ki/app/local_search.py ``ask``), on real
sockets with the real uvicorn protocol: the file is 0600 and a stale one is replaced; a peer of another uid is
closed unanswered; a request the socket refuses is a 400 with the reason, which ``ask`` raises; no server, a
stale file or a failing server is None (the CLI then searches itself). The full path through a real ``ki serve``
and the real ``ki search``: tests/acceptance/test_search_serve_socket.py."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import threading
from contextlib import contextmanager

import pytest
import uvicorn

from ki.api.local_socket import bind_local_socket, create_local_app, same_user_protocol
from ki.app.local_search import ROUTE, LocalSearch, SearchRefused, _exchange, ask, environment_digest
from tests.helpers.outage import wait_until


@contextmanager
def serving(path, *, uid: int, ctx=None):
    """The socket app on a real socket at ``path``, admitting peers of ``uid``, in a thread."""
    local = bind_local_socket(path)
    assert local is not None
    server = uvicorn.Server(uvicorn.Config(create_local_app(ctx), lifespan="off", log_level="warning",
                                           http=same_user_protocol(uid)))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[local.sock])), daemon=True)
    thread.start()
    assert wait_until(lambda: server.started, 30)
    try:
        yield local
    finally:
        server.should_exit = True
        thread.join(30)
        local.close()


def _post(path, body: bytes) -> tuple[int, object]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(path))
        return _exchange(sock, body)


def test_the_socket_is_private_and_a_stale_file_is_replaced(tmp_path):
    path = tmp_path / "serve.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()  # a killed server's file: nothing accepts on it
    assert path.exists()
    assert ask(LocalSearch("Mietvertrag"), path) is None  # refused: the caller searches itself
    with serving(path, uid=os.getuid()) as local:
        mode = os.stat(path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        assert bind_local_socket(path) is None  # a live server keeps its socket
        assert local.path == path
    assert not path.exists()  # removed at shutdown
    assert ask(LocalSearch("Mietvertrag"), path) is None  # absent


def test_a_caller_of_another_database_or_configuration_is_not_answered(tmp_path, monkeypatch):
    path = tmp_path / "serve.sock"
    with serving(path, uid=os.getuid()):
        monkeypatch.setenv("KI_DATABASE_URL", "postgresql://ki@127.0.0.1:9/elsewhere")
        assert _post(path, b'{"query": "x"}')[0] == 409
        assert ask(LocalSearch("x"), path) is None  # the caller searches itself


def test_the_environment_digest_covers_what_decides_a_search():
    base = {"KI_DATA_DIR": "/d", "KI_SERVE_PORT": "8470", "KI_WORKERS": "4", "PATH": "/bin"}
    digest = environment_digest(base)
    assert environment_digest({"KI_DATA_DIR": "/d"}) == digest  # the process's own knobs do not count
    assert environment_digest(base | {"KI_DATABASE_URL": ""}) == digest  # empty counts as unset
    for name in ("KI_DATABASE_URL", "KI_OPENSEARCH_INDEX", "KI_RETRIEVAL__EMBEDDING_MODEL"):
        assert environment_digest(base | {name: "x"}) != digest, name


def test_a_refused_request_is_a_400_with_the_reason(tmp_path):
    path = tmp_path / "serve.sock"
    with serving(path, uid=os.getuid()):
        assert _post(path, b'{"query": "x", "bogus": 1}') == (400, {"error": "unknown field(s) in the request: bogus"})
        assert _post(path, b'{"query": "x", "limit": "ten"}') == (400, {"error": "limit must be int"})
        status, body = _post(path, b"not json")
        assert status == 400 and body["error"].startswith("the request is no JSON")
        # a fault of the search itself (here: no pipeline context) is a 500, and ask() falls back (None)
        assert _post(path, b'{"query": "x"}')[0] == 500
        assert ask(LocalSearch("x"), path) is None


def test_a_peer_of_another_uid_is_closed_unanswered(tmp_path):
    path = tmp_path / "serve.sock"
    with serving(path, uid=os.getuid() + 1):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(str(path))
            request = f"POST {ROUTE} HTTP/1.1\r\nHost: ki\r\nContent-Length: 2\r\n\r\n{{}}".encode()
            try:
                sock.sendall(request)
                received = sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                received = b""
            assert received == b""
        assert ask(LocalSearch("x"), path) is None


def test_ask_raises_the_servers_refusal(tmp_path):
    """A 400 with a reason is the search's refusal: the CLI prints it (exit 2) rather than searching again."""
    path = tmp_path / "serve.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def refuse() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            body = b'{"error":"the cursor is not one ki search made"}'
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)

    thread = threading.Thread(target=refuse, daemon=True)
    thread.start()
    try:
        with pytest.raises(SearchRefused, match="^the cursor is not one ki search made$"):
            ask(LocalSearch("x", cursor="garbage"), path)
    finally:
        thread.join(30)
        listener.close()


def test_the_request_round_trips_and_odd_shapes_are_refused():
    wanted = LocalSearch("Kündigung", principals=("user:x", "group:y"), since="2024-01-31", parts=("body",),
                         not_parts=("deleted",), clauses=True, limit=20, cursor="abc", explain=True)
    assert LocalSearch.from_json(wanted.as_json()) == wanted
    for bad, reason in (([], "the request is no ki search"), ({"query": "x", "principals": "user:x"},
                                                               "principals must be a list of strings"),
                        ({"query": "x", "final": 1}, "final must be bool"),
                        ({"query": "x", "limit": True}, "limit must be int")):
        with pytest.raises(SearchRefused, match=f"^{reason}"):
            LocalSearch.from_json(bad)
