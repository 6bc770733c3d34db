"""The watcher and a file it may not read yet (issue 19 item 2: "Busy/locked files (EBUSY, permission
denied mid-copy) are retried, not quarantined"), with the kernel's own permission checks.

``ki watch`` runs as a real process of an unprivileged user (:mod:`tests.helpers.unprivileged`: as root,
``setpriv`` to the database socket's owner; root would read the file whatever its mode bits). A file
arrives unreadable (mode 000, as a copier holding it mid-copy leaves it): it is not taken, nothing is
quarantined, the other files go on; once readable it is picked up and fetched, complete. About 20-40 s.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from collections.abc import Callable

import pytest
from sqlalchemy import text

from ki.config.loader import set_config_value
from ki.core.taxonomies import PIPELINE_STAGE_ORDER
from tests.helpers.ki_command import KI
from tests.helpers.unprivileged import unprivileged, user_context

pytestmark = pytest.mark.timeout(240)


def _wait(cond: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} not reached within {timeout} s")


def _objects(ctx) -> dict[str, tuple]:
    """external id → (fetch status, content hash) of every document."""
    with ctx.db.engine.connect() as conn:
        return {r.external_id: (r.status, r.content_hash) for r in conn.execute(text("""
            SELECT so.external_id, ps.status, so.content_hash FROM source_object so
            JOIN processing_state ps ON ps.source_object_id = so.id AND ps.stage = 'fetch'"""))}


def _quarantined(ctx) -> int:
    with ctx.db.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM processing_state WHERE status = 'quarantined'")).scalar())


def test_a_file_unreadable_mid_copy_is_retried_not_quarantined_and_taken_once_readable(db_url):
    with user_context(db_url) as ctx:
        data = ctx.settings.data_dir
        for stage in PIPELINE_STAGE_ORDER[1:]:  # the watcher's reading of the source is under test
            set_config_value(data, f"pipeline.stages.{stage}.enabled", False)
        set_config_value(data, "pipeline.watch.settle_seconds", 1)
        root = ctx.place / "akten"
        root.mkdir(mode=0o777)
        root.chmod(0o777)
        (root / "offen.txt").write_text("offen\n", encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("KI_")}
        env |= {"KI_DATA_DIR": str(data), "KI_DATABASE_URL": ctx.settings.database_url, "HOME": str(data)}
        proc = subprocess.Popen(unprivileged(ctx, [*KI, "watch", str(root)]), env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            _wait(lambda: _objects(ctx).get("offen.txt", ("",))[0] == "done", 90, "offen.txt fetched")
            body = "Schriftsatz, vollständig kopiert\n" * 200
            copied = root / "kopie.txt"
            copied.write_text(body, encoding="utf-8")
            copied.chmod(0)  # the copier holds it: permission denied to everyone else
            time.sleep(6)  # settle window (1 s) several times over: tried and refused each time
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert "kopie.txt" not in _objects(ctx)  # never taken half-copied
            assert _quarantined(ctx) == 0
            (root / "weiter.txt").write_text("weiter\n", encoding="utf-8")  # the rest goes on meanwhile
            _wait(lambda: _objects(ctx).get("weiter.txt", ("",))[0] == "done", 60, "weiter.txt fetched")
            assert "kopie.txt" not in _objects(ctx)
            copied.chmod(0o644)  # the copy is finished
            done = _wait(lambda: (_objects(ctx).get("kopie.txt") or ("",))[0] == "done", 60, "kopie.txt fetched")
            assert done
            assert _objects(ctx)["kopie.txt"][1] == hashlib.sha256(body.encode()).hexdigest()
            assert _quarantined(ctx) == 0
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
