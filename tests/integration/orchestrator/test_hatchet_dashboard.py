"""The Hatchet dashboard in a real browser, against the engine ki's batch ran on.

Spec: DESIGN.md's design card (the Hatchet dashboard is a surface ki is used from) and insertion-pipeline.md
"Orchestration" (Hatchet provider: one DAG per document, one task per enabled stage; the processing_state row
is the idempotency boundary, so a replay finds its row terminal and does nothing).

The dashboard is the pinned engine's own React app, built once by ``.ci/install_hatchet_dashboard.sh`` and
served by hatchet-lite (``LITE_STATIC_ASSET_DIR``, ``tests/helpers/hatchet_engine.py``); the browser is
Debian's chromium driven by Playwright, as in the console's browser tests. An operator signs in with the
account the engine's quickstart seeds and sees: one run per document, recognisable by its file (``ki_file``
metadata), filterable by the batch (``ki_run_id``) and by file; each run's tasks, one per enabled stage in
pipeline order; a quarantined document's error class, reason and message in its task's output. Replaying a
document's run and a single task from the dashboard runs the tasks again on the worker and changes nothing:
no row, attempt, chunk or run counter moves. Screenshots go to ``$KI_SCREENSHOT_DIR`` (default: the test's
tmp dir). Cost: ~40-60 s.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from ki.app.launch import launch_insertion
from ki.workflows.client import hatchet_client
from tests.acceptance.test_console_browser import CHROMIUM, Shots, browser_page  # noqa: F401
from tests.helpers.hatchet_engine import dashboard_dir
from tests.helpers.hatchet_harness import ENABLED_STAGES, configure, engine_dags, q, scan
from tests.helpers.outage import wait_until

pytestmark = [pytest.mark.hatchet, pytest.mark.timeout(420)]

#: The account ``hatchet-admin quickstart`` seeds (Hatchet's defaults ``SEED_DEFAULT_ADMIN_EMAIL``/``_PASSWORD``).
ADMIN = ("admin@example.com", "Admin123!!")
BROKEN = "Schmidt AG/Scan kaputt.pdf"
DONE = "Schmidt AG/Mahnung.txt"
FILES: dict[str, bytes] = {
    "Müller GmbH/Kaufvertrag 2024.txt": "Kaufvertrag zwischen Müller GmbH und Schmidt AG.\n".encode(),
    "Müller GmbH/Aktennotiz Telefonat.txt": "Telefonat mit Herrn Müller über die Lieferung.\n".encode(),
    DONE: b"Mahnung wegen offener Rechnung 4711.\n",
    BROKEN: b"%PDF-1.4\n this is no PDF at all\n",
}
UI_TIMEOUT_MS = 30_000


@pytest.fixture
def dashboard(hatchet_engine) -> str:
    """The URL of the engine's dashboard (fails when it was not built: scripts/test.sh builds it)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (scripts/test.sh does) or set KI_CHROMIUM")
    built = dashboard_dir()
    if built is None:
        pytest.fail("the Hatchet dashboard is not built: run `bash .ci/install_hatchet_dashboard.sh` "
                    "(scripts/test.sh does)")
    assert hatchet_engine.static_dir == built, "the session's engine started before the dashboard was built"
    return hatchet_engine.dashboard_url


def _state(ctx) -> dict[str, list]:
    """What a replay must not change: every stage row (with its timestamps), the attempt history, the
    chunks, the batch's members and its run row."""
    return {
        "rows": q(ctx, """SELECT so.path, ps.stage, ps.status, ps.reason, ps.attempts, ps.completions,
                          ps.last_error::text, ps.claim_token, ps.updated_at FROM processing_state ps
                          JOIN source_object so ON so.id = ps.source_object_id ORDER BY 1, 2"""),
        "attempts": q(ctx, "SELECT id, source_object_id, stage, outcome FROM work_item_attempt ORDER BY id"),
        "chunks": q(ctx, "SELECT source_object_id, ordinal, content_hash FROM chunk ORDER BY 1, 2"),
        "members": q(ctx, "SELECT source_object_id, outcome, workflow_run_id, finished_at FROM pipeline_run_object "
                          "ORDER BY 1"),
        "run": q(ctx, "SELECT id, status, processed, done, skipped, quarantined, finished_at FROM pipeline_runs "
                      "ORDER BY id"),
    }


