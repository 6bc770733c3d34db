"""Hosts made of Linux network namespaces on the test machine (root, ``ip`` from iproute2, ``unshare``).

Not a test module. :class:`NetworkHosts` builds, for each host name, a network namespace of its own (own
loopback, own interfaces) joined to a Linux bridge in the machine's namespace by a veth pair, all on one
private ``/24`` (the bridge ``.1``, the hosts ``.2``, ``.3``, …). A process started with
:meth:`NetworkHosts.command` runs in that namespace and, through ``unshare --uts``, under that host name: for
claim liveness (``ki.core.liveness``: host name + pid + start time) and for the network it is another host — the
machine's loopback services are out of its reach, everything it uses must be addressed over the bridge.

The session's services listen on the loopback interface or a Unix socket (the engine, the OpenSearch node,
the embedded PostgreSQL), so :meth:`NetworkHosts.expose` puts a :class:`~tests.helpers.tcp_relay.TcpRelay` on
the bridge's address in front of one: the namespaces reach it there over TCP through their veth.
"""

from __future__ import annotations

import secrets
import subprocess
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy.engine import make_url

from tests.helpers.tcp_relay import TcpRelay


def _ip(*args: str, netns: str | None = None) -> None:
    cmd = ["ip", *(["netns", "exec", netns, "ip"] if netns else []), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()} "
                           "(network namespaces need root and iproute2: .ci/install_netns_tools.sh)")


def _free_subnet() -> str:
    """``10.<a>.<b>`` of a /24 no route of this machine covers (one random pick among 10.200-249.x)."""
    taken = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, check=False).stdout
    while True:
        subnet = f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(256)}"
        if f"{subnet}." not in taken:
            return subnet


class NetworkHosts:
    """Network namespaces standing for hosts (a context manager: built on enter, removed on exit).

    Attributes:
        names: the host names, in order; ``addresses[name]`` is each one's address on the bridge.
        gateway: the bridge's address in the machine's namespace (where :meth:`expose` listens).
        namespaces: host name → network namespace name (``ki<tag>-<i>``).
    Raises (on enter): RuntimeError when a namespace, the bridge or a veth cannot be made (not root, no
    ``ip``); whatever was made is removed first.
    """

    def __init__(self, names: list[str]) -> None:
        self.names = list(names)
        self.tag = secrets.token_hex(2)
        subnet = _free_subnet()
        self.gateway = f"{subnet}.1"
        self.addresses = {name: f"{subnet}.{2 + i}" for i, name in enumerate(self.names)}
        self.namespaces = {name: f"ki{self.tag}-{i}" for i, name in enumerate(self.names)}
        self.bridge = f"kib{self.tag}"
        self.relays: list[TcpRelay] = []
        self._made: list[str] = []

    def __enter__(self) -> NetworkHosts:
        try:
            _ip("link", "add", "name", self.bridge, "type", "bridge")
            self._made.append("bridge")
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i, name in enumerate(self.names):
                ns, outside, inside = self.namespaces[name], f"kiv{self.tag}{i}", f"kiw{self.tag}{i}"
                _ip("netns", "add", ns)
                self._made.append(ns)
                _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
                _ip("link", "set", inside, "netns", ns)
                _ip("link", "set", outside, "master", self.bridge)
                _ip("link", "set", outside, "up")
                _ip("addr", "add", f"{self.addresses[name]}/24", "dev", inside, netns=ns)
                _ip("link", "set", inside, "up", netns=ns)
                _ip("link", "set", "lo", "up", netns=ns)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for relay in self.relays:
            relay.stop()
        for made in reversed(self._made):  # a namespace takes its veth end (and so the pair) with it
            cmd = ["ip", "link", "del", self.bridge] if made == "bridge" else ["ip", "netns", "del", made]
            subprocess.run(cmd, capture_output=True, check=False)
        self._made.clear()

    def command(self, name: str, cmd: list[str]) -> list[str]:
        """``cmd`` run in host ``name``'s network namespace under host name ``name`` (a UTS namespace of
        its own). Each wrapper execs the next, so the process is ``cmd``'s (``kill -9`` of it kills it)."""
        return ["ip", "netns", "exec", self.namespaces[name], "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', name, *cmd]

    def expose(self, target: tuple[str, int] | str) -> str:
        """A relay on the bridge's address in front of ``target`` (``(host, port)`` or a Unix socket path);
        returns the ``host:port`` the namespaces connect to."""
        relay = TcpRelay(self.gateway, target).start()
        self.relays.append(relay)
        return relay.address

    def expose_url(self, url: str) -> str:
        """``url`` (``http://127.0.0.1:9200``) as reached from the namespaces: its host and port replaced by a
        relay's."""
        parts = urlsplit(url)
        address = self.expose((parts.hostname or "127.0.0.1", parts.port or 80))
        return urlunsplit(parts._replace(netloc=address))

    def expose_database(self, database_url: str) -> str:
        """A SQLAlchemy URL of the same database over TCP through a relay: a server reached by a Unix
        socket (``?host=/dir``, port default 5432) is relayed to ``/dir/.s.PGSQL.<port>``."""
        url = make_url(database_url)
        socket_dir = url.query.get("host")
        if isinstance(socket_dir, tuple):
            socket_dir = socket_dir[0]
        port = int(url.query.get("port") or url.port or 5432)
        if socket_dir and str(socket_dir).startswith("/"):
            target: tuple[str, int] | str = f"{socket_dir}/.s.PGSQL.{port}"
        else:
            target = (url.host or "127.0.0.1", port)
        host, _, relay_port = self.expose(target).rpartition(":")
        query = {k: v for k, v in url.query.items() if k not in ("host", "port")}
        return url.set(host=host, port=int(relay_port), query=query).render_as_string(hide_password=False)

    def relay_env(self, env: dict[str, str]) -> dict[str, str]:
        """What a ki worker in one of the namespaces needs instead of ``env``'s service addresses: each of
        ``HATCHET_CLIENT_HOST_PORT`` (the engine's gRPC), ``HATCHET_CLIENT_SERVER_URL`` (its REST API),
        ``KI_DATABASE_URL`` and ``KI_COMPONENTS__OPENSEARCH_URL`` (pinned over the saved configuration) present
        in ``env``, reached through a relay of its own on the bridge. Returns only those variables."""
        out: dict[str, str] = {}
        if env.get("HATCHET_CLIENT_HOST_PORT"):
            host, _, port = env["HATCHET_CLIENT_HOST_PORT"].rpartition(":")
            out["HATCHET_CLIENT_HOST_PORT"] = self.expose((host, int(port)))
        for name in ("HATCHET_CLIENT_SERVER_URL", "KI_COMPONENTS__OPENSEARCH_URL"):
            if env.get(name):
                out[name] = self.expose_url(env[name])
        if env.get("KI_DATABASE_URL"):
            out["KI_DATABASE_URL"] = self.expose_database(env["KI_DATABASE_URL"])
        return out

    def reaches(self, name: str, address: str, timeout: float = 3.0) -> bool:
        """Whether a TCP connect from host ``name``'s namespace to ``host:port`` succeeds."""
        host, _, port = address.rpartition(":")
        probe = (f"import socket; socket.create_connection(({host!r}, {int(port)}), timeout={timeout}).close()")
        done = subprocess.run(["ip", "netns", "exec", self.namespaces[name], "python3", "-c", probe],
                              capture_output=True, check=False, timeout=timeout + 10)
        return done.returncode == 0
