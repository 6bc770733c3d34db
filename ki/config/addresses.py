"""Which addresses a component URL may reach: never a link-local or cloud-metadata address by default.

A configuration edit (``PUT /api/config``, ``ki config set``) could otherwise point ki's requests, with their
API keys, at the host's metadata service (``http://169.254.169.254/…``). Two checks, both lifted by
``components.allow_link_local_urls``:

- at validation, :func:`link_local_host` refuses a URL whose host *is* such an address or a known metadata
  name (no DNS lookup: a configuration loads offline);
- at connection, the peer a socket actually reached is checked (:class:`GuardedTransport` for httpx clients —
  Docling Serve —, :func:`guard_urllib3_pool` for opensearch-py's urllib3 pool), so a *host name* that resolves
  to such an address — at edit time or only later, by DNS rebinding — is refused before a byte of the request
  is sent. The refusal is a :class:`ki.core.errors.ConfigurationError` (the run stops and says why; nothing is
  charged to a file or to a dependency's breaker).

Spec: DESIGN.md "Security" (component URLs); the decision "Component URLs never reach metadata addresses".
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

from ki.core.errors import ConfigurationError

#: Host names of cloud metadata services (their addresses are link-local or listed in METADATA_ADDRESSES).
METADATA_HOSTS = frozenset({"metadata", "metadata.google.internal", "instance-data", "instance-data.ec2.internal",
                            "metadata.azure.com"})
#: Metadata services that are not link-local: Alibaba Cloud's IPv4 and AWS's IPv6 (Nitro) endpoint.
METADATA_ADDRESSES = frozenset({"100.100.100.200", "fd00:ec2::254"})

ALLOW_SETTING = "components.allow_link_local_urls"


def forbidden_address(address: str) -> bool:
    """Whether ``address`` (an IP address in text, IPv4, IPv6 or IPv4-mapped; a zone id ``%eth0`` ignored) is
    link-local (169.254.0.0/16, fe80::/10) or a cloud-metadata address. Text that is no IP address: False."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_link_local or str(ip) in METADATA_ADDRESSES


def link_local_host(url: str) -> bool:
    """Whether ``url``'s host is a link-local address (IPv4 169.254.0.0/16 in any spelling ``inet_aton``
    accepts — ``2852039166``, ``0xa9fea9fe``, ``169.254.43518`` —, IPv6 fe80::/10, IPv4-mapped forms) or a
    known cloud-metadata name or address. No DNS lookup: a name is judged at connection time instead."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host in METADATA_HOSTS:
        return True
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        try:
            host = socket.inet_ntoa(socket.inet_aton(host))
        except (OSError, ValueError):
            return False
    return forbidden_address(host)


def refuse_peer(setting: str, host: str, peer: str) -> None:
    """Raise ConfigurationError when ``peer`` (the address a connection to ``host`` reached) is forbidden.

    Args: ``setting``, the configuration key naming the URL (``components.docling_url``), for the message."""
    if forbidden_address(peer):
        raise ConfigurationError(
            f"{setting} host {host!r} reached {peer}, a link-local or cloud-metadata address; ki refuses to send "
            f"requests there (set {ALLOW_SETTING} to true to use it deliberately)")


def _peer_of(stream: Any) -> str | None:
    """The remote address of an httpcore network stream, or None when it has no socket."""
    sock = stream.get_extra_info("socket")
    if sock is None:
        return None
    try:
        return sock.getpeername()[0]
    except OSError:
        return None


def peer_trace(setting: str, host: str, then: Any = None) -> Any:
    """An httpcore ``trace`` extension that checks each new TCP connection's peer (:func:`refuse_peer`, the
    URL's ``host`` named), closing the connection before raising; every event then goes on to ``then``
    (another trace callback, or None)."""

    def trace(event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            peer = _peer_of(stream) if stream is not None else None
            if peer is not None and forbidden_address(peer):
                stream.close()
                refuse_peer(setting, host, peer)
        if then is not None:
            then(event, info)

    return trace


def _guarded_transport_class() -> type:
    import httpx

    class GuardedTransport(httpx.HTTPTransport):
        """An httpx transport whose connections may not reach a forbidden address (module doc).

        Args: ``setting``, the configuration key of the URL (for the message); every other argument as
        ``httpx.HTTPTransport``. Raises: ConfigurationError from ``handle_request`` for a forbidden peer."""

        def __init__(self, setting: str, **kwargs: Any):
            super().__init__(**kwargs)
            self._setting = setting

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            trace = peer_trace(self._setting, request.url.host, request.extensions.get("trace"))
            request.extensions = {**request.extensions, "trace": trace}
            return super().handle_request(request)

    return GuardedTransport


def guarded_transport(setting: str, **kwargs: Any) -> Any:
    """A :class:`GuardedTransport` (httpx) for the URL of ``setting``; ``kwargs`` as ``httpx.HTTPTransport``."""
    return _guarded_transport_class()(setting, **kwargs)


def guard_urllib3_pool(pool: Any, setting: str) -> None:
    """Make a urllib3 connection pool (opensearch-py's ``Urllib3HttpConnection.pool``) check every new
    connection's peer (:func:`refuse_peer`) before the request is sent; the socket is closed first."""
    base = pool.ConnectionCls

    def _new_conn(self: Any) -> Any:
        sock = base._new_conn(self)
        try:
            peer = sock.getpeername()[0]
        except OSError:
            return sock
        if forbidden_address(peer):
            sock.close()
            refuse_peer(setting, str(self.host), peer)
        return sock

    pool.ConnectionCls = type(f"Guarded{base.__name__}", (base,), {"_new_conn": _new_conn})
