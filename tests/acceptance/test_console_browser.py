"""The "Insertion pipeline" page in a real browser against a real ``ki serve`` on a seeded database.

Issue 17 "Tests": log in, see the counts, change a setting, see the unsaved-changes bar and the
button label change, save and re-run, watch the banner until the run completes, open the re-run
dialog, retry a quarantined file; axe-core finds no serious or critical violation in any state;
screenshots of each state go to ``$KI_SCREENSHOT_DIR`` (default: the test's tmp dir).

The browser is Debian's ``chromium`` driven by Playwright through ``executable_path`` (a Playwright
browser download is impossible here; ``scripts/test.sh`` installs the package when it is absent).
The server runs as its own process (``python -m ki.cli serve``) with two workers, on the test's
database and data directory, with ``KI_PIPELINE__MAX_FILE_MB`` pinned. Cost: ~40-70 s.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from tests.helpers.console import insert_estate, small_estate, stop_served, wait_healthy
from tests.helpers.outage import wait_until

pytestmark = pytest.mark.timeout(600)

CHROMIUM = os.environ.get("KI_CHROMIUM", "/usr/bin/chromium")
#: The machine has no network: nothing in the browser may try to reach out.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
EXTRA_FILES = 20
IDLE = re.compile(r"^No run is active")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(make_ctx, db_url, data_dir, shared, tmp_path):
    """A real ``ki serve`` on a database holding the small estate (+ 40 generated notes) after one run,
    with Extract decisions switched off (its rows parked as disabled); yields (base URL, token, ctx)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (scripts/test.sh does) or set KI_CHROMIUM")
    off = {"pipeline": {"stages": {"extract_decisions": {"enabled": False}}}}
    (data_dir / "config.json").write_text(json.dumps(off))
    root = small_estate(shared, tmp_path)
    for i in range(EXTRA_FILES):
        note = root / "Notizen" / f"Aktennotiz {i:02d}.txt"
        note.parent.mkdir(exist_ok=True)
        note.write_text(f"Aktennotiz {i}\n\nTelefonat mit dem Mandanten über den Aufhebungsvertrag, Punkt {i}.\n",
                        encoding="utf-8")
    ctx = make_ctx(workers=2)
    assert insert_estate(ctx, root).status == "completed"
    from ki.app.tokens import create_token

    token = create_token(ctx.db.engine, name="Kanzlei-IT", scopes=["read:pipeline", "write:pipeline"])[1]
    port = _free_port()
    env = os.environ | {"KI_DATA_DIR": str(data_dir), "KI_DATABASE_URL": db_url, "KI_WORKERS": "2",
                        "KI_PIPELINE__MAX_FILE_MB": "64", "KI_INSERT_WAIT_RETRY_SECONDS": "0"}
    env.pop("KI_LLM_BASE_URL", None)
    log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "ki.cli", "serve", "--port", str(port), "--log-level", "warning"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc, tmp_path / "serve.log")
        yield base, token, ctx
    finally:
        stop_served(proc, log)


@pytest.fixture
def browser_page(tmp_path):
    """A Playwright page in Debian's chromium with a fresh profile (1280×900, locale en-US)."""
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="ki-chromium-")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                                       headless=True, viewport={"width": 1280, "height": 900},
                                                       locale="en-US")  # a 12-hour locale: times must stay 24-hour
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        try:
            yield page, errors
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


class Shots:
    """Screenshots of each state, numbered in order."""

    def __init__(self, page, folder: Path):
        self.page, self.folder, self.n = page, folder, 0
        folder.mkdir(parents=True, exist_ok=True)

    def __call__(self, name: str, *, full_page: bool = True, **options) -> Path:
        """Save the page as ``NN-name.png``; ``options`` go to Playwright's ``page.screenshot``."""
        self.n += 1
        path = self.folder / f"{self.n:02d}-{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page, **options)
        return path


