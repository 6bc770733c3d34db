"""``ki search`` asks a running ``ki serve`` over its Unix socket, and prints what it prints alone.

The real ``ki`` command on a fresh data directory holding the repository's sample estate (``ki insert
samples/estate``), and a real ``ki serve`` subprocess. Through the socket the output equals ``ki search
--direct``'s, text and ``--json``, for a plain query, ``--as``, a filter and ``--clauses``, and a refusal is the
same one line and exit 2. That the socket answered is shown by a client whose own settings are broken
(``KI_WORKERS=many``): the forwarded search never reads them (``--direct`` with them fails, exit 2). A client
whose ``KI_DATABASE_URL`` is not the server's is not answered by it (it searches itself). The socket is 0600;
the TCP port has no such route (404); a killed server's stale socket falls back to searching here with the right
answer, and the next ``ki serve`` replaces it. ~1-4 min under load (the insert, two server starts).
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.helpers.ki_command import KI, KiUser, private_folder
from tests.helpers.outage import wait_until
from tests.helpers.process import free_ports, http_ok

pytestmark = pytest.mark.timeout(900)

ESTATE = Path(__file__).resolve().parents[2] / "samples" / "estate"
BROKEN = {"KI_WORKERS": "many"}  # this process's settings do not parse: only a forwarded search succeeds
NOWHERE = {"KI_DATABASE_URL": "postgresql://ki:ki@127.0.0.1:9/nowhere"}
QUERIES = (["Mietvertrag Kündigung"], ["Mietvertrag", "--as", "user:x"], ["Vertrag", "--type", "contract"],
           ["Haftung", "--clauses"])


class Served:
    """The data directory's ``ki serve`` (restartable)."""

    def __init__(self, ki: KiUser):
        self.ki = ki
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self) -> None:
        (self.port,) = free_ports(1)
        self.proc = subprocess.Popen([*KI, "serve", "--port", str(self.port), "--log-level", "warning"],
                                     env=self.ki.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        up = wait_until(lambda: self.proc.poll() is not None or (
            self.socket.exists() and http_ok(f"http://127.0.0.1:{self.port}/healthz")), 300, step=0.2)
        assert up and self.proc.poll() is None, self.proc.stderr.read() if self.proc.poll() is not None else ""

    @property
    def socket(self) -> Path:
        return self.ki.data_dir / "serve.sock"

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(120)


@pytest.fixture(scope="module")
def served():
    with private_folder("ki-socket-") as base:
        ki = KiUser(base)
        ki("insert", str(ESTATE), timeout=900)
        server = Served(ki)
        server.start()
        try:
            yield server
        finally:
            server.stop()


def test_forwarded_output_equals_the_direct_output(served):
    ki = served.ki
    for args in QUERIES:
        for fmt in ([], ["--json"]):
            direct = ki("search", *args, *fmt, "--direct")
            forwarded = ki("search", *args, *fmt, extra=BROKEN)  # it could not search itself: the socket answered
            assert forwarded.stdout == direct.stdout, args + fmt
            assert forwarded.stderr == direct.stderr, args + fmt
            assert direct.stdout.strip() not in ("", "no results"), args + fmt
    ki("search", "Mietvertrag", "--direct", extra=BROKEN, code=2)  # --direct never asks the server
    ki("search", "Mietvertrag", extra=BROKEN | {"KI_SEARCH_DIRECT": "1"}, code=2)
    ki("search", "Mietvertrag", extra=NOWHERE, code=4)  # another database: the server does not answer for it


def test_errors_keep_their_meaning(served):
    ki = served.ki
    for args in (["Vertrag", "--cursor", "garbage"], ["Vertrag", "--clause-type", "nope"],
                 ["Vertrag", "--since", "2020-13-01"]):
        direct = ki("search", *args, "--direct", code=2)
        forwarded = ki("search", *args, extra=BROKEN, code=2)  # refused by the server, not by the broken settings
        assert forwarded.stderr == direct.stderr and len(direct.stderr.splitlines()) == 1, args
        assert forwarded.stdout == direct.stdout == ""


def test_the_socket_is_private_and_not_on_the_tcp_port(served):
    mode = os.stat(served.socket).st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    base = f"http://127.0.0.1:{served.port}"
    assert httpx.post(base + "/local/search", json={"query": "Mietvertrag"}, timeout=30).status_code == 404
    assert httpx.get(base + "/healthz", timeout=30).status_code == 200


def test_a_forwarded_search_loads_none_of_the_search_path(served):
    """What makes it cheap: no database driver, ORM, settings models or search package in the ``ki search``
    process (``python -X importtime`` lists every module it imported)."""
    import sys

    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "ki.cli", "search", "Mietvertrag"],
                          env=served.ki.env | BROKEN, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "ki.app.local_search" in imported  # the forwarding client ran
    heavy = {"sqlalchemy", "psycopg", "pydantic", "pydantic_settings", "numpy", "ki.adapters.search",
             "ki.config.loader", "ki.config.process", "ki.config.settings", "ki.store"}
    assert imported & heavy == set()


def test_a_direct_lexical_search_loads_no_vector_or_gateway_code(served):
    """Without vectors (the default ``embedding_model``), a search answered in its own process never needs numpy,
    an embedder or the gateway's HTTP client: ``--direct`` imports none of them (``python -X importtime``)."""
    import sys

    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "ki.cli", "search", "Mietvertrag", "--direct"],
                          env=served.ki.env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "ki.adapters.search.search" in imported and "tantivy" in imported  # it did search here
    assert imported & {"numpy", "httpx", "ki.adapters.search.embeddings", "ki.adapters.agents.shared_gateway"} == set()


def test_a_killed_servers_stale_socket_falls_back_and_is_replaced(served):
    ki = served.ki
    expected = ki("search", "Mietvertrag Kündigung", "--direct")
    served.stop(signal.SIGKILL)
    assert served.socket.exists()  # a killed server cannot remove it
    after = ki("search", "Mietvertrag Kündigung")
    assert (after.stdout, after.stderr) == (expected.stdout, expected.stderr)
    ki("search", "Mietvertrag Kündigung", extra=BROKEN, code=2)  # it did search here: no server answered
    served.start()  # replaces the stale file
    again = ki("search", "Mietvertrag Kündigung", extra=BROKEN)
    assert again.stdout == expected.stdout
    served.stop()
    assert not served.socket.exists()  # removed at shutdown
