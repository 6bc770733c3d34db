"""Output that names cannot corrupt, a status table for 80 columns, ``ki --version`` (issue 21, "Output that
cannot be corrupted by names"; ki/cli/common.py ``shown``/``plain``/``print_status``), as the real ``ki``.

Two small text files inserted on the embedded PostgreSQL of a fresh data directory (~1 min under load).
"""

from __future__ import annotations

import json
import re
from importlib.metadata import version

import pytest

pytestmark = pytest.mark.timeout(900)


MARKUP_NAME = "Akte [red]2023 [bold]Vertrag.txt"
ANSI_NAME = "Akte \x1b[31mrot\x1b[0m Vertrag.txt"
ANSI_SHOWN = "Akte \\x1b[31mrot\\x1b[0m Vertrag.txt"  # the ESC characters as text


def test_names_print_as_named_and_status_fits_80_columns(ki):
    base = ki.base
    assert ki("--version").stdout == f"ki {version('ki')}\n"

    estate = base / "estate"
    estate.mkdir()
    (estate / MARKUP_NAME).write_text("Liefervertrag mit Markup im Namen.\n")
    (estate / ANSI_NAME).write_text("Liefervertrag mit Escape-Sequenz im Namen.\n")
    ki("insert", str(estate))

    hits = ki("search", "Liefervertrag").stdout
    assert "\x1b" not in hits  # no escape sequence reaches the terminal
    listed = [m.group(1) for m in re.finditer(r"^ ?\d+\. (.*?)  \(score ", hits, re.MULTILINE)]
    assert sorted(listed) == sorted([f"{estate}/{MARKUP_NAME}", f"{estate}/{ANSI_SHOWN}"]), hits
    as_json = json.loads(ki("search", "Liefervertrag", "--json").stdout)["hits"]
    assert sorted(h["path"] for h in as_json) == sorted([f"{estate}/{MARKUP_NAME}", f"{estate}/{ANSI_NAME}"])

    table = ki("status", extra={"COLUMNS": "80"}).stdout
    lines = table.rstrip("\n").splitlines()
    assert max(len(line) for line in lines) <= 80, table
    assert "…" not in table
    header = " ".join(" ".join(lines[:5]).split())
    for name in ("bucket", "Fetch", "Parse", "Classify", "Relate", "Extract", "metadata", "decisions", "Index"):
        assert name in header, table
    done = next(line for line in lines if line.split()[:1] == ["done"])
    assert done.split()[1:3] == ["2", "2"], table  # Fetch and Parse done for both files
