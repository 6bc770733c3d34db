"""``ki work list|show|groups|retry|cancel`` as a user runs them: each a ``ki`` process on the test's database.

Issue 18 item 5: the same filters as the API, ``--dry-run``, ``--json``; a bulk retry asks (or takes
``--yes``), and a retry's run finishes the work now that the cause is gone (the ``ki`` process has the
real handlers: the faults were only in the test process). Cost: ~30-60 s (a run plus eight processes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers.state import rows
from tests.helpers.work_items import CORRUPT, OUTAGE, faulty_estate

pytestmark = pytest.mark.timeout(600)


def ki(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ki.cli", "work", *args], capture_output=True, text=True,
                          input=stdin, env=os.environ.copy(), timeout=300)


def test_ki_work_commands(make_ctx, data_dir, tmp_path, monkeypatch):
    ctx, ids, _faults, _headers = faulty_estate(make_ctx, data_dir, tmp_path / "share", monkeypatch)
    groups = json.loads(ki("groups", "kind=convert", "--json").stdout)["groups"]
    assert sorted((g["count"], g["infrastructure"]) for g in groups) == [(3, True), (5, False)]
    text_out = ki("groups").stdout
    assert "signature=" in text_out and "is not a zip file" in text_out

    listed = json.loads(ki("list", "status=failed", "kind=convert", "--json").stdout)["items"]
    assert sorted(i["source_object_id"] for i in listed) == sorted(ids[i] for i in CORRUPT)
    page = json.loads(ki("list", "kind=fetch", "--limit", "5", "--json").stdout)
    assert len(page["items"]) == 5 and page["next_cursor"]
    second = json.loads(ki("list", "kind=fetch", "--limit", "5", "--cursor", page["next_cursor"], "--json").stdout)
    assert not {i["id"] for i in page["items"]} & {i["id"] for i in second["items"]}
    bad = ki("list", "colour=red")
    assert bad.returncode == 2 and "NAME=VALUE" in bad.stderr and "Traceback" not in bad.stderr

    shown = ki("show", listed[0]["id"])
    assert shown.returncode == 0 and "quarantined" in shown.stdout and "ValueError" in shown.stdout
    assert ki("show", "work_item:00000000-0000-0000-0000-000000000000").returncode == 2

    dry = ki("retry", "kind=convert", "infrastructure=true", "--dry-run")
    assert dry.returncode == 0 and "3 work items would be retried" in dry.stdout
    assert all(r["convert"]["status"] == "failed" for r in (rows(ctx, ids[i]) for i in OUTAGE))
    refused = ki("retry", "kind=convert", "infrastructure=true", "--no-run", stdin="n\n")
    assert refused.returncode == 1
    done = ki("retry", "kind=convert", "infrastructure=true", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["acted"] == 3 and "run" in done.stderr
    assert all(rows(ctx, ids[i])["index"]["status"] == "done" for i in OUTAGE)

    cancelled = ki("cancel", listed[0]["id"])
    assert cancelled.returncode == 0 and "cancelled" in cancelled.stdout
    assert json.loads(ki("list", "status=cancelled", "--json").stdout)["items"][0]["id"] == listed[0]["id"]
    again = ki("retry", listed[0]["id"], "--no-run")
    assert again.returncode == 0 and "queued" in again.stdout