def _replayed(workflow_run_id: str, stages: set[str]) -> bool:
    """True when the engine shows each task of ``stages`` of the run completed on a second attempt."""
    tasks = hatchet_client().runs.get(workflow_run_id).tasks
    again = {t.display_name.rsplit("-", 1)[0] for t in tasks if t.attempt >= 2 and str(t.status).endswith("COMPLETED")}
    return stages <= again


def _sign_in(page, url: str) -> None:
    page.goto(url + "/")
    page.wait_for_url("**/auth/login", timeout=UI_TIMEOUT_MS)
    page.fill("input[type=email]", ADMIN[0])
    page.fill("input[type=password]", ADMIN[1])
    page.click("button:has-text('Sign In')")
    page.wait_for_url("**/runs**", timeout=UI_TIMEOUT_MS)


def _filter(page, *, workflow: str | None = None, metadata: dict[str, str] | None = None) -> None:
    """Set the runs table's filters through its Filters menu, as an operator would."""
    page.locator("button[aria-haspopup=menu]:has-text('Filters')").click()
    menu = page.locator("[role=menu]")
    if workflow:  # the menu lists the first 200 workflows matching its search box (the session has many)
        menu.locator("input[placeholder='Search workflow...']").fill(workflow)
        menu.get_by_text(workflow, exact=True).click()
    for key, value in (metadata or {}).items():
        menu.locator("input[placeholder='ENV']").fill(key)
        menu.locator("input[placeholder='PRODUCTION']").fill(value)
        menu.locator("button:has-text('Add Filter')").first.click()
    page.keyboard.press("Escape")


#: The metadata keys of a document DAG (``ki.workflows.trigger.run_metadata``) and the trace context the SDK adds.
META_KEYS = ("ki_attempt", "ki_file", "ki_object_id", "ki_run_id", "traceparent")


