"""``ki source list|remove|rescan`` and the folders ``ki insert`` refuses (issue 21, "Sources cannot be
managed"; ki/adapters/sources/registry.py, ki/store/sources.py), driven as the real ``ki`` command.

One test, one fresh data directory on the embedded PostgreSQL: four small text files inserted twice
and rescanned once (~1-2 min on a loaded 2-core machine, most of it interpreter starts).
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(900)


def test_sources_are_listed_refused_removed_restored_and_rescanned(ki):
    base = ki.base

    def sources() -> list[dict]:
        return json.loads(ki("source", "list", "--json").stdout)

    estate = base / "folders" / "estate"
    (estate / "sub").mkdir(parents=True)
    for i in range(3):
        (estate / "sub" / f"akte-{i}.txt").write_text(f"Akte {i}: Liefervertrag zwischen A und B.\n")
    (estate / "notiz.txt").write_text("Notiz zum Liefervertrag.\n")

    missing = base / "folders" / "missing"
    assert ki("insert", str(missing), code=2).stderr.splitlines() == [
        f"refused: no such folder: {missing} (nothing was registered)"]
    afile = estate / "notiz.txt"
    assert ki("insert", str(afile), code=2).stderr.splitlines() == [
        f"refused: {afile} is a file: ki insert takes a folder (nothing was registered)"]
    assert sources() == []  # no row written by either

    ki("insert", str(estate))
    [src] = sources()
    assert (src["id"], src["path"], src["files"], src["quarantined"], src["last_run"]["status"]) == \
        (1, str(estate), 4, 0, "completed")
    assert src["last_scan_at"] and src["watcher"] is None

    assert ki("insert", str(estate / "sub"), code=2).stderr.splitlines() == [
        f"refused: {estate / 'sub'} is inside source 1 ({estate}), which already covers its files; run "
        f"`ki insert {estate}` or `ki source rescan 1` instead (nothing was registered)"]
    assert ki("insert", str(base / "folders"), code=2).stderr.splitlines() == [
        f"refused: {base / 'folders'} contains source 1 ({estate}): its files would be processed twice; remove "
        "it first with `ki source remove 1` (nothing was registered)"]
    assert [s["id"] for s in sources()] == [1]
    table = ki("source", "list").stdout
    assert str(estate) in table and "completed" in table

    assert ki("source", "remove", "1", code=2).stderr.splitlines() == [
        f"refused: removing source 1 ({estate}): 4 files, 4 documents needs confirmation; pass --yes"]
    removed = ki("source", "remove", str(estate), "--yes")
    assert removed.stdout.strip() == f"removed source 1 ({estate}): 4 files, 4 documents: 4 documents tombstoned, " \
                                     "history kept"
    assert sources() == []
    assert json.loads(ki("search", "Liefervertrag", "--json").stdout)["hits"] == []
    assert ki("source", "rescan", "1", code=2).stderr.splitlines() == [
        f"refused: source 1 ({estate}) was removed; `ki insert {estate}` restores it"]

    restored = ki("insert", str(estate))
    assert f"source 1 ({estate}) was removed: restored" in restored.stderr.splitlines()
    assert [(s["id"], s["files"]) for s in sources()] == [(1, 4)]
    assert len(json.loads(ki("search", "Liefervertrag", "--json").stdout)["hits"]) == 4

    rescan = ki("source", "rescan")
    assert f"scanned {estate}: 4 files: 0 new, 0 changed, 4 unchanged, 0 restored; 0 tombstoned" in \
        rescan.stderr.splitlines()
    assert ki("source", "rescan", "99", code=2).stderr.splitlines() == [
        "no such source: 99 (`ki source list` shows the sources)"]
