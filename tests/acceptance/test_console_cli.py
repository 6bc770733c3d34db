"""``ki token create|list|revoke`` and ``ki serve`` as a user runs them (each its own process).

Issue 17 "Server and authentication". The commands run on the test's database (``KI_DATABASE_URL``)
and data directory. Cost: ~15-30 s on a quiet machine (14 `ki` processes of ~1.5 CPU-s each).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

pytestmark = pytest.mark.timeout(600)

KI = [sys.executable, "-m", "ki.cli"]


@pytest.fixture
def env(db_url, data_dir) -> dict[str, str]:
    return os.environ | {"KI_DATA_DIR": str(data_dir), "KI_DATABASE_URL": db_url}


def ki(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*KI, *args], env=env, capture_output=True, text=True, timeout=120)


def test_token_commands(env):
    made = ki(env, "token", "create", "--name", "ops", "--scope", "read:pipeline", "--scope", "write:pipeline",
              "--principal", "group:it", "--json")
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    assert set(created) == {"id", "token", "operator"} and created["token"].startswith("ki_")
    assert created["operator"] is False  # made with --principal
    plain = ki(env, "token", "create", "--name", "reader", "--scope", "read:pipeline")
    assert plain.returncode == 0 and plain.stdout.strip().startswith("ki_") and "not shown again" in plain.stderr
    assert "operator token" in plain.stderr
    listed = json.loads(ki(env, "token", "list", "--json").stdout)
    assert [t["name"] for t in listed] == ["reader", "ops"]
    ops = listed[1]
    assert ops["scopes"] == ["read:pipeline", "write:pipeline"] and ops["principal"] == "group:it"
    assert ops["prefix"] == created["token"][:10] and created["token"] not in json.dumps(listed)
    table = ki(env, "token", "list").stdout
    assert "ops" in table and "live" in table and created["token"] not in table
    # refusals: a clear line, exit 2, nothing written
    bad = ki(env, "token", "create", "--name", "x", "--scope", "root")
    assert bad.returncode == 2 and "unknown scope 'root'" in bad.stderr and "read:pipeline" in bad.stderr
    dup = ki(env, "token", "create", "--name", "ops", "--scope", "search")
    assert dup.returncode == 2 and "already named 'ops'" in dup.stderr
    assert len(json.loads(ki(env, "token", "list", "--json").stdout)) == 2
    revoked = ki(env, "token", "revoke", str(created["id"]))
    assert revoked.returncode == 0 and "revoked token" in revoked.stdout
    again = ki(env, "token", "revoke", str(created["id"]))
    assert again.returncode == 2 and "already revoked" in again.stderr
    assert ki(env, "token", "revoke", "999").returncode == 2
    states = {t["name"]: t["revoked_at"] is not None for t in json.loads(ki(env, "token", "list", "--json").stdout)}
    assert states == {"ops": True, "reader": False}


def test_serve_takes_its_port_from_the_environment(env):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = json.loads(ki(env, "token", "create", "--name", "ops", "--scope", "read:pipeline", "--json").stdout)
    proc = subprocess.Popen([*KI, "serve", "--log-level", "warning"], env=env | {"KI_SERVE_PORT": str(port)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, "ki serve did not start"
                time.sleep(0.2)
        assert health.status_code == 200 and health.json()["status"] == "ok"
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(base + "/api/status").status_code == 401
        status = httpx.get(base + "/api/status", headers={"Authorization": f"Bearer {token['token']}"})
        assert status.status_code == 200 and len(status.json()["stages"]) == 7
        schema = httpx.get(base + "/api/openapi.json").json()
        assert "/api/quarantine/{source_object_id}/retry" in schema["paths"]
    finally:
        proc.terminate()
        proc.wait(20)
