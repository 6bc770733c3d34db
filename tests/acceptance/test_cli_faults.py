"""Ordinary faults end a ``ki`` command with one readable message, a documented exit code and the
traceback in ``ki.log`` — never a traceback on stderr (issue 21, "Tracebacks for ordinary faults";
ki/cli/faults.py; README "Exit codes").

Each test runs the real ``ki`` command in a subprocess with a fresh data directory. Cost: about 6 s per
command on a loaded 2-core machine (interpreter start); the database-stop test inserts 60 small files
twice on the embedded PostgreSQL (~1-3 min under load).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(600)

KI_SCRIPT = Path(sys.executable).parent / "ki"
KI = [str(KI_SCRIPT)] if KI_SCRIPT.exists() else [sys.executable, "-m", "ki.cli"]


@pytest.fixture
def tmp_path() -> Path:
    """A private folder (not pytest's rotating basetemp, which a concurrent session may prune while the
    embedded PostgreSQL still runs in it)."""
    base = Path(tempfile.mkdtemp(prefix="ki-cli-faults-"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """A user's environment: no KI_* variable but a fresh KI_DATA_DIR; TMPDIR private (the fallback log)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("KI_")}
    (tmp_path / "tmp").mkdir()
    return base | {"KI_DATA_DIR": str(tmp_path / "data"), "TMPDIR": str(tmp_path / "tmp")}


def ki(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*KI, *args], env=env, capture_output=True, text=True, timeout=timeout)


def fallback_log(env: dict[str, str]) -> Path:
    return Path(env["TMPDIR"]) / f"ki-{os.getuid()}" / "ki.log"


