"""The ``ki`` command loads the module of the command it runs (ki.cli.app.app_for), and every module otherwise."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
from ki.cli.app import app_for, command_modules
app = app_for(sys.argv[1:])
mods = set(command_modules())
loaded = sorted(n.split(".")[2] for n in sys.modules if n.startswith("ki.cli.") and n.split(".")[2] in mods)
names = {c.name or c.callback.__name__ for c in app.registered_commands}
names = sorted(names | {g.name for g in app.registered_groups})
print(json.dumps({"loaded": loaded, "names": names}))
"""


def _probe(*argv: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_a_command_named_like_its_module_loads_only_that_module():
    got = _probe("search", "Mietvertrag")
    assert got["loaded"] == ["search"]
    assert got["names"] == ["search"]


def test_no_command_or_an_unknown_one_loads_every_module():
    from ki.cli.app import command_modules

    every = sorted(command_modules())
    for argv in ((), ("--help",), ("serach",)):
        got = _probe(*argv)
        assert got["loaded"] == every, argv
        assert {"search", "insert", "status", "source"} <= set(got["names"]), argv


def test_the_app_attribute_has_every_command_group():
    from ki.cli.app import app, command_modules

    names = {c.name or c.callback.__name__ for c in app.registered_commands} | {g.name for g in app.registered_groups}
    assert {"search", "insert", "status", "source", "quarantine", "config", "export", "worker"} <= names
    assert len(command_modules()) > 10