def axe_serious(page) -> list[str]:
    """axe-core's serious and critical violations on the page as it is now (none expected)."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']][:3]}"
            for v in results.response["violations"] if v["impact"] in ("serious", "critical")]


def test_console_in_a_real_browser(served, browser_page, tmp_path):
    base, token, ctx = served
    page, errors = browser_page
    shots = Shots(page, Path(os.environ.get("KI_SCREENSHOT_DIR") or tmp_path / "screens"))
    a11y: dict[str, list[str]] = {}

    # sign in
    page.goto(base + "/")
    assert page.url.endswith("/login")
    page.fill("#token", "ki_not-a-token")
    page.click("button[type=submit]")
    assert "not valid" in page.inner_text(".alert")
    a11y["login"] = axe_serious(page)
    shots("login-refused")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_selector(".stage")

    # the counts: seven cards in the spec's order with the eight legends
    cards = page.locator("li.stage")
    assert cards.count() == 7
    assert [cards.nth(i).locator("h3").inner_text() for i in range(7)] == [
        "Fetch", "Parse", "Classify", "Relate", "Extract metadata", "Extract decisions", "Index"]
    files = 11 + EXTRA_FILES

    def legend(stage: str) -> dict[str, int]:
        items = page.locator(f'li.stage[data-stage="{stage}"] .legend li:not(.blocked-note)')
        return {items.nth(i).locator(".label").inner_text():
                int(items.nth(i).locator("b").inner_text().replace(",", "")) for i in range(items.count())}

    fetch = legend("fetch")
    assert list(fetch) == ["queued", "running", "done", "awaiting retry", "waiting on the stage before",
                           "skipped — stage is off", "skipped", "quarantined"]
    assert fetch["done"] == files
    assert legend("convert")["quarantined"] == 2
    assert legend("extract_decisions")["skipped — stage is off"] == files - 2
    assert "Signed in as Kanzlei-IT" in page.inner_text("header")
    # an env-pinned field is locked and names its variable
    pinned = page.locator("#set-pipeline-max_file_mb")
    assert pinned.is_disabled() and pinned.input_value() == "64"
    assert "KI_PIPELINE__MAX_FILE_MB" in page.inner_text("#run-settings")
    page.wait_for_selector('li.stage[data-stage="classify_matter"] .chip')  # the model chip from the catalog
    a11y["overview"] = axe_serious(page)
    shots("overview")

    # a change that needs no run: the bar appears, the button says Save
    assert page.locator("#savebar").is_hidden()
    page.fill("#attempts-relate", "5")
    page.press("#attempts-relate", "Tab")
    assert page.locator("#savebar").is_visible()
    assert page.inner_text("#save") == "Save"
    assert "Relate: Attempts before quarantine: 3 → 5" in page.inner_text("#savebar-summary")
    shots("unsaved-save", full_page=False)
    # re-enabling a stage needs a run: the label changes, with the reason
    page.locator('label[for="enabled-extract_decisions"]').click()
    assert page.inner_text("#save") == "Save and re-run"
    assert "re-enabling Extract decisions" in page.inner_text("#savebar-summary")
    a11y["unsaved"] = axe_serious(page)
    shots("unsaved-save-and-rerun", full_page=False)
    page.click("#save")
    page.wait_for_selector('[data-key="saved"]')
    assert "Saved 2 changes" in page.inner_text('[data-key="saved"]')
    page.wait_for_selector("#savebar", state="hidden")
    expect(page.locator("#banner h2")).to_have_text(IDLE, timeout=120_000)
    off_count = page.locator('li.stage[data-stage="extract_decisions"] .legend li:not(.blocked-note)').nth(5)
    expect(off_count.locator("b")).to_have_text(
        "0", timeout=60_000)
    saved = json.loads((Path(ctx.settings.data_dir) / "config.json").read_text())
    assert saved["pipeline"]["stages"]["relate"]["max_attempts"] == 5
    assert saved["pipeline"]["stages"]["extract_decisions"]["enabled"] is True
    shots("saved-and-rerun")

    # the re-run dialog with the preview, then a re-run whose banner we watch until it completes
    page.locator('li.stage[data-stage="relate"] button', has_text="Re-run all files").click()
    page.wait_for_selector("#rerun-dialog .big")
    preview = httpx.get(base + "/api/stages/relate/rerun-preview",
                        headers={"Authorization": f"Bearer {token}"}).json()
    assert page.inner_text("#rerun-dialog .big") == str(preview["files"]) == str(files - 2)
    assert "Extract metadata, Extract decisions, Index" in page.inner_text("#rerun-dialog")
    a11y["rerun-dialog"] = axe_serious(page)
    shots("rerun-dialog", full_page=False)
    page.locator("#rerun-dialog button.primary").click()
    page.wait_for_selector("#banner .progress", timeout=30_000)
    assert "is running" in page.inner_text("#banner h2")
    a11y["running"] = axe_serious(page)
    shots("run-banner", full_page=False)
    expect(page.locator("#banner h2")).to_have_text(IDLE, timeout=300_000)
    assert "completed" in page.inner_text("#banner")
    assert "completed" in page.inner_text("#runs tbody tr:first-child")

    # a quarantined file: details, then retry (the tooltip warns about deterministic failures)
    rows = page.locator("#quarantine tbody tr")
    assert rows.count() == 2
    first = rows.first
    tip = first.locator('[role="tooltip"]').text_content()
    assert "deterministic" in tip and "unless the file itself changed" in tip
    first.locator("button", has_text="Details").click()
    page.wait_for_selector("#detail-dialog dl")
    assert "Error class" in page.inner_text("#detail-dialog")
    a11y["detail-dialog"] = axe_serious(page)
    shots("quarantine-detail", full_page=False)
    page.keyboard.press("Escape")
    first.locator("button", has_text="Retry").focus()
    shots("retry-tooltip", full_page=False)
    first.locator("button", has_text="Retry").click()
    expect(page.locator('[data-key="saved"]')).to_contain_text("Released", timeout=30_000)
    note = page.inner_text('[data-key="saved"]')
    assert "at convert" in note and "quarantine again" in note
    retry_run = re.search(r"Run (\d+) ", note).group(1)
    expect(page.locator("#banner")).to_contain_text(f"Last run {retry_run} completed", timeout=120_000)
    with ctx.db.engine.connect() as conn:
        from sqlalchemy import text

        actor = conn.execute(text("SELECT actor FROM audit_log WHERE action = 'quarantine_retry'")).scalar_one()
    assert actor == "Kanzlei-IT"
    expect(page.locator("#quarantine tbody tr").first.locator("button", has_text="Retry")).to_be_enabled()
    shots("after-retry")

    # a narrow screen, and an error a person can act on (the session ends when the token is revoked)
    page.set_viewport_size({"width": 390, "height": 844})
    wide = page.evaluate("""() => [...document.querySelectorAll('main *')].filter(
        (el) => el.getBoundingClientRect().right > document.documentElement.clientWidth + 1
                && el.offsetParent !== null && getComputedStyle(el).position !== 'absolute')
        .map((el) => el.tagName + '.' + el.className).slice(0, 5)""")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, wide  # reflows: no sideways scrolling
    page.fill("#attempts-index", "4")
    page.press("#attempts-index", "Tab")
    a11y["narrow"] = axe_serious(page)
    shots("narrow-unsaved", full_page=False)
    page.click("#discard")
    shots("narrow")
    from ki.app.tokens import revoke
    from ki.store.tokens import list_tokens

    with ctx.db.engine.connect() as conn:
        revoke(ctx.db.engine, next(t.id for t in list_tokens(conn) if t.name == "Kanzlei-IT"))
    page.locator("#banner button.primary").click()
    page.wait_for_selector('[data-key="auth"]')
    assert "session has ended" in page.inner_text('[data-key="auth"]')
    shots("session-ended", full_page=False)

    assert errors == []
    assert {k: v for k, v in a11y.items() if v} == {}


def test_console_search_runs_and_blocked_rows(served, browser_page, tmp_path):
    """The knowledge team's page: the search box (``/v1/search`` as the signed-in token's principal, a
    file missing from the share marked), sync runs in "Recent runs" with a kind filter, 24-hour times in
    an en-US browser, the re-run dialog's wording and the rows a quarantine blocks on the cards."""
    base, _, ctx = served
    page, errors = browser_page
    shots = Shots(page, Path(os.environ.get("KI_SCREENSHOT_DIR") or tmp_path / "screens"))
    from ki.app.tokens import create_token

    token = create_token(ctx.db.engine, name="Wissensteam", scopes=["read:pipeline", "write:pipeline", "search"],
                         principal="user:anna")[1]
    with ctx.db.engine.connect() as conn:
        from sqlalchemy import text

        source_id, root = conn.execute(text("SELECT id, root FROM source")).one()
    gone = Path(root) / "Notizen" / "Aktennotiz 07.txt"
    gone.unlink()  # a sync finds it missing: searchable, marked, until the confirmations agree
    auth = {"Authorization": f"Bearer {token}"}
    sync = httpx.post(base + "/api/actions/sync", json={"source_id": source_id}, headers=auth, timeout=30)
    assert sync.status_code == 202, sync.text

    def sync_done() -> bool:
        runs = httpx.get(base + "/api/runs?kind=sync", headers=auth, timeout=30).json()["runs"]
        return bool(runs) and runs[0]["status"] == "completed"
    assert wait_until(sync_done, 180, step=0.5), "the sync run did not complete"

    page.goto(base + "/")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_selector(".stage")

    # the rows behind the two Parse quarantines are counted apart on every later card
    for stage in ("classify_matter", "relate", "extract_metadata", "index"):
        note = page.locator(f'li.stage[data-stage="{stage}"] .legend li.blocked-note')
        assert note.locator(".label").inner_text() == "of which blocked by a quarantined stage"
        assert note.locator("b").inner_text() == "2"
    assert page.locator('li.stage[data-stage="fetch"] .legend li.blocked-note').count() == 0

    # Recent runs: the sync run is listed, the filter shows either kind; times on the 24-hour clock
    expect(page.locator('#runs tbody tr[data-kind="sync"]').first).to_be_visible(timeout=30_000)
    started = page.locator("#runs tbody tr td[data-label=Started]").first.inner_text().strip()
    assert re.fullmatch(r"\d\d:\d\d", started), started  # today, en-US locale: 24-hour, no AM/PM
    page.select_option("#q-run-kind", "sync")
    expect(page.locator('#runs tbody tr:not([data-kind="sync"])')).to_have_count(0, timeout=30_000)
    assert "scan of source" in page.inner_text("#runs tbody tr:first-child")
    page.locator("#runs").scroll_into_view_if_needed()
    a11y = {"runs": axe_serious(page)}
    shots("runs-sync-filter", full_page=False)
    page.select_option("#q-run-kind", "insertion")
    expect(page.locator('#runs tbody tr[data-kind="sync"]')).to_have_count(0, timeout=30_000)
    assert page.locator("#runs tbody tr").count() >= 1
    page.select_option("#q-run-kind", "")
    expect(page.locator('#runs tbody tr[data-kind="sync"]').first).to_be_visible(timeout=30_000)

    # Sources: the folder, who sees it (read from the share) and how many documents everyone may read
    src = page.locator(f'#sources tbody tr[data-source="{source_id}"]')
    expect(src).to_be_visible(timeout=30_000)
    assert src.get_attribute("data-permissions") == "share"
    assert src.locator("td[data-label='Who sees it']").inner_text().strip() == "From the share"
    assert src.locator("td[data-label=Folder]").inner_text().strip() == str(root)
    with ctx.db.engine.connect() as conn:
        indexed = conn.execute(text("SELECT count(DISTINCT c.source_object_id) FROM chunk c JOIN source_object so "
                                    "ON so.id = c.source_object_id WHERE so.deleted_at IS NULL")).scalar_one()
        opened = conn.execute(text("SELECT count(DISTINCT c.source_object_id) FROM chunk c JOIN source_object so "
                                   "ON so.id = c.source_object_id WHERE so.deleted_at IS NULL "
                                   "AND '*' = ANY(c.allowed_principals)")).scalar_one()
    everyone = src.locator("td[data-label=Everyone]").inner_text().strip()
    if opened:
        assert re.fullmatch(rf"(all )?{opened:,} of {indexed:,} open to everyone", everyone), everyone
    else:
        assert everyone == f"{indexed:,} indexed, none open to everyone", everyone
    page.locator("#sources").scroll_into_view_if_needed()
    a11y["sources"] = axe_serious(page)
    shots("sources", full_page=False)

    # the search box: as the token's principal, hits marked, the missing file said so
    assert "user:anna" in page.inner_text(".search-form label")
    page.fill("#search-q", "Aktennotiz Aufhebungsvertrag")
    page.click(".search-form button[type=submit]")
    page.wait_for_selector("#search-results .hit")
    hits = page.locator("#search-results .hit")
    assert hits.count() == 10 and page.locator("#search-results button", has_text="More results").count() == 1
    assert page.locator("#search-results .hit mark").count() >= 10
    page.click("#search-results button:has-text('More results')")
    expect(hits).to_have_count(20, timeout=30_000)
    page.fill("#search-q", "Aktennotiz 7")
    page.click(".search-form button[type=submit]")
    missing = page.locator("#search-results .hit", has=page.locator(".file-name", has_text="Aktennotiz 07.txt"))
    expect(missing).to_have_count(1, timeout=30_000)
    assert re.search(r"missing from the share since \d{4}-\d\d-\d\d \d\d:\d\d UTC: it leaves search once the "
                     r"deletion is confirmed", missing.locator(".hit-missing").inner_text())
    page.locator("#search").scroll_into_view_if_needed()
    a11y["search"] = axe_serious(page)
    shots("search-box", full_page=False)

    # the re-run dialog says what its two skip counts are
    page.locator('li.stage[data-stage="relate"] button', has_text="Re-run all files").click()
    page.wait_for_selector("#rerun-dialog .big")
    said = page.inner_text("#rerun-dialog")
    assert re.search(r"[\d,]+ skipped by the stage, [\d,]+ while it was switched off", said), said
    page.keyboard.press("Escape")
    page.fill("#search-q", '"Aktennotiz 7"')  # one hit: the page as docs/console.png shows it
    page.click(".search-form button[type=submit]")
    expect(page.locator("#search-results .hit")).to_have_count(1, timeout=30_000)
    page.evaluate("window.scrollTo(0, 0)")
    shots("overview-blocked-search")

    assert errors == []
    assert {k: v for k, v in a11y.items() if v} == {}