def assert_reported(proc: subprocess.CompletedProcess, code: int, what: str, todo: str, log: Path) -> None:
    """The three lines of ki.cli.faults.report, the exit code, no traceback on stderr, one in the log."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-3:] == [f"ki: {what}", f"what to do: {todo}", f"details: {log}"], proc.stderr
    assert proc.returncode == code, proc.stderr
    assert "Traceback (most recent call last)" in log.read_text()


def test_bad_variable_is_a_configuration_error(env):
    proc = ki(env | {"KI_WORKERS": "abc"}, "status")
    assert_reported(proc, 2,
                    "configuration error: invalid environment variable KI_WORKERS='abc': Input should be a valid "
                    "integer, unable to parse string as an integer",
                    "fix or unset the variable or setting named above (`ki config show` lists the effective "
                    "configuration)",
                    Path(env["KI_DATA_DIR"]) / "ki.log")
    assert len(proc.stderr.strip().splitlines()) == 3


def test_unreachable_database_url(env):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    proc = ki(env | {"KI_DATABASE_URL": f"postgresql://ki:s3cret@127.0.0.1:{port}/ki"}, "status")
    assert time.monotonic() - started < 60
    assert_reported(proc, 4,
                    f'cannot reach the database (KI_DATABASE_URL): connection failed: connection to server at '
                    f'"127.0.0.1", port {port} failed: Connection refused',
                    "check that the server at KI_DATABASE_URL is running and the URL, user and password are "
                    "right, or unset KI_DATABASE_URL to use the embedded database",
                    Path(env["KI_DATA_DIR"]) / "ki.log")
    assert "s3cret" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 3


def test_database_url_that_is_no_url(env):
    proc = ki(env | {"KI_DATABASE_URL": "localhost:5432"}, "status")
    assert_reported(proc, 2,
                    "configuration error: KI_DATABASE_URL is not a PostgreSQL URL; expected "
                    "postgresql://USER:PASSWORD@HOST:PORT/DATABASE",
                    "fix or unset the variable or setting named above (`ki config show` lists the effective "
                    "configuration)",
                    Path(env["KI_DATA_DIR"]) / "ki.log")


def test_data_dir_that_is_a_file(env, tmp_path):
    afile = tmp_path / "not-a-dir"
    afile.write_text("x")
    started = time.monotonic()
    proc = ki(env | {"KI_DATA_DIR": str(afile)}, "insert", str(tmp_path))
    assert time.monotonic() - started < 60  # was 30 s of retries before the message
    assert_reported(proc, 5, f"the data directory {afile}: exists and is not a directory",
                    "set KI_DATA_DIR to a directory you can write, or fix its permissions", fallback_log(env))
    assert len(proc.stderr.strip().splitlines()) == 3


def test_data_dir_that_cannot_be_created(env, tmp_path):
    afile = tmp_path / "not-a-dir"
    afile.write_text("x")
    proc = ki(env | {"KI_DATA_DIR": str(afile / "data")}, "status")
    assert_reported(proc, 5, f"the data directory {afile / 'data'}: cannot be created (Not a directory)",
                    "set KI_DATA_DIR to a directory you can write, or fix its permissions", fallback_log(env))


def test_database_stopping_during_an_insert(env, tmp_path):
    from ki.store.db import stop_embedded_server

    estate = tmp_path / "estate"
    estate.mkdir()
    for i in range(60):
        (estate / f"akte-{i:03}.txt").write_text(f"Akte {i}\nLiefervertrag Nummer {i} zwischen A und B.\n")
    data = Path(env["KI_DATA_DIR"])
    proc = subprocess.Popen([*KI, "insert", str(estate)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        for line in proc.stderr:  # the scan line: the run starts now
            seen.append(line)
            if line.startswith("scanned "):
                break
        assert seen and seen[-1].startswith("scanned "), "".join(seen)
        assert stop_embedded_server(data / "pg")  # at once, from here (a `ki db stop` starts slower)
        rest = proc.stderr.read()
        proc.wait(timeout=300)
    finally:
        proc.kill()
    stderr = "".join(seen) + rest
    done = subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr)
    lines = stderr.strip().splitlines()
    assert lines[-3].startswith("ki: the database (the embedded PostgreSQL) stopped answering while ki ran "
                                "`ki insert`: "), stderr
    assert_reported(done, 4, lines[-3][4:],
                    "run the command again: it restarts the embedded PostgreSQL; finished work is kept and the "
                    "rest resumes where it stopped", data / "ki.log")
    assert len(lines) < 12, stderr  # the workers' retries are one line each, once
    again = ki(env, "insert", str(estate), timeout=600)
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    assert "60 files: 0 new" in again.stderr
    stop_embedded_server(data / "pg")


def test_db_stop_refuses_while_another_process_uses_the_database(env):
    import psycopg

    from ki.store.db import _running_postmaster, stop_embedded_server

    assert ki(env, "status").returncode == 0  # starts the embedded server
    pgdata = Path(env["KI_DATA_DIR"]) / "pg"
    with psycopg.connect(_running_postmaster(pgdata).get_uri(), dbname="ki", autocommit=True) as conn:
        backend = conn.info.backend_pid
        refused = ki(env, "db", "stop")
        assert refused.returncode == 6, refused.stderr
        lines = refused.stderr.strip().splitlines()
        assert lines[0] == f"refused: 1 other connection to the embedded PostgreSQL in {pgdata} (another ki " \
                           "process is using it):"
        # a client that did not name itself (no application_name): its backend pid
        assert lines[1].startswith(f"  a client that did not say what it is (PostgreSQL backend pid {backend}), "
                                   "connected since ")
        assert lines[2] == "stop those processes first, or run `ki db stop --force` (their work stops and " \
                           "resumes with the next `ki insert`)"
        assert _running_postmaster(pgdata) is not None
        forced = ki(env, "db", "stop", "--force")
        assert (forced.returncode, forced.stdout.strip()) == (0, "stopped"), forced.stderr
    assert _running_postmaster(pgdata) is None
    assert ki(env, "db", "stop").stdout.strip() == "not running"
    stop_embedded_server(pgdata)
