"""A file deleted while ``ki watch`` runs, as the real commands on a fresh data directory: one deletion
the watcher sees (its folder still listed) leaves search at once; more at once than
``pipeline.watch.delete_at_once_max`` wait for ``pipeline.deletion_confirmations``, and until then every
hit of them says "missing from the share since …" (ki/adapters/sources/scan.py ``seen_gone``,
ki/adapters/search/search.py
``missing_note``).

Three small files, a real ``ki watch`` process (~1-2 min under load).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess

import pytest

from tests.helpers.ki_command import KI
from tests.helpers.outage import wait_until

pytestmark = pytest.mark.timeout(900)


def _paths(ki, query: str) -> dict[str, dict]:
    """path → hit of ``ki search QUERY --json``."""
    return {h["path"]: h for h in json.loads(ki("search", query, "--json").stdout)["hits"]}


def test_deleted_file_leaves_search_at_once_and_a_mass_deletion_is_marked(ki):
    ki("config", "set", "pipeline.watch.settle_seconds", "0.5")
    ki("config", "set", "pipeline.watch.delete_at_once_max", "1")
    estate = ki.base / "estate"
    estate.mkdir()
    for name in ("a", "b", "c"):
        (estate / f"{name}.txt").write_text(f"Mietvertrag {name}: Übergabe der Wohnung im dritten Stock.\n")
    ki("insert", str(estate))
    assert sorted(_paths(ki, "Mietvertrag")) == [str(estate / f"{n}.txt") for n in "abc"]

    watch = subprocess.Popen([*KI, "watch", str(estate)], env=ki.env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def watching() -> bool:
            sources = json.loads(ki("status", "--json").stdout)["watch"]
            return bool(sources) and sources[0]["state"] == "watching" and bool(sources[0]["last_full_scan_at"])
        assert wait_until(watching, 180, step=0.5), "the watcher did not start"

        (estate / "a.txt").unlink()  # one file, its folder still listed: tombstoned by the watcher's scan
        assert wait_until(lambda: str(estate / "a.txt") not in _paths(ki, "Mietvertrag"), 180, step=0.5), \
            "a.txt still found after the watcher saw it deleted"

        (estate / "b.txt").unlink()  # two at once: more than delete_at_once_max, confirmations decide
        (estate / "c.txt").unlink()

        def both_marked() -> bool:
            hits = _paths(ki, "Mietvertrag")
            return all((hits.get(str(estate / n)) or {}).get("missing_since") for n in ("b.txt", "c.txt"))
        assert wait_until(both_marked, 180, step=0.5), "b.txt and c.txt not marked missing"
    finally:
        watch.send_signal(signal.SIGINT)  # Ctrl-C, as a user stops it
        try:
            watch.wait(timeout=60)
        except subprocess.TimeoutExpired:
            watch.kill()  # its shutdown is not what this test checks
            watch.wait(timeout=60)

    hits = _paths(ki, "Mietvertrag")
    assert sorted(hits) == [str(estate / "b.txt"), str(estate / "c.txt")]  # searchable until confirmed
    for hit in hits.values():
        assert re.fullmatch(r"missing from the share since \d{4}-\d\d-\d\d \d\d:\d\d UTC", hit["missing"]), hit
    out = ki("search", "Mietvertrag").stdout.splitlines()
    for name in ("b.txt", "c.txt"):
        at = next(i for i, line in enumerate(out) if line.endswith(")") and f"{estate / name}  (score" in line)
        assert re.fullmatch(r"    \(missing from the share since \d{4}-\d\d-\d\d \d\d:\d\d UTC: tombstoned once the "
                            r"deletion is confirmed\)", out[at + 1]), out
