"""Configuration edits that are validated strictly, bounded, safe, atomic and audited — on the real server.

The reproductions: a lone surrogate in ``firm.name`` (was saved, then the audit insert failed with a 500 and
every later read crashed), ``"64"`` / ``true`` / ``"yes"`` coerced, a huge firm name and a million aliases,
``re:(a+)+$``, a Docling URL on the metadata address, ``kill -9`` of ``ki serve`` during a PUT (a saved change
neither acknowledged nor audited), and ``ki config set`` writing no audit entry. Real PostgreSQL, a real
``ki serve`` process for the kill, the real ``ki`` command. Cost: ~30-60 s.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest
from sqlalchemy import text

from ki.api.app import create_app
from ki.app.tokens import create_token
from ki.store.config_journal import pending_path, replay_pending
from tests.helpers.process import free_ports
from tests.helpers.served import serve_app

pytestmark = pytest.mark.timeout(600)
KI = [sys.executable, "-m", "ki.cli"]


def _audit_rows(engine, action: str = "config_update") -> list[tuple[str, dict]]:
    with engine.connect() as conn:
        return [(r.actor, r.details) for r in conn.execute(
            text("SELECT actor, details FROM audit_log WHERE action = :a ORDER BY id"), {"a": action})]


@pytest.fixture
def served(make_ctx):
    ctx = make_ctx(workers=2)
    token = create_token(ctx.db.engine, name="ops", scopes=["read:pipeline", "write:pipeline"])[1]
    app = create_app(ctx)
    with serve_app(app) as base:
        yield base, {"Authorization": f"Bearer {token}"}, ctx
        app.state.ki.launcher.wait_idle(60)


def _put(base: str, h: dict, changes: dict | str) -> httpx.Response:
    version = httpx.get(f"{base}/api/config", headers=h).json()["version"]
    body = changes if isinstance(changes, str) else json.dumps({"changes": changes, "version": version})
    if isinstance(changes, str):
        body = body.replace("VERSION", version)
    return httpx.put(f"{base}/api/config", headers={**h, "Content-Type": "application/json"}, content=body,
                     timeout=60)


def test_values_are_strict_bounded_and_safe(served):
    base, h, ctx = served
    config_file = ctx.settings.data_dir / "config.json"
    refused = {
        "firm.name": ['{"changes": {"firm.name": "Kanzlei \\ud800"}, "version": "VERSION"}'],
        "pipeline.max_file_mb": [{"pipeline.max_file_mb": "64"}, {"pipeline.max_file_mb": True}],
        "pipeline.auto_insert_after_sync": [{"pipeline.auto_insert_after_sync": "yes"}],
        "firm.aliases": [{"firm.aliases": [f"Alias {i}" for i in range(201)]}, {"firm.aliases": ["x" * 201]}],
        "firm.matter_reference_patterns": [{"firm.matter_reference_patterns": ["re:(a+)+$"]}],
        "components.docling_url": [{"components.docling_url": url} for url in (
            "http://169.254.169.254/latest", "http://[fe80::1]:5001", "http://metadata.google.internal/",
            "http://2852039166/")],
    }
    for field, attempts in refused.items():
        for changes in attempts:
            r = _put(base, h, changes)
            assert r.status_code == 422, (changes, r.text)
            assert field in r.json()["fields"], r.json()
    r = _put(base, h, {"firm.name": "K" * 10_000})
    assert r.status_code == 422 and "firm.name" in r.json()["fields"]
    assert _put(base, h, {"firm.name": "K" * (10 << 20)}).status_code == 413
    assert _put(base, h, {"firm.aliases": ["a"] * 1_000_000}).status_code == 413
    assert "surrogate" in _put(base, h, refused["firm.name"][0]).json()["fields"]["firm.name"][0]
    assert not config_file.exists() and _audit_rows(ctx.db.engine) == []
    # reads still work, and the same fields take proper values (an integer is a number)
    assert httpx.get(f"{base}/api/config", headers=h).status_code == 200
    ok = _put(base, h, {"pipeline.max_file_mb": 64, "pipeline.retry_base_seconds": 7,
                        "firm.matter_reference_patterns": ["re:[A-Z]{3}\\d{5}", "re:(\\d{2}-)+\\d"],
                        "components.docling_url": "http://169.254.169.254:5001",
                        "components.allow_link_local_urls": True, "components.docling_api_key": "s3cret"})
    assert ok.status_code == 200, ok.text
    saved = json.loads(config_file.read_text())
    assert saved["pipeline"]["max_file_mb"] == 64 and saved["pipeline"]["retry_base_seconds"] == 7
    (actor, details), = _audit_rows(ctx.db.engine)
    assert actor == "ops" and details["version"] == ok.json()["version"]
    assert details["changes"]["pipeline.max_file_mb"] == {"from": 512, "to": 64}
    assert details["changes"]["components.docling_api_key"]["to"] == "***"
    assert oct(config_file.stat().st_mode & 0o777) == "0o600"


def test_kill_during_a_put_leaves_an_audited_change_or_nothing(db_url, data_dir, make_ctx):
    """``ki serve`` is killed (SIGKILL) while its PUT waits on the audit insert (a test transaction holds
    the audit table): the edit is on disk with its write-ahead record, and the next ``ki`` process
    audits it. A record whose file never took is dropped, changing nothing."""
    ctx = make_ctx(workers=2)
    token = create_token(ctx.db.engine, name="ops", scopes=["read:pipeline", "write:pipeline"])[1]
    h = {"Authorization": f"Bearer {token}"}
    (port,) = free_ports(1)
    env = os.environ | {"KI_DATA_DIR": str(data_dir), "KI_DATABASE_URL": db_url, "KI_SERVE_PORT": str(port)}
    proc = subprocess.Popen([*KI, "serve", "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "ki serve did not start"
            time.sleep(0.2)
        version = httpx.get(f"{base}/api/config", headers=h).json()["version"]
        blocker = ctx.db.engine.connect()
        tx = blocker.begin()
        blocker.execute(text("LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE"))
        answers: list[object] = []

        def put() -> None:
            try:
                answers.append(httpx.put(f"{base}/api/config", headers=h, timeout=60,
                                         json={"changes": {"pipeline.max_file_mb": 77}, "version": version}))
            except httpx.HTTPError as exc:
                answers.append(exc)

        sender = threading.Thread(target=put)
        sender.start()
        pending = pending_path(data_dir)
        deadline = time.monotonic() + 60
        while not (pending.exists() and (data_dir / "config.json").exists()):
            assert time.monotonic() < deadline, "the PUT never reached its audit insert"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        sender.join(60)
        tx.rollback()
        blocker.close()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert isinstance(answers[0], httpx.HTTPError)  # never acknowledged
    assert json.loads((data_dir / "config.json").read_text())["pipeline"]["max_file_mb"] == 77
    assert _audit_rows(ctx.db.engine) == []
    # the next ki process replays the record: the saved change is audited, once
    status = subprocess.run([*KI, "config", "show"], env=env, capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    (actor, details), = _audit_rows(ctx.db.engine)
    assert actor == "ops" and details["replayed"] is True
    assert details["changes"]["pipeline.max_file_mb"] == {"from": 512, "to": 77}
    assert not pending_path(data_dir).exists() and replay_pending(data_dir, ctx.db.engine) is None
    # a record whose file never replaced the old one (killed before the replace): dropped, nothing changes
    before = (data_dir / "config.json").read_bytes()
    pending_path(data_dir).write_text(json.dumps({"edit_id": "x1", "version": "feedfacefeedface", "actor": "ops",
                                                  "details": {"changes": {}}}))
    assert replay_pending(data_dir, ctx.db.engine) == "dropped"
    assert (data_dir / "config.json").read_bytes() == before and len(_audit_rows(ctx.db.engine)) == 1


def test_cli_edits_are_audited_as_the_os_user(db_url, data_dir, make_ctx):
    import getpass

    ctx = make_ctx(workers=2)
    env = os.environ | {"KI_DATA_DIR": str(data_dir), "KI_DATABASE_URL": db_url}

    def ki(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*KI, *args], env=env, capture_output=True, text=True, timeout=120)

    assert ki("config", "set", "firm.name", "Kanzlei Halvorsen").returncode == 0
    refused = ki("config", "set", "pipeline.max_file_mb", '"64"')
    assert refused.returncode == 2 and "nothing was changed" in refused.stderr + refused.stdout
    assert ki("config", "set", "pipeline.max_file_mb", "64").returncode == 0
    assert ki("config", "unset", "firm.name").returncode == 0
    rows = _audit_rows(ctx.db.engine)
    assert [actor for actor, _ in rows] == [f"cli:{getpass.getuser()}"] * 3
    assert [list(d["changes"]) for _, d in rows] == [["firm.name"], ["pipeline.max_file_mb"], ["firm.name"]]
    assert rows[2][1]["changes"]["firm.name"] == {"from": "Kanzlei Halvorsen", "to": ""}