def _metadata(page, row) -> dict[str, str]:
    """The metadata popover of a runs-table row, as {key: value} (lines: a key, then its value unless empty).
    The table refreshes itself every 10 s, which can close an open popover: it is opened again then."""
    dialog = page.locator("[role=dialog]")
    for _ in range(3):
        row.locator("div[aria-haspopup=dialog]").click()
        try:
            expect(dialog).to_contain_text("ki_file", timeout=UI_TIMEOUT_MS // 3)
            text = dialog.inner_text(timeout=2_000)
            break
        except (AssertionError, PlaywrightError):
            page.keyboard.press("Escape")
    else:
        raise AssertionError("the runs table's metadata popover did not stay open")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    out: dict[str, str] = {}
    for i, line in enumerate(lines):
        if line in META_KEYS:
            following = lines[i + 1] if i + 1 < len(lines) else ""
            out[line] = "" if following in META_KEYS else following
    return out


def _open_task(page, stage: str) -> None:
    """Click the ``stage`` node of the run's graph until its task panel is open (a click landing while the
    graph still lays itself out opens nothing); the panel adds a second set of tabs and an Expand button."""
    panel = page.get_by_role("button", name="Expand")
    for _ in range(5):
        page.get_by_text(stage, exact=True).first.click()
        try:
            expect(panel).to_be_visible(timeout=5_000)
            break
        except AssertionError:
            continue
    expect(panel).to_be_visible()
    expect(page.get_by_role("tab", name="Output")).to_have_count(2)
    expect(page.get_by_text(re.compile(rf"^{stage}-\d+$")).first).to_be_visible()


def test_an_operator_sees_kis_work_in_the_hatchet_dashboard(hx, dashboard, make_ctx, tmp_path,
                                                            browser_page):  # noqa: F811
    page, errors = browser_page
    page.set_viewport_size({"width": 1600, "height": 900})  # the runs table's columns side by side
    shots = Shots(page, Path(os.environ.get("KI_SCREENSHOT_DIR") or tmp_path / "screens"))
    root = tmp_path / "share"
    for rel, body in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(body)
    ctx = make_ctx()
    configure(ctx.settings.data_dir, "hatchet")
    hx.start_worker(slots=4)
    scan(ctx, root)
    run_id = launch_insertion(ctx, trigger="test").run_id
    hx.wait_run(ctx, run_id, timeout=240)
    oid = {rel: oid for oid, rel in q(ctx, "SELECT so.id, substr(so.path, length(s.root) + 2) FROM source_object so "
                                           "JOIN source s ON s.id = so.source_id")}
    assert sorted(oid) == sorted(FILES)
    recorded = dict(q(ctx, "SELECT source_object_id, workflow_run_id FROM pipeline_run_object WHERE run_id = :r",
                      r=run_id))
    assert q(ctx, "SELECT status, reason FROM processing_state WHERE source_object_id = :o AND stage = 'convert'",
             o=oid[BROKEN]) == [("quarantined", "corrupt")]
    workflow = next(iter({d.workflow_name for d in engine_dags(hx.namespace, run_id)}))
    # the engine's read model is written from a buffer: wait until it lists every DAG as completed
    assert wait_until(lambda: sorted(str(d.status) for d in engine_dags(hx.namespace, run_id))
                      == ["V1TaskStatus.COMPLETED"] * len(FILES), 60, step=0.5), engine_dags(hx.namespace, run_id)

    # one run per document, recognisable by its file, filtered by the batch (and this test's workflow)
    _sign_in(page, dashboard)
    _filter(page, workflow=workflow, metadata={"ki_run_id": str(run_id)})
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(len(FILES), timeout=UI_TIMEOUT_MS)
    seen = {}
    for i in range(len(FILES)):
        meta = _metadata(page, rows.nth(i))
        assert meta["ki_run_id"] == str(run_id)
        seen[meta["ki_file"]] = meta["ki_object_id"]
        if meta["ki_file"] == BROKEN:
            shots("runs-of-a-batch-with-a-files-metadata", full_page=False, animations="disabled")
        page.keyboard.press("Escape")
    assert seen == {rel: str(o) for rel, o in oid.items()}

    # filtered by one file: its run alone
    _filter(page, metadata={"ki_file": BROKEN})
    expect(rows).to_have_count(1, timeout=UI_TIMEOUT_MS)
    shots("runs-filtered-by-file", full_page=False, animations="disabled")

    # the quarantined document's run: one task per enabled stage, in order; the error in convert's output
    broken_run = recorded[oid[BROKEN]]
    rows.first.locator(f"a[href$='/runs/{broken_run}']").click()
    page.wait_for_url(f"**/runs/{broken_run}", timeout=UI_TIMEOUT_MS)
    nodes = [page.get_by_text(stage, exact=True).first for stage in ENABLED_STAGES]
    for node in nodes:
        expect(node).to_be_visible(timeout=UI_TIMEOUT_MS)
    xs = [node.bounding_box()["x"] for node in nodes]
    assert xs == sorted(xs) and len(set(xs)) == len(xs), dict(zip(ENABLED_STAGES, xs, strict=True))
    engine_tasks = {t.display_name.rsplit("-", 1)[0] for t in hatchet_client().runs.get(broken_run).tasks}
    assert engine_tasks == {*ENABLED_STAGES, "record_failure-on-failure"}
    _open_task(page, "convert")
    page.get_by_role("tab", name="Output").last.click()
    output = page.locator("pre").filter(has_text="error_class").first
    expect(output).to_contain_text('"status": "quarantined"', timeout=UI_TIMEOUT_MS)
    shown = json.loads(output.inner_text())
    assert (shown["stage"], shown["status"], shown["error_class"], shown["reason"]) == (
        "convert", "quarantined", "UnsupportedDocument", "corrupt"), shown
    assert shown["message"].startswith("Scan kaputt.pdf: "), shown
    shots("quarantined-document-convert-output", full_page=False, animations="disabled")

    # replays from the dashboard are harmless: the task (convert, and index after it) and a whole run
    before = _state(ctx)
    page.get_by_role("button", name="Replay").last.click()  # the task panel's
    assert wait_until(lambda: _replayed(broken_run, {"convert", "index"}), 120, step=0.5), \
        hatchet_client().runs.get(broken_run).tasks
    page.keyboard.press("Escape")
    done_run = recorded[oid[DONE]]
    page.goto(f"{dashboard}/tenants/{hx.engine.tenant_id}/runs/{done_run}")
    page.get_by_role("button", name="Replay").first.click()
    assert wait_until(lambda: _replayed(done_run, set(ENABLED_STAGES)), 120, step=0.5), \
        hatchet_client().runs.get(done_run).tasks
    page.reload()
    expect(page.get_by_text("Succeeded", exact=False).first).to_be_visible(timeout=UI_TIMEOUT_MS)
    shots("replayed-run", full_page=False, animations="disabled")
    assert _state(ctx) == before
    # each replayed task found its row terminal: nothing executed
    for run, stages in ((broken_run, ("convert", "index")), (done_run, ENABLED_STAGES)):
        outputs = {t.display_name.rsplit("-", 1)[0]: t.output for t in hatchet_client().runs.get(run).tasks}
        for stage in stages:
            assert outputs[stage]["executions"] == [], (run, stage, outputs[stage])
    assert not [e for e in errors if "ResizeObserver" not in e], errors
