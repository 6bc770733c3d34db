"""The run banner's Cancel button in a real browser against a real ``ki serve`` (ki.app.cancel).

A server (``tests/helpers/gated_serve.py``: its fetches wait for a gate file) holds a run whose fetches cannot
finish; the banner shows the run with **Cancel run**; the click (confirmed) asks the API to cancel: the banner says
``cancelling`` while the two fetches in hand wait; the gate opens, they finish, the run ends ``cancelled`` and the
banner says so. Every other row is as it was before the run. Screenshots go to ``$KI_SCREENSHOT_DIR`` (default: the
test's tmp dir); axe-core finds no serious or critical violation. Cost: ~30-60 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect
from sqlalchemy import text

from tests.acceptance.test_console_browser import CHROMIUM, Shots, _free_port, axe_serious, browser_page  # noqa: F401
from tests.helpers.console import stop_served, wait_healthy

pytestmark = pytest.mark.timeout(600)
GATED = Path(__file__).resolve().parents[1] / "helpers" / "gated_serve.py"
MODEL_STAGES_OFF = {"pipeline": {"stages": {s: {"enabled": False} for s in
                                            ("classify_matter", "relate", "extract_metadata", "extract_decisions")}}}


def test_cancel_from_the_run_banner(make_ctx, db_url, data_dir, tmp_path, browser_page):  # noqa: F811
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (scripts/test.sh does) or set KI_CHROMIUM")
    (data_dir / "config.json").write_text(json.dumps(MODEL_STAGES_OFF))
    root = tmp_path / "akten"
    root.mkdir()
    for i in range(8):
        (root / f"Schreiben {i}.txt").write_text(f"Schreiben {i} an die Mandantschaft.\n", encoding="utf-8")
    ctx = make_ctx(workers=2)
    from ki.adapters.sources.scan import register_local_source, scan_source
    from ki.app.tokens import create_token

    scan_source(ctx, register_local_source(ctx, root))
    with ctx.db.engine.connect() as conn:
        before = {r.id: (r.status, r.attempts) for r in conn.execute(text(
            "SELECT id, status, attempts FROM processing_state"))}
    token = create_token(ctx.db.engine, name="Kanzlei-IT", scopes=["read:pipeline", "write:pipeline"])[1]
    gate = tmp_path / "gate"
    port = _free_port()
    env = os.environ | {"KI_DATA_DIR": str(data_dir), "KI_DATABASE_URL": db_url, "KI_WORKERS": "2",
                        "KI_INSERT_WAIT_RETRY_SECONDS": "0"}
    log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, str(GATED), str(gate), "serve", "--port", str(port), "--log-level",
                             "warning"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    page, errors = browser_page
    shots = Shots(page, Path(os.environ.get("KI_SCREENSHOT_DIR") or tmp_path / "screens"))
    try:
        wait_healthy(base, proc, tmp_path / "serve.log")
        page.goto(base + "/login")
        page.fill("#token", token)
        page.click("button[type=submit]")
        page.wait_for_selector(".stage")
        page.locator("#banner button.primary", has_text="Start insertion run").click()
        page.wait_for_selector("#cancel-run", timeout=30_000)
        assert "is running" in page.inner_text("#banner h2")
        shots("run-with-cancel", full_page=False)
        page.once("dialog", lambda d: d.accept())
        page.click("#cancel-run")
        expect(page.locator("#banner h2")).to_contain_text("is cancelling", timeout=30_000)
        expect(page.locator("#cancel-run")).to_be_disabled()
        a11y = axe_serious(page)
        shots("cancelling", full_page=False)
        gate.touch()  # the two fetches in hand finish; nothing else is claimed
        expect(page.locator("#banner")).to_contain_text("cancelled", timeout=60_000)
        assert "No run is active" in page.inner_text("#banner h2")
        shots("cancelled", full_page=False)
        assert a11y == [] and errors == []
    finally:
        gate.touch()
        stop_served(proc, log)
    with ctx.db.engine.connect() as conn:
        run = conn.execute(text("SELECT id, status, done, cancelled_by FROM pipeline_runs")).one()
        after = {r.id: (r.status, r.attempts) for r in conn.execute(text(
            "SELECT id, status, attempts FROM processing_state"))}
    assert (run.status, run.done, run.cancelled_by) == ("cancelled", 2, "Kanzlei-IT")
    moved = {k for k in before if after[k] != before[k]}
    assert len(moved) == 4  # two fetches done, their two converts unlocked (pending); every other row as before
    assert sorted(after[k][0] for k in moved) == ["done", "done", "pending", "pending"]
