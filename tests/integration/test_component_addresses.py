"""Component URLs never reach a link-local or cloud-metadata address (ki.config.addresses).

A real HTTP server listens on a link-local address added to the loopback interface (the test runs as root,
as CI does); the Docling and OpenSearch clients are pointed at it by address and, in a child process with its
own mount namespace and ``/etc/hosts``, by a host name that resolves to it. The server counts every request:
a refused connection must send none. With ``components.allow_link_local_urls`` the same URLs are reached.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ki.adapters.convert.docling.client import DoclingClient
from ki.adapters.search.opensearch_bulk import classify_transport_error
from ki.adapters.search.opensearch_index import client_for
from ki.config.settings import ComponentsConfig
from ki.core.errors import ConfigurationError

TRAP = "169.254.77.77"
REPO = Path(__file__).resolve().parents[2]


class _Counting(ThreadingHTTPServer):
    daemon_threads = True
    requests: list[str]


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        return

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.server.requests.append(self.path)  # type: ignore[attr-defined]
        body = json.dumps({"status": "ok", "version": {"number": "2.19.1", "distribution": "opensearch"}})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())


@pytest.fixture(scope="module")
def trap() -> Iterator[_Counting]:
    """An HTTP server on ``TRAP`` (a link-local address put on ``lo`` for the module, removed after)."""
    if os.geteuid() != 0:
        pytest.fail("this test adds an address to the loopback interface: run it as root (CI does)")
    added = subprocess.run(["ip", "addr", "add", f"{TRAP}/32", "dev", "lo"], capture_output=True, text=True)
    assert added.returncode == 0 or "File exists" in added.stderr, added.stderr
    server = _Counting((TRAP, 0), _Handler)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        subprocess.run(["ip", "addr", "del", f"{TRAP}/32", "dev", "lo"], capture_output=True)


def test_the_configuration_refuses_metadata_addresses_by_any_spelling() -> None:
    for url in ("http://169.254.169.254/latest", "http://2852039166/", "http://0xa9fea9fe/", "http://169.254.43518/",
                "http://[fe80::1%25lo]:5001", "http://[::ffff:169.254.169.254]/", "http://metadata.google.internal/",
                "http://100.100.100.200/", "http://[fd00:ec2::254]/"):
        with pytest.raises(ValueError, match="link-local or cloud-metadata"):
            ComponentsConfig(docling_url=url)
    assert ComponentsConfig(docling_url="http://169.254.169.254/", allow_link_local_urls=True).docling_url
    assert ComponentsConfig(opensearch_url="http://10.0.0.5:9200").opensearch_url == "http://10.0.0.5:9200"


def test_docling_client_sends_nothing_to_a_link_local_peer(trap: _Counting) -> None:
    port = trap.server_address[1]
    before = len(trap.requests)
    client = DoclingClient(f"http://{TRAP}:{port}")
    with pytest.raises(ConfigurationError, match=r"components.docling_url .*169\.254\.77\.77.*allow_link_local_urls"):
        client.health()
    client.close()
    assert len(trap.requests) == before
    allowed = DoclingClient(f"http://{TRAP}:{port}", allow_link_local=True)
    assert allowed.health() is True
    allowed.close()
    assert trap.requests[before:] == ["/health"]


def test_opensearch_client_sends_nothing_to_a_link_local_peer(trap: _Counting) -> None:
    from opensearchpy.exceptions import ConnectionError as OSConnectionError

    port = trap.server_address[1]
    before = len(trap.requests)
    with pytest.raises(OSConnectionError) as info:
        client_for(f"http://{TRAP}:{port}").info()
    refused = classify_transport_error(info.value, index="ki-test", what="a health check")
    assert isinstance(refused, ConfigurationError), refused
    assert "components.opensearch_url" in str(refused) and TRAP in str(refused)
    assert len(trap.requests) == before
    assert client_for(f"http://{TRAP}:{port}", allow_link_local=True).info()["version"]["number"] == "2.19.1"
    assert trap.requests[before:] == ["/"]


def test_a_host_name_resolving_to_a_link_local_address_is_refused_at_connection(trap: _Counting,
                                                                                tmp_path: Path) -> None:
    """The configuration cannot know where a name resolves (nor where it will, after DNS rebinding): a child
    process whose ``/etc/hosts`` maps ``docling.trap.test`` to the trap is refused when it connects."""
    port = trap.server_address[1]
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 localhost\n{TRAP} docling.trap.test search.trap.test\n")
    child = textwrap.dedent(f"""
        from ki.config.settings import ComponentsConfig
        from ki.adapters.convert.docling.client import DoclingClient
        from ki.core.errors import ConfigurationError
        from ki.adapters.search.opensearch_bulk import classify_transport_error
        from ki.adapters.search.opensearch_index import client_for
        c = ComponentsConfig(docling_url="http://docling.trap.test:{port}",
                             opensearch_url="http://search.trap.test:{port}")
        try:
            DoclingClient(c.docling_url).health()
            print("docling: sent")
        except ConfigurationError as exc:
            print("docling: refused:", exc)
        try:
            client_for(c.opensearch_url).info()
            print("opensearch: sent")
        except Exception as exc:
            print("opensearch: refused:", classify_transport_error(exc, index="i", what="info"))
        print("allowed:", DoclingClient(c.docling_url, allow_link_local=True).health())
    """)
    script = tmp_path / "child.py"
    script.write_text(child)
    before = len(trap.requests)
    env = os.environ | {"PYTHONPATH": str(REPO)}
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
         f'mount --bind "{hosts}" /etc/hosts && exec "{sys.executable}" "{script}"'],
        capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("docling: refused: components.docling_url host 'docling.trap.test' reached "
                               f"{TRAP}"), lines
    assert lines[1].startswith("opensearch: refused: components.opensearch_url host 'search.trap.test' reached "
                               f"{TRAP}"), lines
    assert lines[2] == "allowed: True", lines
    assert trap.requests[before:] == ["/health"]
