"""The startup timeline of ``ki insert`` (ki/core/startup.py) and the lazily imported stage modules (the recovery
time after a kill)."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys

from ki.core.startup import FIRST_ROW, Timeline, process_age_seconds
from tests.helpers.outage import wait_until


def test_process_age_counts_from_the_process_start():
    age = process_age_seconds()
    # this interpreter started before the test ran: at least its imports, at most the whole session
    assert 0.0 < age < 24 * 3600
    assert wait_until(lambda: process_age_seconds() >= age + 0.04, 5.0)  # the age follows the clock


def test_timeline_records_each_phase_once_and_logs_at_the_first_row(caplog):
    t = Timeline()
    t.mark("context")  # off until begin(): nothing
    assert t.marks == []
    t.begin()
    t.mark("context")
    sum(i * i for i in range(300_000))  # some CPU inside the scan phase
    t.mark("scan")
    t.mark("context")  # a phase is kept once (its first mark)
    with caplog.at_level(logging.INFO, logger="ki.core.startup"):
        t.mark("first claim", "convert")
        t.mark(FIRST_ROW, "convert")
        t.mark("later")  # after the first row: ignored
        t.mark(FIRST_ROW, "index")
    assert [m.phase for m in t.marks] == ["interpreter and imports", "context", "scan", "first claim", FIRST_ROW]
    walls = [m.wall for m in t.marks]
    cpus = [m.cpu for m in t.marks]
    assert walls == sorted(walls) and cpus == sorted(cpus)
    assert cpus[2] - cpus[1] > 0.005  # the CPU spent between the marks is the phase's
    logged = [r.getMessage() for r in caplog.records if r.name == "ki.core.startup"]
    assert len(logged) == 1
    line = logged[0]
    m = re.match(r"startup timeline: ([\d.]+) s wall, ([\d.]+) s CPU to the first row finished; (.*)", line)
    assert m, line
    assert float(m[1]) == round(t.marks[-1].wall, 2)
    parts = m[3].split(" · ")
    assert [p.split(" +")[0] for p in parts] == ["interpreter and imports", "context", "scan",
                                                  "first claim [convert]", "first row finished [convert]"]
    # the phases' own seconds add up to the total
    assert abs(sum(float(re.search(r"\+([\d.]+) s", p)[1]) for p in parts) - float(m[1])) < 0.03


def test_importing_the_stage_package_imports_no_stage_module():
    code = ("import sys; from ki.stages import STAGE_HANDLERS; "
            "print(sorted(STAGE_HANDLERS)); print([m for m in sys.modules if m.startswith('ki.stages.')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}).stdout.splitlines()
    assert out[0] == str(sorted(["fetch", "convert", "classify_matter", "relate", "extract_metadata",
                                 "extract_decisions", "index"]))
    assert out[1] == "[]"


def test_a_lazy_handler_calls_its_stage_module(monkeypatch):
    import ki.stages.extract_decisions as module
    from ki.stages import STAGE_HANDLERS

    seen = []
    monkeypatch.setattr(module, "handle", lambda ctx: seen.append(ctx) or "outcome")
    assert STAGE_HANDLERS["extract_decisions"]("ctx") == "outcome"
    assert seen == ["ctx"]
