"""The repository's sample estate, copied so that every file and folder has one mtime (a ``git clone``, a copy,
a restore): its three matters are recognised by the default reference formats, and its documents are dated by
their content or their file names, never by the copy's mtime — nor does ``ki search --since`` take that mtime
for the date of a document found undated.

Cost: one ``ki insert`` of the 29-file sample (most of it the built-in OCR of its two scans), 1-3 minutes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil

import pytest

from tests.helpers.paths import REPO_ROOT

pytestmark = pytest.mark.timeout(900)

COPIED = dt.datetime(2026, 1, 15, 12, 0, tzinfo=dt.UTC)
MATTERS = {"2023-112", "2024-017", "2024-031"}
#: Files whose text states no date of its own: their names do.
NAME_DATED = {
    "2023-11-03 Kündigung Arbeitgeber.pdf": "2023-11-03",
    "2023-11-20 Kündigungsschutzklage.docx": "2023-11-20",
    "Aktennotiz 2024-02-06 Telefonat Lindqvist.txt": "2024-02-06",
    "2024-03-05 call note Halvorsen.txt": "2024-03-05",
    "2024-06-28 Mietvertrag Gewerberaum unterzeichnet.pdf": "2024-06-28",
}


def test_a_copied_sample_keeps_its_three_matters_and_its_file_name_dates(ki):
    estate = ki.base / "estate"
    shutil.copytree(REPO_ROOT / "samples" / "estate", estate)
    stamp = COPIED.timestamp()
    for path in [estate, *estate.rglob("*")]:
        os.utime(path, (stamp, stamp))

    ki("insert", str(estate), timeout=840)
    listed = ki("matters", "list").stdout
    assert all(ref in listed for ref in MATTERS), listed
    rows = [json.loads(line) for line in ki("export", "--json").stdout.splitlines() if line.strip()]
    mandate = [r for r in rows if r["path"].startswith("Mandate/")]
    assert {r["matter_reference"] for r in mandate} == MATTERS
    assert not any(r["matter_placeholder"] for r in mandate)
    by_name = {r["path"].rsplit("/", 1)[-1]: r for r in rows if not r["embedded"]}
    for name, date in NAME_DATED.items():
        assert (by_name[name]["doc_date"], by_name[name]["doc_date_source"]) == (date, "file_name"), name
    assert not [r["path"] for r in rows if r["doc_date_source"] == "mtime" or r["doc_date"] == "2026-01-15"]

    def hits(*args: str) -> list[str]:
        return [h["path"] for h in json.loads(ki("search", *args, "--json").stdout)["hits"]]

    undated = [r["path"] for r in rows if not r["doc_date"]]
    assert any(p.endswith("04 Belege/Lieferschein 4711.pdf") for p in undated), undated
    assert hits("Lieferschein") and hits("Lieferschein", "--since", "2026-01-01") == []  # the copy's day dates nothing
    dated = hits("Lieferschein", "--since", "2024-01-01")
    assert dated and not any(p.endswith("04 Belege/Lieferschein 4711.pdf") for p in dated), dated
