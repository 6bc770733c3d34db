"""What a newcomer meets first, as the real ``ki`` command on a fresh data directory: a taken port
(ki/cli/serve.py ``listen``), ``ki db stop`` naming the ki processes that hold the database
(ki/store/db.py ``application_name``), search output (ki/cli/search.py ``print_hit``, ki/adapters/search/snippets.py),
``ki status`` piped at 80 columns with the stage ids, and the rows a quarantined stage blocks
(ki/store/blocked.py).

test_port_in_use: no database (~2 s). test_db_stop_names_the_ki_processes: a real ``ki serve`` (~20-60 s
under load). test_search_status_and_blocked_rows: three small files, local embeddings (~1-2 min under load).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess

import pytest

from tests.helpers.ki_command import KI
from tests.helpers.outage import wait_until
from tests.helpers.process import free_ports, http_ok

pytestmark = pytest.mark.timeout(900)

BROKEN_PDF = b"%PDF-1.4\nnot a pdf at all\n"
NAME = "Übergabeprotokoll 3. OG (Scan).txt"


def _listener() -> tuple[socket.socket, int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock, sock.getsockname()[1]


def test_port_in_use(ki):
    sock, port = _listener()  # a real listener of another process: this test's
    try:
        said = ki("serve", "--port", str(port), code=9).stderr.splitlines()
    finally:
        sock.close()
    assert len(said) == 1, said
    assert said[0].startswith(f"port {port} is in use by pid {os.getpid()} (")
    assert said[0].endswith("); use --port")
    assert "pytest" in said[0] or "python" in said[0]  # the holder's command line
    assert "Errno" not in said[0]


def test_db_stop_names_the_ki_processes(ki):
    ki("status")  # the embedded PostgreSQL runs and the database exists
    (port,) = free_ports(1)
    server = subprocess.Popen([*KI, "serve", "--port", str(port)], env=ki.env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/healthz") or server.poll() is not None, 180)
        assert server.poll() is None, server.stderr.read()
        said = ki("db", "stop", code=6).stderr.splitlines()
        assert said[0].startswith("refused: ")
        held = [line for line in said if line.startswith("  ")]
        assert len(held) == 1, said  # one line for the process, however many connections its pool holds
        assert held[0].startswith(f"  ki serve --port {port} (pid {server.pid}), connected since "), said
        assert "PostgreSQL backend pid" not in held[0]
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert ki("db", "stop").stdout == "stopped\n"


def _hits(stdout: str) -> list[list[str]]:
    """The hits of ``ki search``'s output: each its header line and the lines under it."""
    hits: list[list[str]] = []
    for line in stdout.splitlines():
        if line[:4].strip().rstrip(".").isdigit() and line[:4].strip().endswith("."):
            hits.append([line])
        elif hits:
            hits[-1].append(line)
    return hits


def test_search_status_and_blocked_rows(ki):
    ki("config", "set", "retrieval.embedding_model", "local")
    estate = ki.base / "estate"
    estate.mkdir()
    (estate / NAME).write_text("Protokoll der Übergabe der Wohnung.\nDer Mieter übergibt drei Schlüssel.\n")
    (estate / "liefervertrag.txt").write_text(
        "Liefervertrag zwischen Alpha GmbH und Beta AG. Die Lieferung erfolgt am dritten März. Die Gewährleistung "
        "beträgt zwei Jahre. Weitere Bestimmungen folgen in Anlage 1 und Anlage 2 zu diesem Vertrag, der in "
        "Berlin geschlossen wurde und in allen Teilen gilt, solange die Parteien nichts anderes vereinbaren.\n")
    (estate / "kaputt.pdf").write_bytes(BROKEN_PDF)
    ki("insert", str(estate))

    # a file-name hit: the name is one highlight, not «Übergabeprotokoll 3». «OG» («Scan»).«txt»
    (hit,) = [h for h in _hits(ki("search", NAME, "--in", "fields").stdout) if NAME in h[0]]
    assert "file name: «Übergabeprotokoll 3. OG (Scan).txt»" in " ".join(hit[1:]), hit

    # a long snippet wraps under its hit, never at column 0 (piped, COLUMNS=80)
    out = ki("search", "Gewährleistung Anlage Berlin", "--mode", "lexical", extra={"COLUMNS": "80"}).stdout
    (hit,) = _hits(out)
    assert len(hit) >= 3, out  # the snippet took more than one line
    assert all(line.startswith("    ") and len(line) <= 80 for line in hit[1:]), out
    assert "«Gewährleistung»" in out and "«Berlin»" in out

    # a hit on the fields by meaning (no field holds a query word) names each field it shows
    out = ki("search", "apartment handover keys", "--mode", "vector", "--in", "fields").stdout
    first = _hits(out)[0]
    assert "in the document's fields (by meaning)" in first[0], out
    snippet = " ".join(line.strip() for line in first[1:])
    assert snippet.startswith("title: ") and " · file name: " in snippet, out

    # ki status piped, COLUMNS unset: 80 columns, console names with their ids, the blocked rows apart
    env = {k: v for k, v in ki.env.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.run([*KI, "status"], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, proc.stdout
    text = " ".join(" ".join(lines).split())
    assert "stage ids (for --stage, --json and the settings): Parse is convert, Classify is classify_matter" in text
    assert ("of the waiting, blocked by a quarantined stage (they move once `ki quarantine retry` releases it): "
            "Classify 1, Relate 1, Extract metadata 1, Extract decisions 1, Index 1") in text, proc.stdout
    waiting_index = next(line for line in lines if line.startswith("waiting: index "))
    assert waiting_index.startswith("waiting: index 1 blocked by a quarantined stage"), proc.stdout

    status = json.loads(ki("status", "--json").stdout)
    assert status["blocked_by_quarantine"] == {"fetch": 0, "convert": 0, "classify_matter": 1, "relate": 1,
                                               "extract_metadata": 1, "extract_decisions": 1, "index": 1}
    assert status["stage_names"]["convert"] == "Parse"
    for stage, buckets in status["stages"].items():  # still the eight buckets, three files each
        assert len(buckets) == 8 and sum(buckets.values()) == 3, (stage, buckets)
        assert status["blocked_by_quarantine"][stage] <= buckets["waiting"]
